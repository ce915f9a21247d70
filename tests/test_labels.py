"""Readable token labels (inspection/labels.py) with the terminal tables' widths, and the bytes each token stands for (data/token_bytes.py): our
tokens, GPT-2's byte-level letters and KoGPT2's ▁, by hand and from imported tokenizers; the display width.

    python -m pytest tests/test_labels.py -q
"""

import re

import pytest

from data.token_bytes import piece_reader
from inspection.labels import bytes_label, display_width, pad, token_label, token_labels
from tests.tiny_hf import PROMPT, byte_level_tokenizer, metaspace_tokenizer


@pytest.mark.parametrize("piece, label", [
    (" 대한", "␣대한"),
    ("민국", "민국"),
    ("\n", "↵"),
    ("a\tb", "a⇥b"),
    ("\r\n", "␍↵"),
    ("<0xEC>", "<0xEC>"),
    ("<0xec>", "<0xEC>"),
    ("\u200b", "<U+200B>"),
    ("\u00a0", "<U+00A0>"),
    ("<|endoftext|>", "<|endoftext|>"),
    # jamo (data.unit = "jamo"): whole syllables joined, the jamo of a partial one as letters marked on the side
    # where the rest of the syllable is; compatibility jamo and old syllables as they are
    ("\u1100\u1161\u11ab\u1103\u1161", "간다"),
    (" \u1103\u1162\u1112\u1161\u11ab", "␣대한"),
    ("\u11ab\u1103\u1161", "-ㄴ다"),  # a 종성 whose syllable began in the token before
    ("\u1112\u1161\u11ab\u1100", "한ㄱ-"),  # a 초성 whose 중성 comes in the next token
    ("\u1161\u11ab", "-ㅏㄴ"),
    ("\u11a8", "-ㄱ"),
    (" \u1100", "␣ㄱ-"),
    ("\u11aa\u11c2", "-ㄳㅎ"),
    ("ㅋㅋ", "ㅋㅋ"),
    ("\u1112\u119e\u11ab", "\u1112\u119e\u11ab"),  # 아래아: no precomposed syllable, a font draws it whole
    ("\u115f", "<U+115F>-"),  # the 초성 filler has no letter
])
def test_token_label(piece, label):
    assert token_label(piece) == label


def test_jamo_labels_through_the_tokenizer():
    from data.tokenizer import train_tokenizer

    tok = train_tokenizer(["대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있다."] * 3, 300, unit="jamo")
    ids = tok.encode(" 대한민국은 국민").ids
    assert [tok.id_to_token(i) for i in ids] == [" \u1103\u1162\u1112\u1161\u11ab\u1106\u1175\u11ab\u1100\u116e\u11a8\u110b",
                                             "\u1173\u11ab", " \u1100\u116e\u11a8", "\u1106\u1175\u11ab"]  # fmt: skip
    assert token_labels(tok, ids) == ["␣대한민국ㅇ-", "-ㅡㄴ", "␣국", "민"]  # 은 is cut after its 초성
    assert bytes_label("\u1100\u1161".encode() + b"\xea") == "가<0xEA>"


def test_byte_level_pieces_read_back_as_bytes():
    """GPT-2's alphabet by hand: 대 is EB 8C 80; EB stands for itself (ë), 8C and 80, not printable, for
    U+012E and U+0122 (the 47th and 35th of the 68 remapped bytes); Ġ (U+0120) is the space."""
    read = piece_reader(byte_level_tokenizer())
    assert read("ĠëĮĢ") == " 대".encode() and bytes_label(read("ĠëĮĢ")) == "␣대"
    assert read("ëĮ") == b"\xeb\x8c" and bytes_label(read("ëĮ")) == "<0xEB><0x8C>"  # a character cut short
    assert read("Ċ") == b"\n" and bytes_label(read("Ċ")) == "↵"


@pytest.mark.parametrize("make", [byte_level_tokenizer, metaspace_tokenizer], ids=["byte_level", "metaspace"])
def test_labels_of_imported_tokenizers_read_as_text(make):
    tok = make()
    ids = tok.encode(PROMPT).ids
    labels = token_labels(tok, ids)
    assert not any(ch in label for label in labels for ch in "▁Ġ")  # no marker, no byte-level letters
    # the labels, stray bytes put back, spell the text: nothing lost, nothing mojibake
    raw = b"".join(bytes.fromhex(m[1]) if m[1] else m[2].replace("␣", " ").encode()
                   for m in re.finditer(r"<0x([0-9A-F]{2})>|([^<]+|<)", "".join(labels)))  # fmt: skip
    assert raw.decode().strip() == PROMPT
    assert labels[0].startswith("␣") == (make is metaspace_tokenizer)  # ▁ marks the first word too
    eot = "<|endoftext|>" if make is byte_level_tokenizer else "</s>"
    assert token_labels(tok, [tok.token_to_id(eot)]) == [eot]  # a special token by its name


def test_display_width_counts_hangul_twice():
    assert display_width("대a") == 3
    assert pad("대", 4) == "대  "
