"""The BPE tokenizer: train on the training split, save as a standard `tokenizer.json`, load it back.

Tokens are whole characters (NFC, so one per Hangul syllable) and merges of them inside a word; a character
outside the vocabulary falls back to its UTF-8 bytes `<0x00>`..`<0xFF>`, so nothing is unknown and
`decode(encode(s)) == NFC(s)` for every string (decode with `skip_special_tokens=False` if `s` itself
contains `<|endoftext|>`). Spaces stay literal: no `▁`, no byte-to-letter mapping.

With `unit="jamo"` (data.unit) the normalizer then splits each Hangul syllable into its 초성, 중성 and 종성
(data/jamo.py: the syllables only), so BPE starts from jamo and learns syllables and longer pieces as merges,
and the decoder joins them back: `decode(encode(s)) == NFC(s)` still holds.

    tok = train_tokenizer(["대한민국 헌법", ...], vocab_size=2048)            # unit="syllables"
    tok = train_tokenizer(["대한민국 헌법", ...], vocab_size=2048, unit="jamo")
    tok.save("tokenizer.json"); tok = load_tokenizer("tokenizer.json")
    tokenizer_hash(tok), special_ids(tok)
    bare, normalize = fast_encoder(tok); bare.encode(normalize(text)).ids == tok.encode(text).ids

`load_tokenizer` is the one way in for every tokenizer.json (a run's, a checkpoint's, an imported model's),
and `tokenizer_hash` the one digest that the data cache, checkpoints and resumes compare.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from data.config import UNITS, DataError
from data.jamo import compose_rules, decompose_rules, split
from cli.errors import UserError
from storage.user_files import read_user_file

EOT = "<|endoftext|>"
TOKENIZER_BYTES = 256 << 20  # a tokenizer.json: GPT-2's is 1.4 MB, the largest vocabularies' some 30 MB
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
# Words keep their leading space; numbers, punctuation runs, line breaks and other whitespace stand alone,
# so merges never cross a word boundary. Every character matches some branch, so nothing is dropped.
WORDS = r" ?[\p{L}\p{M}]+| ?\p{N}+| ?[^\s\p{L}\p{M}\p{N}]+|\s*[\r\n]+|\s+(?!\S)|\s+"


def train_tokenizer(texts_iter: Iterable[str], vocab_size: int, unit: str = "syllables") -> Tokenizer:
    """Train BPE on texts; ids: 0 `<|endoftext|>`, 1..256 the byte tokens, then characters (jamo for
    `unit="jamo"`) and merges."""
    texts = [*map(normalizing(unit), texts_iter)]  # as the normalizer would, at once
    tok = new_tokenizer(models.BPE(), unit)
    tok.normalizer = None
    # Characters get at most 3/4 of the non-byte slots (the most frequent ones); rarer ones become bytes.
    kept = frequent_characters(texts, (vocab_size - 1 - len(BYTE_TOKENS)) * 3 // 4)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(BYTE_TOKENS), special_tokens=[EOT],
                                  initial_alphabet=kept, limit_alphabet=len(kept),
                                  show_progress=False)  # its bars print blank lines to stdout
    tok.train_from_iterator(texts, trainer=trainer)
    # The trainer cannot add byte tokens that never occur, so rebuild the model with them after EOT.
    trained = json.loads(tok.to_str())["model"]
    vocab = {EOT: 0} | {b: i + 1 for i, b in enumerate(BYTE_TOKENS)}
    for token, _ in sorted(trained["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(pair) for pair in trained["merges"]]
    tok = new_tokenizer(models.BPE(vocab, merges, byte_fallback=True), unit)
    tok.add_special_tokens([EOT])
    return tok


def frequent_characters(texts: list[str], n: int) -> list[str]:
    """The `n` most frequent characters of the (normalized) texts, ties by code point: chosen here because the BPE
    trainer breaks ties at its alphabet's limit at random."""
    counts = Counter()
    for text in texts:
        counts.update(text)
    return sorted(counts, key=lambda ch: (-counts[ch], ch))[:n]


def normalizing(unit: str) -> Callable[[str], str]:
    """What the normalizer of a `unit` tokenizer does to a text, in one fast call: the tokenizers library's own NFC,
    then for jamo `data.jamo.split` (str.translate: about 50 times faster than the 68 Replace steps it equals)."""
    nfc = normalizers.NFC().normalize_str
    return (lambda text: split(nfc(text))) if unit == "jamo" else nfc


@cache
def normalizer_spec(unit: str) -> str:
    return json.dumps(json.loads(new_tokenizer(models.BPE(), unit).to_str())["normalizer"])


