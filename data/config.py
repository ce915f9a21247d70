"""The `[data]` table of a run config: which corpus to read, how to split it, what BPE starts from, how big a vocabulary.

    DataConfig(source="texts/", vocab_size="auto")      # checked when made; bad values raise DataError

training/config.py reads it from a TOML file with the other tables (`load_config(path, overrides).data`).
"""

import codecs
from dataclasses import dataclass, fields

from cli.errors import UserError, check_utf8


class DataError(UserError):
    """A corpus, tokenizer or data setting the user has to fix; the message says what to do."""


# data.unit: what BPE starts from: whole Hangul syllables, or their jamo (data/jamo.py)
UNITS = ("syllables", "jamo")
# data.vocab_size = "auto": the vocabulary grows with the training text, (characters below, size), as measured
# in docs/recipe.md; the rule stops at the largest size measured.
VOCAB_STEPS = ((300_000, 2048),)
LARGEST_AUTO_VOCAB = 4096
# The BPE trainer allocates tables in proportion to the size asked for (57 bytes a token: 10**10 would be 570 GB);
# the largest vocabularies in use have about 256,000 tokens.
MAX_VOCAB = 1 << 20


def auto_vocab_size(train_chars: int) -> int:
    """The vocabulary size that data.vocab_size = "auto" picks for this many characters of training text."""
    return next((size for limit, size in VOCAB_STEPS if train_chars < limit), LARGEST_AUTO_VOCAB)


@dataclass
class DataConfig:
    source: str = "builtin"  # "builtin", a path (.txt, directory, .jsonl, .json, .csv, .parquet), "hf:NAME", "corpus:NAME"
    val_source: str = ""  # held-out text read like `source`; replaces the split when set
    val_fraction: float = 0.1  # share of characters held out: whole documents from the end, else the tail
    encoding: str = "utf-8"  # text file encoding, e.g. "cp949" for Korean Windows files
    text_field: str = "text"  # the text column of .jsonl/.json/.csv/.parquet and hf: sources
    hf_config: str = ""  # the data set configuration name of an hf: source
    hf_split: str = "train"
    vocab_size: int | str = 2048  # "auto": by the corpus's size (data.config.auto_vocab_size)
    unit: str = "syllables"  # what BPE starts from: "syllables" (NFC characters) or "jamo" (초성·중성·종성)
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
        if self.unit not in UNITS:
            raise DataError(f'data.unit must be "syllables" or "jamo", got {self.unit!r}; "syllables" starts BPE from '
                            f'whole Hangul syllables, "jamo" from 초성·중성·종성')
        if not self.source:
            raise DataError('data.source is empty; use "builtin", a path or "hf:NAME"')
        if not 0 < self.val_fraction < 1:
            raise DataError(f"data.val_fraction must be between 0 and 1, got {self.val_fraction}; try 0.1")
        if self.vocab_size != "auto" and self.vocab_size < 300:
            raise DataError(
                f"data.vocab_size must be at least 300 (256 byte tokens, <|endoftext|> and some characters), "
                f"got {self.vocab_size}; try 2048")
        if self.vocab_size != "auto" and self.vocab_size > MAX_VOCAB:
            raise DataError(f"data.vocab_size = {self.vocab_size} is absurdly large (at most {MAX_VOCAB:,}); try 2048")
        try:
            codec = codecs.lookup(self.encoding)
        except LookupError:
            raise DataError(f"unknown data.encoding {self.encoding!r}; try utf-8, cp949 or euc-kr") from None
        if not codec._is_text_encoding:  # base64, rot13, zlib: codecs that turn bytes into bytes
            raise DataError(f"data.encoding {self.encoding!r} is not a text encoding; try utf-8, cp949 or euc-kr")
        # the tokenizers library writes and reads the cache, and takes only UTF-8 paths
        check_utf8(self.cache_dir, f"data.cache_dir {self.cache_dir!r}", "give a directory whose name is UTF-8")
