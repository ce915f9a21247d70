"""Readable labels for tokens, for plots, tables and the HTML page, and the terminal's text of them: columns that stay
aligned with Hangul in them, vectors, a head's strongest keys.

A token of the byte-fallback BPE is either a run of whole characters (spaces kept literally) or one
raw byte written `<0xNN>`. A label keeps the characters and makes the invisible ones visible:

    " 대한"  -> "␣대한"      word-initial space
    "\n"     -> "↵"          newline (tab "⇥", carriage return "␍")
    "<0xEC>" -> "<0xEC>"     a byte piece of a character stays as it is, never a mojibake half
    "\u200b" -> "<U+200B>"   other control, format or unusual space characters by code point

Imported tokenizers spell their pieces otherwise; a label is made from the bytes a piece stands for
(data/token_bytes.py), so KoGPT2's `▁대한` reads "␣대한" too. A piece whose bytes end inside a character
shows the stray bytes as `<0xNN>`: "␣<0xEB><0x8C>".

A token of a jamo tokenizer (data.unit = "jamo") holds 초성, 중성 and 종성 (conjoining jamo, U+1100..): the
syllables it holds whole are shown as syllables, and the jamo of a syllable it holds only part of as the letters
ㄱ, ㅏ (compatibility jamo), with a hyphen on the side where the rest of that syllable is, in another token:

    ᄀ ᅡ ᆫ ᄃ ᅡ    -> "간다"     whole syllables
    ᆫ ᄃ ᅡ         -> "-ㄴ다"    a 종성 whose syllable began in the token before, then 다
    ᄒ ᅡ ᆫ ᄀ      -> "한ㄱ-"    a 초성 whose 중성 comes in the next token
    ᅡ ᆫ           -> "-ㅏㄴ"    a 중성 and 종성 after a 초성 in the token before
A terminal's monospace font gives a Hangul syllable (or another wide character) two columns, so the widths of the
tables every view prints are counted in columns, not characters (`display_width`).
"""

import re
import unicodedata
from functools import cache

import numpy as np

from data.jamo import compose
from data.token_bytes import byte_of_token, piece_reader
from data.tokenizer import special_ids
from cli.arguments import need_int, need_labels, need_maps
from common.heads_off import head_name

VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
# Conjoining jamo, modern and old (Hangul Jamo and its Extended-A and -B blocks): 초성, 중성, 종성; a run of them,
# and a syllable no precomposed character holds (old Hangul: 초성 + 중성 + 종성, which a font draws as one)
INITIAL, MEDIAL, FINAL = "\u1100-\u115f\ua960-\ua97f", "\u1160-\u11a7\ud7b0-\ud7c6", "\u11a8-\u11ff\ud7cb-\ud7fb"
JAMO_RUN = re.compile(f"[{INITIAL}{MEDIAL}{FINAL}]+")
OLD_SYLLABLE = re.compile(f"([{INITIAL}]+[{MEDIAL}]+[{FINAL}]*)")
STRAY = re.compile("([\udc80-\udcff])")  # a byte that is no character's, as surrogateescape decodes it
PART = "-"  # the side of a partial syllable where the rest of it is
# Control, format, separator, private-use, surrogate and unassigned characters have no glyph of their own.
INVISIBLE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"}


def char_label(ch: str) -> str:
    """One character made visible: whitespace as a symbol, invisible characters as `<U+XXXX>`."""
    if ch in VISIBLE:
        return VISIBLE[ch]
    if unicodedata.category(ch) in INVISIBLE_CATEGORIES:
        return f"<U+{ord(ch):04X}>"
    return ch


@cache
def letter_of(jamo: str) -> str:
    """A conjoining jamo as its compatibility letter (ᄀ and ᆨ -> ㄱ, ᅡ -> ㅏ), or `<U+XXXX>` for one without."""
    name = unicodedata.name(jamo, "")
    letter = re.sub("^HANGUL (CHOSEONG|JUNGSEONG|JONGSEONG) ", "HANGUL LETTER ", name)
    try:
        return unicodedata.lookup(letter) if letter != name else f"<U+{ord(jamo):04X}>"
    except KeyError:  # an old jamo with no letter of its own, or a filler
        return f"<U+{ord(jamo):04X}>"


def partial_label(jamo: str) -> str:
    """Jamo of one syllable that a token holds only part of, as letters marked on the side of the rest."""
    before = PART if re.match(f"[{MEDIAL}{FINAL}]", jamo) else ""  # a 중성 or 종성 first: its 초성 came before
    after = PART if re.match(f"[{INITIAL}]", jamo[-1]) else ""  # a 초성 last: its 중성 comes after
    return before + "".join(letter_of(ch) for ch in jamo) + after


def jamo_label(run: str) -> str:
    """A run of conjoining jamo left over once the modern syllables are joined: old syllables as they are, the
    parts of syllables as `partial_label`s (see the module docstring)."""
    parts = OLD_SYLLABLE.split(run)  # partial, syllable, partial, ..., partial
    return "".join(part if k % 2 else partial_label(part) for k, part in enumerate(parts) if part)


def text_label(text: str) -> str:
    """Text made visible: syllables joined from their jamo, partial ones marked (`jamo_label`), `char_label`."""
    text = JAMO_RUN.sub(lambda m: jamo_label(m.group()), compose(text))
    return "".join(char_label(ch) for ch in text)


