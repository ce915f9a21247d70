"""The BPE tokenizer: train on the training split, save as a standard `tokenizer.json`, load it back.

Tokens are whole characters (NFC, so one per Hangul syllable) and merges of them inside a word; a character
outside the vocabulary falls back to its UTF-8 bytes `<0x00>`..`<0xFF>`, so nothing is unknown and
`decode(encode(s)) == NFC(s)` for every string (decode with `skip_special_tokens=False` if `s` itself
contains `<|endoftext|>`). Spaces stay literal: no `▁`, no byte-to-letter mapping.

    tok = train_tokenizer(["대한민국 헌법", ...], vocab_size=2048)
    tok.save("tokenizer.json"); tok = load_tokenizer("tokenizer.json")
"""

import json
from pathlib import Path
from typing import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from data.config import DataError
from model import io

EOT = "<|endoftext|>"
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]
# Words keep their leading space; numbers, punctuation runs, line breaks and other whitespace stand alone,
# so merges never cross a word boundary. Every character matches some branch, so nothing is dropped.
WORDS = r" ?[\p{L}\p{M}]+| ?\p{N}+| ?[^\s\p{L}\p{M}\p{N}]+|\s*[\r\n]+|\s+(?!\S)|\s+"


def train_tokenizer(texts_iter: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train BPE on texts; ids: 0 `<|endoftext|>`, 1..256 the byte tokens, then characters and merges."""
    tok = new_tokenizer(models.BPE())
    # Characters get at most 3/4 of the non-byte slots (the most frequent ones); rarer ones become bytes.
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(BYTE_TOKENS), special_tokens=[EOT],
                                  limit_alphabet=(vocab_size - 1 - len(BYTE_TOKENS)) * 3 // 4,
                                  show_progress=False)  # its bars print blank lines to stdout
    tok.train_from_iterator(texts_iter, trainer=trainer)
    # The trainer cannot add byte tokens that never occur, so rebuild the model with them after EOT.
    trained = json.loads(tok.to_str())["model"]
    vocab = {EOT: 0} | {b: i + 1 for i, b in enumerate(BYTE_TOKENS)}
    for token, _ in sorted(trained["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(pair) for pair in trained["merges"]]
    tok = new_tokenizer(models.BPE(vocab, merges, byte_fallback=True))
    tok.add_special_tokens([EOT])
    return tok


def new_tokenizer(model: models.Model) -> Tokenizer:
    tok = Tokenizer(model)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(WORDS), behavior="isolated")
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
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


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a prepared `tokenizer.json`; a missing or broken file is a DataError."""
    return io.load_tokenizer(path, hint="run `python -m data.prepare` to rebuild it", error=DataError)


def tokenizer_hash(tok: Tokenizer) -> str:
    """A digest of the whole tokenizer (vocabulary, merges, normaliser, pre-tokenizer, decoder)."""
    return io.tokenizer_hash(tok)  # one formula, which imported checkpoints' meta.json use too
