r"""Hangul syllables as jamo (초성·중성·종성), for `data.unit = "jamo"`: the tokenizer's rules both ways.

    normalizers.Sequence([normalizers.NFC(), *decompose_rules()])   # "각" -> "ᄀ" "ᅡ" "ᆨ" (U+1100 U+1161 U+11A8)
    decoders.Sequence([..., decoders.Fuse(), *compose_rules()])      # and back
    split("각다") == "\u1100\u1161\u11a8\u1103\u1161"                    # what the normalizer does, in Python
    compose("\u1100\u1161\u11a8다") == "각다"                         # what those decoders do, in Python
    held = Composing(); held.push("\u1100\u1161") == ""; held.push("\u11a8") == ""; held.push("", final=True) == "각"

Only the 11,172 precomposed syllables U+AC00..U+D7A3 are split, each into its conjoining jamo (its Unicode
NFD). Everything else stays as NFC left it: compatibility jamo such as ㅋ or ㄱ (U+3131..U+318E, letters of their
own, as in ㅋㅋ), Latin with accents (é stays one character), Hanja, other scripts, emoji, digits, and conjoining
jamo already in the text that NFC could not join into a syllable. Decoding joins every run of a modern 초성 and
중성, with a 종성 if one follows, into its syllable, the way NFC does; since an NFC text never holds a 초성
followed by a 중성, nor a 종성 after a syllable without one, this undoes the split exactly:
decode(encode(s)) == NFC(s) for every string, as for syllables.

Both directions are plain `Replace` steps, so tokenizer.json stays a standard file that `tokenizers` and
transformers load as it is (neither has a normalizer or decoder that splits or joins Hangul alone). The split is
67 steps that each insert a jamo in front of the syllables it belongs to (a lookahead matches the empty string
there: 19 초성, 21 중성 and 27 종성 classes of syllables), then one that drops the syllables; through them an
encoding takes about 5 s per million syllables on one core, so data/prepare.py does the same work with `split`
(docs/units.md). The join needs one step per syllable, as a decoder step writes fixed text: 11,172 steps (about
3 ms per decode call; 1.7 MB of tokenizer.json).
"""

import re
import unicodedata

from tokenizers import Regex, decoders, normalizers

FIRST, LAST = 0xAC00, 0xD7A3  # 가 .. 힣
LEADS, VOWELS, TAILS = 19, 21, 28  # 초성, 중성, 종성 + 1 (none)
LEAD, VOWEL, TAIL = 0x1100, 0x1161, 0x11A7  # the first conjoining 초성 and 중성; 종성 t is TAIL + t for t >= 1
PER_LEAD = VOWELS * TAILS  # 588 syllables share a 초성, in one block
# A modern 초성 + 중성 (+ 종성): what decoding joins, as the composition steps do
JOINABLE = re.compile(f"[{chr(LEAD)}-{chr(LEAD + LEADS - 1)}][{chr(VOWEL)}-{chr(VOWEL + VOWELS - 1)}]"
                      f"[{chr(TAIL + 1)}-{chr(TAIL + TAILS - 1)}]?")


def code_range(first: int, last: int) -> str:
    return f"\\x{{{first:04X}}}-\\x{{{last:04X}}}"


def decompose_rules() -> list[normalizers.Replace]:
    """Normalizer steps that split every precomposed syllable into its conjoining jamo (after NFC)."""
    rules = []
    for lead in range(LEADS):  # before each syllable, its 초성: the syllables of one 초성 are one block
        start = FIRST + lead * PER_LEAD
        rules.append((f"[{code_range(start, start + PER_LEAD - 1)}]", chr(LEAD + lead)))
    for vowel in range(VOWELS):  # then its 중성: a run of 28 syllables in each 초성's block
        runs = (FIRST + lead * PER_LEAD + vowel * TAILS for lead in range(LEADS))
        rules.append(("[" + "".join(code_range(s, s + TAILS - 1) for s in runs) + "]", chr(VOWEL + vowel)))
    for tail in range(1, TAILS):  # then its 종성: every 28th syllable
        rules.append(("[" + "".join(f"\\x{{{s:04X}}}" for s in range(FIRST + tail, LAST + 1, TAILS)) + "]",
                      chr(TAIL + tail)))
    # each step inserts its jamo at the empty match in front of the syllable; the last one drops the syllable
    steps = [normalizers.Replace(Regex(f"(?={syllables})"), jamo) for syllables, jamo in rules]
    return steps + [normalizers.Replace(Regex(f"[{code_range(FIRST, LAST)}]"), "")]


def compose_rules() -> list[decoders.Replace]:
    """Decoder steps that join each syllable's conjoining jamo back into it: those with a 종성 first, so that
    "ᄀ ᅡ ᆨ" becomes 각 and not 가 followed by a lone ᆨ."""
    syllables = sorted((chr(c) for c in range(FIRST, LAST + 1)), key=lambda s: (ord(s) - FIRST) % TAILS == 0)
    return [decoders.Replace(unicodedata.normalize("NFD", s), s) for s in syllables]


SPLIT = {c: unicodedata.normalize("NFD", chr(c)) for c in range(FIRST, LAST + 1)}  # str.translate's table


def split(text: str) -> str:
    """`text` (NFC) with every precomposed syllable split into its jamo: what `decompose_rules` do, in Python."""
    return text.translate(SPLIT)


def compose(text: str) -> str:
    """`text` with every modern 초성 + 중성 (+ 종성) joined into its syllable: what `compose_rules` do."""
    return JOINABLE.sub(lambda m: unicodedata.normalize("NFC", m.group()), text)


def splits_syllables(tokenizer) -> bool:
    """Whether `tokenizer` works in jamo (data.unit = "jamo"): its normalizer splits a syllable and its decoder
    joins the jamo back."""
    syllable, jamo = "\uac01", "\u1100\u1161\u11a8"  # 각
    normalizer, decoder = tokenizer.normalizer, tokenizer.decoder
    return (normalizer is not None and normalizer.normalize_str(syllable) == jamo
            and decoder is not None and decoder.decode([jamo]) == syllable)


class Composing:
    """Text that arrives in pieces, joined as `compose` joins the whole: the end of a piece that a later piece
    may still join (a 초성, or a 초성 and 중성 that may take a 종성) is held back until it cannot."""

    def __init__(self):
        self.held = ""

    def push(self, text: str, final: bool = False) -> str:
        """The characters of `text` (after those held back) that no later piece can change."""
        text = self.held + text
        keep = 0 if final else held_back(text)
        self.held = text[len(text) - keep:]
        return compose(text[: len(text) - keep])


def held_back(text: str) -> int:
    """How many characters at the end of `text` a following character could still join (0, 1 or 2)."""
    lead = lambda ch: LEAD <= ord(ch) < LEAD + LEADS  # noqa: E731
    if text and lead(text[-1]):
        return 1
    if len(text) >= 2 and lead(text[-2]) and VOWEL <= ord(text[-1]) < VOWEL + VOWELS:
        return 2
    return 0
