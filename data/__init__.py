"""The data side: corpus sources, the BPE tokenizer, token shards and the batch loader.

    python -m data.prepare --config configs/small.toml     # corpus -> tokenizer.json + train.bin/val.bin

`data.prepare.prepare(cfg)` builds or reuses the shards, `data.loader.BatchLoader` draws training windows.
"""

from data.config import DataConfig, DataError

__all__ = ["DataConfig", "DataError"]
