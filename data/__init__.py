"""The data side: corpus sources, the BPE tokenizer, token shards and the batch loader.

    python -m data.prepare --config configs/small.toml     # corpus -> tokenizer.json + train.bin/val.bin

`data.prepare.prepare(cfg)` builds or reuses the shards, `data.loader.BatchLoader` draws training windows.
Importing the package loads nothing else, so `python -m data.prepare` can catch a Ctrl-C while torch loads.
"""
