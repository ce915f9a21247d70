"""Readable labels for tokens, for plots, tables and the HTML page.

A token of the byte-fallback BPE is either a run of whole characters (spaces kept literally) or one
raw byte written `<0xNN>`. A label keeps the characters and makes the invisible ones visible:

    " 대한"  -> "␣대한"      word-initial space
    "\n"     -> "↵"          newline (tab "⇥", carriage return "␍")
    "<0xEC>" -> "<0xEC>"     a byte piece of a character stays as it is, never a mojibake half
    "\u200b" -> "<U+200B>"   other control, format or unusual space characters by code point

Imported tokenizers spell their pieces otherwise; a label is made from the bytes a piece stands for
(data/token_bytes.py), so KoGPT2's `▁대한` reads "␣대한" too. A piece whose bytes end inside a character
shows the stray bytes as `<0xNN>`: "␣<0xEB><0x8C>".
"""

import unicodedata

from data.token_bytes import byte_of_token, piece_reader
from data.tokenizer import special_ids

VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
# Control, format, separator, private-use, surrogate and unassigned characters have no glyph of their own.
INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}


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


def bytes_label(data: bytes) -> str:
    """The characters of `data` made visible (see `char_label`), bytes outside a whole character as <0xNN>."""
    text = data.decode("utf-8", errors="surrogateescape")  # a stray byte b becomes U+DC00 + b
    return "".join(f"<0x{ord(ch) - 0xDC00:02X}>" if "\udc80" <= ch <= "\udcff" else char_label(ch) for ch in text)


def token_pieces(tokenizer, ids) -> list[str]:
    """The vocabulary pieces of `ids`, exactly as stored in the tokenizer."""
    return [tokenizer.id_to_token(int(i)) for i in ids]


def token_labels(tokenizer, ids) -> list[str]:
    """Readable labels of `ids` (see the module docstring); special tokens by their name."""
    read, special = piece_reader(tokenizer), set(special_ids(tokenizer))
    pieces = token_pieces(tokenizer, ids)
    return [token_label(p) if int(i) in special or byte_of_token(p) is not None else bytes_label(read(p))
            for i, p in zip(ids, pieces)]  # fmt: skip


def display_width(text: str) -> int:
    """Terminal columns of `text`: Hangul and other wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int, right: bool = False) -> str:
    """`text` padded with spaces to `width` terminal columns (aligned right with `right`)."""
    gap = " " * max(0, width - display_width(text))
    return gap + text if right else text + gap
