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
])
def test_token_label(piece, label):
    assert token_label(piece) == label


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
