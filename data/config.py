"""The `[data]` table of a run config: which corpus to read, how to split it, how big a vocabulary.

`DataConfig.from_toml("configs/small.toml", ["--data.vocab_size=512"])` reads the `[data]` table of a
config file and applies command-line overrides, whose values are parsed as TOML (bare words are strings).
"""

import codecs
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from model.errors import UserError


class DataError(UserError):
    """A corpus, tokenizer or data setting the user has to fix; the message says what to do."""


# data.vocab_size = "auto": the vocabulary grows with the training text, (characters below, size). 2048 was
# best at 57,000 characters, 4096 beat 2048 at 393,000 (README, "Defaults that follow the corpus"); more
# than 4096 was not measured, so the rule stops there.
VOCAB_STEPS = ((300_000, 2048),)
LARGEST_AUTO_VOCAB = 4096


def auto_vocab_size(train_chars: int) -> int:
    """The vocabulary size that data.vocab_size = "auto" picks for this many characters of training text."""
    return next((size for limit, size in VOCAB_STEPS if train_chars < limit), LARGEST_AUTO_VOCAB)


@dataclass
class DataConfig:
    source: str = "builtin"  # "builtin", a path (.txt, directory, .jsonl, .json, .csv, .parquet) or "hf:NAME"
    val_source: str = ""  # held-out text read like `source`; replaces the split when set
    val_fraction: float = 0.1  # share of characters held out: whole documents from the end, else the tail
    encoding: str = "utf-8"  # text file encoding, e.g. "cp949" for Korean Windows files
    text_field: str = "text"  # the text column of .jsonl/.json/.csv/.parquet and hf: sources
    hf_config: str = ""  # the data set configuration name of an hf: source
    hf_split: str = "train"
    vocab_size: int | str = 2048  # "auto": by the corpus's size (data.config.auto_vocab_size)
    tokenizer: str = ""  # empty: train a BPE; else a checkpoint or Hugging Face GPT-2 dir whose tokenizer to use
    cache_dir: str = "data/cache"

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "vocab_size" and value == "auto":
                continue
            wanted, kind = {str: (str, "a string"), int: (int, "an integer"), float: ((int, float), "a number"),
                            int | str: (int, 'an integer or "auto"')}[f.type]
            if isinstance(value, bool) or not isinstance(value, wanted):
                raise DataError(f"data.{f.name} must be {kind}, got {value!r}; fix the [data] table or option")
        if not self.source:
            raise DataError('data.source is empty; use "builtin", a path or "hf:NAME"')
        if not 0 < self.val_fraction < 1:
            raise DataError(f"data.val_fraction must be between 0 and 1, got {self.val_fraction}; try 0.1")
        if self.vocab_size != "auto" and self.vocab_size < 300:
            raise DataError(
                f"data.vocab_size must be at least 300 (256 byte tokens, <|endoftext|> and some characters), "
                f"got {self.vocab_size}; try 2048")
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise DataError(f"unknown data.encoding {self.encoding!r}; try utf-8, cp949 or euc-kr") from None

    @classmethod
    def from_dict(cls, table: dict) -> "DataConfig":
        """Build from a `[data]` table; an unknown key is an error that lists the valid ones."""
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(table) - set(valid))
        if unknown:
            raise DataError(f"unknown key {unknown[0]!r} in [data]; valid keys: {', '.join(valid)}")
        return cls(**table)

    @classmethod
    def from_toml(cls, path: str | Path, overrides: list[str] = ()) -> "DataConfig":
        """Read the `[data]` table of a TOML file, then apply `--data.KEY=VALUE` overrides."""
        table = read_toml(path, DataError).get("data", {})
        if not isinstance(table, dict):
            raise DataError(f"data in {path} must be a table [data]; fix the file")
        for arg in overrides:
            key, value = parse_override(arg)
            table[key] = value
        return cls.from_dict(table)


def read_toml(path: str | Path, error: type[UserError]) -> dict:
    """The parsed TOML file `path` of --config; `error` (one line) when it is missing, unreadable or not TOML."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"config file {path} not found; pass --config configs/small.toml or another file") from None
    except IsADirectoryError:
        raise error(f"config file {path} is a directory; pass --config a TOML file such as configs/small.toml") from None
    except OSError as e:
        raise error(f"cannot read config file {path} ({e.strerror}); pass --config a readable TOML file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise error(f"config file {path} is not valid TOML ({e}); fix the file") from None


def parse_override(arg: str) -> tuple[str, object]:
    """`--data.vocab_size=512` -> ("vocab_size", 512); a value that is not TOML is taken as a string."""
    name, eq, text = arg.removeprefix("--").partition("=")
    if not arg.startswith("--data.") or not eq:
        raise DataError(f"bad option {arg!r}; write overrides as --data.KEY=VALUE, e.g. --data.vocab_size=512")
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    return name.removeprefix("data."), value