def fast_encoder(tok: Tokenizer) -> tuple[Tokenizer, Callable[[str], str] | None]:
    """For encoding a corpus: a copy of `tok` without its normalizer and the function that does that normalizer's
    work (`normalizing`), when the normalizer is one this module writes; else `(tok, None)`. The same ids."""
    spec = json.loads(tok.to_str())
    unit = next((u for u in UNITS if json.dumps(spec["normalizer"]) == normalizer_spec(u)), None)
    if unit is None:
        return tok, None
    bare = Tokenizer.from_str(json.dumps({**spec, "normalizer": None}))
    bare.encode_special_tokens = tok.encode_special_tokens
    return bare, normalizing(unit)


def new_tokenizer(model: models.Model, unit: str = "syllables") -> Tokenizer:
    jamo = unit == "jamo"
    tok = Tokenizer(model)
    tok.normalizer = normalizers.Sequence([normalizers.NFC(), *decompose_rules()]) if jamo else normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(WORDS), behavior="isolated")
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(), *(compose_rules() if jamo else [])])
    return tok


def continuation_tokenizer(tok: Tokenizer) -> Tokenizer:
    """`tok` for text that continues a document: without the word-start marker some tokenizers put in front
    of every text they encode (Metaspace's `▁`, ByteLevel's prefix space, a `Prepend` normalizer), which
    would add a space where a long document was cut into chunks. `tok` itself when it adds none (ours)."""
    spec = json.loads(tok.to_str())
    changed = False
    for key, children in (("pre_tokenizer", "pretokenizers"), ("normalizer", "normalizers")):
        spec[key], found = without_prefix(spec.get(key), children)
        changed |= found
    if not changed:
        return tok
    inner = Tokenizer.from_str(json.dumps(spec))
    inner.encode_special_tokens = tok.encode_special_tokens
    return inner


def without_prefix(node, children: str) -> tuple[dict | None, bool]:
    """A pre-tokenizer or normalizer (as JSON) that adds no prefix, and whether it had one."""
    kind = node.get("type") if isinstance(node, dict) else None
    if kind == "Prepend":
        return None, True
    if kind == "Sequence":
        parts = [without_prefix(child, children) for child in node[children]]
        return {**node, children: [c for c, _ in parts if c is not None]}, any(found for _, found in parts)
    if kind == "Metaspace" and node.get("prepend_scheme", "always") != "never":
        return {**node, "prepend_scheme": "never"}, True
    if kind == "ByteLevel" and node.get("add_prefix_space"):
        return {**node, "add_prefix_space": False}, True
    return node, False


def load_tokenizer(path: str | Path, hint: str = "run `python -m data.prepare` to rebuild it",
                   error: type[UserError] = DataError) -> Tokenizer:
    """A tokenizer.json; `error(...)` ending with `hint` if it is missing or damaged."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path} is {'not a readable file' if path.is_symlink() or path.exists() else 'missing'}; {hint}")
    data = read_user_file(path, "", hint, TOKENIZER_BYTES, error)  # a regular file, read with a bound
    try:
        tok = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as e:  # tokenizers raises a bare Exception for unreadable JSON
        raise error(f"{path} is damaged ({str(e).splitlines()[0]}); {hint}") from None
    # One rule for training and inference: text is text, so a literal "<|endoftext|>" in a corpus or a
    # prompt is never the separator (only code inserts that). tokenizer.json cannot store this setting.
    tok.encode_special_tokens = True
    return tok


def tokenizer_hash(tok: Tokenizer) -> str:
    """A digest of the whole tokenizer (vocabulary, merges, normaliser, pre-tokenizer, decoder)."""
    return hashlib.sha256(tok.to_str().encode()).hexdigest()


def check_fits(tok: Tokenizer, rows: int, file: Path, error: type[UserError]) -> None:
    """`error` unless every id of the tokenizer at `file` has a row in an embedding of `rows` rows."""
    n = max(tok.get_vocab_size(), max(tok.get_vocab().values(), default=-1) + 1)
    if n > rows:
        raise error(f"{file} has {n} tokens but the embedding only {rows} rows; the tokenizer and the weights "
                    f"come from different models")


def special_ids(tok: Tokenizer) -> list[int]:
    """The ids of the tokenizer's special tokens (`<|endoftext|>`, KoGPT2's `</s>`, ...), in id order."""
    return sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)


def ordinary_ids(tok: Tokenizer, vocab_size: int) -> list[int]:
    """The ids below `vocab_size` (the model's embedding rows) that the tokenizer has and that are not special
    tokens: what the random sequences of the induction test are drawn from."""
    special = set(special_ids(tok))
    return [i for i in range(min(tok.get_vocab_size(), vocab_size)) if i not in special]