def token_label(piece: str) -> str:
    """The readable label of one vocabulary piece (as `Tokenizer.id_to_token` returns it)."""
    if byte_of_token(piece) is not None:
        return piece.upper().replace("0X", "0x")
    return text_label(piece)


def bytes_label(data: bytes) -> str:
    """The characters of `data` made visible (see `text_label`), bytes outside a whole character as <0xNN>."""
    text = data.decode("utf-8", errors="surrogateescape")  # a stray byte b becomes U+DC00 + b
    return "".join(f"<0x{ord(part) - 0xDC00:02X}>" if STRAY.fullmatch(part) else text_label(part)
                   for part in STRAY.split(text))


def token_pieces(tokenizer, ids) -> list[str]:
    """The vocabulary pieces of `ids`, exactly as stored in the tokenizer."""
    return [tokenizer.id_to_token(int(i)) for i in ids]


def vocab_text(tokenizer) -> str:
    """Every token's label, run together: the glyphs a page needs for any text this tokenizer reads."""
    known = [i for i in range(tokenizer.get_vocab_size()) if tokenizer.id_to_token(i) is not None]
    return "".join(token_labels(tokenizer, known))


def token_labels(tokenizer, ids) -> list[str]:
    """Readable labels of `ids` (see the module docstring); special tokens by their name."""
    read, special = piece_reader(tokenizer), set(special_ids(tokenizer))
    pieces = token_pieces(tokenizer, ids)
    return [token_label(p) if int(i) in special or byte_of_token(p) is not None else bytes_label(read(p))
            for i, p in zip(ids, pieces)]  # fmt: skip


def labeller(tokenizer):
    """`label(id)`: one token's readable label (`token_labels`), as the views take it; `<id N>` for an id past the
    tokenizer's vocabulary (a model's rows padded to a round number)."""
    labels: dict[int, str] = {}  # every id's, made at the first call in one pass (a label alone re-reads the decoder)

    def label(token_id: int) -> str:
        if not labels:
            known = [i for i in range(tokenizer.get_vocab_size()) if tokenizer.id_to_token(i) is not None]
            labels.update(zip(known, token_labels(tokenizer, known)))
        return labels.get(token_id, f"<id {token_id}>")

    return label


# ---- the terminal's text ----------------------------------------------------------------------------------------

DIMS = 4  # values shown of a vector


def display_width(text: str) -> int:
    """Terminal columns of `text`: Hangul and other wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int, right: bool = False) -> str:
    """`text` padded with spaces to `width` terminal columns (aligned right with `right`)."""
    gap = " " * max(0, width - display_width(text))
    return gap + text if right else text + gap


def vector(a: np.ndarray, n: int = DIMS, total: int | None = None) -> str:
    """`[ 0.1234, -0.5678, …]`: the first n values, "…" if there are more (`total`: the whole vector's length,
    when `a` holds only its first values)."""
    shown = ", ".join(f"{x: .4f}" for x in a[:n])
    return f"[{shown}{', …' if (total or len(a)) > n else ''}]"


def table(rows: list[list[str]]) -> list[str]:
    """Rows of cells in columns as wide as their widest cell (Hangul takes two terminal columns); the
    token column (the second) is aligned left, the numbers right."""
    widths = [max(display_width(row[c]) for row in rows) for c in range(len(rows[0]))]

    def align(cell, c):
        gap = " " * (widths[c] - display_width(cell))
        return cell + gap if c == 1 else gap + cell

    return ["   " + "  ".join(align(cell, c) for c, cell in enumerate(row)).rstrip() for row in rows]


def with_gaps(keys: list[int], cells) -> list[list[str]]:
    """One row per key from `cells(j)`, and a "…" row wherever keys are skipped."""
    rows, last = [], -1
    for j in keys:
        if j > last + 1:
            rows.append(["…"] + [""] * (len(cells(j)) - 1))
        rows.append(cells(j))
        last = j
    return rows


def off_mark(mode: str | None, say) -> str:
    """" off (mean)" after a switched-off head's name, "" after a head that is on (mode None or "")."""
    return " " + say("ablate.off", mode=say("ablate.short_" + mode)) if mode else ""


def off_names(off: dict, say) -> str:
    """Switched-off heads {(layer, head): mode} as the views name them: "0.0 off (mean), 1.1 off (zero)"."""
    return ", ".join(head_name(l, h) + off_mark(mode, say) for (l, h), mode in sorted(off.items()))


def format_top_attended(att: np.ndarray, labels: list[str], k: int = 3) -> str:
    """For each query token of one head's map `att` (T, T): the `k` keys it attends to most, with their attention."""
    att = need_maps("att", att, dims=2)
    need_labels("labels", labels, att.shape[-1])
    k = need_int("k", k, lo=1)
    width = max(display_width(label) for label in labels)
    lines = []
    for q, label in enumerate(labels):
        top = np.argsort(-att[q, : q + 1], kind="stable")[:k]
        targets = "  ".join(f"{labels[j]}({j}) {att[q, j]:.3f}" for j in top)
        lines.append(f"{q:>4} {pad(label, width)} -> {targets}")
    return "\n".join(lines)
