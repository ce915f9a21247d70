"""The bytes each token stands for, read off a tokenizer's own decoder (ours, `▁`-style and byte-level).

    read = piece_reader(tok); read("▁대한") == " 대한".encode()
    token_bytes(tok, vocab_size)[i]        # the bytes of id i: what streaming decodes character by character

A token of our byte-fallback BPE is either a run of whole characters (spaces kept literally) or one raw
byte written `<0xNN>`. Imported tokenizers spell their pieces otherwise: KoGPT2's `▁대한` (Metaspace) is
" 대한", GPT-2's byte-level `ĠëĮĢ` is the bytes " \\xeb\\x8c\\x80" (" 대"). Special tokens stand for no bytes.

A jamo tokenizer's pieces (data.unit = "jamo") stand for their conjoining jamo as they are: the piece 각
written \\u1100\\u1161\\u11a8 is those three characters' bytes. Its decoder joins jamo into syllables across pieces,
which no piece alone can do, so a reader of these bytes joins them as the decoder does (data.jamo.compose,
data.jamo.Composing).
"""

import json
import re
from collections.abc import Callable

from data.jamo import compose
from data.tokenizer import special_ids

BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def byte_of_token(piece: str) -> int | None:
    """The byte value of a byte-fallback token such as `<0xEC>`, else None."""
    m = BYTE_TOKEN.fullmatch(piece)
    return int(m.group(1), 16) if m else None


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level letters -> bytes: printable Latin-1 bytes stand for themselves, the other 68
    (controls, space, NBSP, soft hyphen) for the letters from U+0100 on, in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(0x100 + i): b for i, b in enumerate(others)}


def joins_jamo(pattern: str, content: str) -> bool:
    """Whether a decoder's Replace step is a jamo tokenizer's joining of one syllable (data.jamo.compose_rules)."""
    return len(content) == 1 and compose(pattern) == content != pattern


def piece_reader(tokenizer) -> Callable[[str], bytes]:
    """A function from a vocabulary piece to the bytes it stands for, read off the tokenizer's decoder."""
    decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
    steps = decoder.get("decoders", []) if decoder.get("type") == "Sequence" else [decoder]
    if any(step.get("type") == "ByteLevel" for step in steps):
        alphabet = byte_level_alphabet()
        return lambda piece: bytes(alphabet[c] for c in piece) if all(c in alphabet for c in piece) else piece.encode()
    # Metaspace writes a space as its replacement (▁); a sentencepiece-style Replace rule does the same
    swaps = [(step["replacement"], " ") for step in steps if step.get("type") == "Metaspace"]
    swaps += [(step["pattern"]["String"], step["content"]) for step in steps
              if step.get("type") == "Replace" and "String" in step.get("pattern", {})
              and not joins_jamo(step["pattern"]["String"], step["content"])]  # fmt: skip

    def read(piece: str) -> bytes:
        byte = byte_of_token(piece)
        if byte is not None:
            return bytes([byte])
        for old, new in swaps:
            piece = piece.replace(old, new)
        return piece.encode("utf-8")

    return read


def token_bytes(tokenizer, vocab_size: int) -> list[bytes]:
    """The bytes of every id below vocab_size: special tokens and ids without a piece stand for none."""
    read, special = piece_reader(tokenizer), set(special_ids(tokenizer))
    pieces = [tokenizer.id_to_token(i) for i in range(vocab_size)]
    return [b"" if piece is None or i in special else read(piece) for i, piece in enumerate(pieces)]
