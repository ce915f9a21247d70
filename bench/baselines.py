"""Compression baselines for the validation split: how many bits per character a general compressor needs.

    python bench/baselines.py                              # the split of configs/small.toml
    python bench/baselines.py --config configs/tiny.toml --data.source=corpus.txt

The split is the project's own (data/split.py, the same as `data.prepare`). For each compressor the
incremental cost is printed: bits of compress(train + val) minus bits of compress(train), over val's
characters: what coding the held-out text costs a compressor that has seen the training text, the
figure to set beside a model's validation bits per character. `xz -9e` is the strongest of the three.
"""

import argparse
import bz2
import lzma
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from data.config import DataConfig  # noqa: E402
from training.config import load_config  # noqa: E402
from data.sources import open_source  # noqa: E402
from data.split import plan_split, split_chunks  # noqa: E402
from cli.errors import UserError  # noqa: E402

COMPRESSORS = {
    "xz -9e": lambda b: lzma.compress(b, format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME),
    "bzip2 -9": lambda b: bz2.compress(b, 9),
    "gzip -9": lambda b: zlib.compress(b, 9),
}


def split_texts(cfg: DataConfig) -> tuple[str, str]:
    """The train and validation text of `cfg`, split exactly as `data.prepare` splits it."""
    train = open_source(cfg.source, cfg)
    if cfg.val_source:
        val = open_source(cfg.val_source, cfg)
        return join_chunks(train.chunks()), join_chunks(val.chunks())
    plan = plan_split(train.chunks(), cfg.val_fraction, train.name)
    return (join_chunks(split_chunks(train.chunks(), plan, "train")),
            join_chunks(split_chunks(train.chunks(), plan, "val")))


def join_chunks(chunks) -> str:
    """The documents' text, a line break between two documents (not counted as a character of either)."""
    return "".join(("\n" if first and i else "") + text for i, (first, text) in enumerate(chunks))


def incremental_bits_per_char(compress, train: str, val: str) -> float:
    """(bits of compress(train + val) - bits of compress(train)) / characters of val."""
    train_bytes, val_bytes = train.encode("utf-8"), ("\n" + val).encode("utf-8")
    extra_bytes = len(compress(train_bytes + val_bytes)) - len(compress(train_bytes))
    return 8 * extra_bytes / len(val)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="configs/small.toml", help="TOML file whose [data] table is used")
    args, overrides = parser.parse_known_args(argv)
    try:
        cfg = load_config(args.config, overrides).data
        train, val = split_texts(cfg)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"source {cfg.source}: train {len(train):,} chars, val {len(val):,} chars "
          f"({len(val.encode('utf-8')):,} UTF-8 bytes)")
    print(f"{'compressor':10} {'val | train':>12} {'val alone':>10}   bits/char")
    for name, compress in COMPRESSORS.items():
        given_train = incremental_bits_per_char(compress, train, val)
        alone = 8 * len(compress(val.encode("utf-8"))) / len(val)
        print(f"{name:10} {given_train:12.3f} {alone:10.3f}")


if __name__ == "__main__":
    main()
