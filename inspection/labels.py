"""Readable labels for tokens, for plots, tables and the HTML page, and the bytes each token stands for.

A token of the byte-fallback BPE is either a run of whole characters (spaces kept literally) or one
raw byte written `<0xNN>`. A label keeps the characters and makes the invisible ones visible:

    " 대한"  -> "␣대한"      word-initial space
    "\n"     -> "↵"          newline (tab "⇥", carriage return "␍")
    "<0xEC>" -> "<0xEC>"     a byte piece of a character stays as it is, never a mojibake half
    "\u200b" -> "<U+200B>"   other control, format or unusual space characters by code point

Imported tokenizers spell their pieces otherwise, and `piece_reader` follows their decoder back to
bytes: KoGPT2's `▁대한` (Metaspace) is " 대한", GPT-2's byte-level `ĠëĮĢ` is the bytes " \xeb\x8c\x80"
(" 대"). A piece whose bytes end inside a character shows the stray bytes as `<0xNN>`: "␣<0xEB><0x8C>".
`token_bytes` is the same reading for every id, which streaming decodes character by character.
"""

import json
import re
import unicodedata
from collections.abc import Callable

BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
# Control, format, separator, private-use, surrogate and unassigned characters have no glyph of their own.
INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}


def byte_of_token(piece: str) -> int | None:
    """The byte value of a byte-fallback token such as `<0xEC>`, else None."""
    m = BYTE_TOKEN.fullmatch(piece)
    return int(m.group(1), 16) if m else None


def char_label(ch: str) -> str:
    """One character made visible: whitespace as a symbol, invisible characters as `<U+XXXX>`."""
    if ch in VISIBLE:
        return VISIBLE[ch]
    if unicodedata.category(ch) in INVISIBLE_CATEGORIES:
        return f"<U+{ord(ch):04X}>"
    return ch


def token_label(piece: str) -> str:
    """The readable label of one vocabulary piece (as `Tokenizer.id_to_token` returns it)."""
    if byte_of_token(piece) is not None:
        return piece.upper().replace("0X", "0x")
    return "".join(char_label(ch) for ch in piece)


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level letters -> bytes: printable Latin-1 bytes stand for themselves, the other 68
    (controls, space, NBSP, soft hyphen) for the letters from U+0100 on, in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(0x100 + i): b for i, b in enumerate(others)}


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
              if step.get("type") == "Replace" and "String" in step.get("pattern", {})]  # fmt: skip

    def read(piece: str) -> bytes:
        byte = byte_of_token(piece)
        if byte is not None:
            return bytes([byte])
        for old, new in swaps:
            piece = piece.replace(old, new)
        return piece.encode("utf-8")

    return read


def special_ids(tokenizer) -> set[int]:
    return {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}


def token_bytes(tokenizer, vocab_size: int) -> list[bytes]:
    """The bytes of every id below vocab_size: special tokens and ids without a piece stand for none."""
    read, special = piece_reader(tokenizer), special_ids(tokenizer)
    pieces = [tokenizer.id_to_token(i) for i in range(vocab_size)]
    return [b"" if piece is None or i in special else read(piece) for i, piece in enumerate(pieces)]


def bytes_label(data: bytes) -> str:
    """The characters of `data` made visible (see `char_label`), bytes outside a whole character as <0xNN>."""
    text = data.decode("utf-8", errors="surrogateescape")  # a stray byte b becomes U+DC00 + b
    return "".join(f"<0x{ord(ch) - 0xDC00:02X}>" if "\udc80" <= ch <= "\udcff" else char_label(ch) for ch in text)


def token_pieces(tokenizer, ids) -> list[str]:
    """The vocabulary pieces of `ids`, exactly as stored in the tokenizer."""
    return [tokenizer.id_to_token(int(i)) for i in ids]


def token_labels(tokenizer, ids) -> list[str]:
    """Readable labels of `ids` (see the module docstring); special tokens by their name."""
    read, special = piece_reader(tokenizer), special_ids(tokenizer)
    pieces = token_pieces(tokenizer, ids)
    return [token_label(p) if int(i) in special or byte_of_token(p) is not None else bytes_label(read(p))
            for i, p in zip(ids, pieces)]  # fmt: skip


def display_width(text: str) -> int:
    """Terminal columns of `text`: Hangul and other wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int) -> str:
    """`text` padded with spaces to `width` terminal columns."""
    return text + " " * max(0, width - display_width(text))
