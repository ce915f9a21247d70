"""Readable labels for tokens, for plots, tables and the HTML page.

A token of the byte-fallback BPE is either a run of whole characters (spaces kept literally) or one
raw byte written `<0xNN>`. A label keeps the characters and makes the invisible ones visible:

    " 대한"  -> "␣대한"      word-initial space
    "\n"     -> "↵"          newline (tab "⇥", carriage return "␍")
    "<0xEC>" -> "<0xEC>"     a byte piece of a character stays as it is, never a mojibake half
    "\u200b" -> "<U+200B>"   other control, format or unusual space characters by code point
"""

import re
import unicodedata

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


def token_pieces(tokenizer, ids) -> list[str]:
    """The vocabulary pieces of `ids`, exactly as stored in the tokenizer."""
    return [tokenizer.id_to_token(int(i)) for i in ids]


def token_labels(tokenizer, ids) -> list[str]:
    """Readable labels of `ids` (see the module docstring)."""
    return [token_label(p) for p in token_pieces(tokenizer, ids)]


def display_width(text: str) -> int:
    """Terminal columns of `text`: Hangul and other wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int) -> str:
    """`text` padded with spaces to `width` terminal columns."""
    return text + " " * max(0, width - display_width(text))
