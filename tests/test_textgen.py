"""Streaming whole characters (inference/textgen.py): Utf8Stream completes a character spelled in byte tokens,
flushes an unfinished one as one replacement, and streams an imported tokenizer's text whole.

    python -m pytest tests/test_textgen.py -q
"""

import pytest

from data.token_bytes import token_bytes
from inference.textgen import Utf8Stream
from tests.tiny_hf import PROMPT, byte_level_tokenizer, metaspace_tokenizer


@pytest.mark.parametrize("make", [byte_level_tokenizer, metaspace_tokenizer], ids=["byte_level", "metaspace"])
def test_streaming_an_imported_tokenizer_emits_whole_characters(make):
    tok = make()
    table = token_bytes(tok, tok.get_vocab_size())
    ids = tok.encode(PROMPT).ids
    stream = Utf8Stream(table)
    pieces = [stream.push(i) for i in ids] + [stream.flush()]
    assert "".join(pieces).strip() == PROMPT and not any("\ufffd" in p for p in pieces)
    if make is byte_level_tokenizer:  # its tokens cut characters, so some steps complete none
        assert "" in pieces[:-1]


def test_utf8_stream_completes_characters_from_byte_tokens():
    # "울" is EC 9A B8; as three byte tokens it must come out whole, once, after the third.
    table = [b"", b"\xec", b"\x9a", b"\xb8", "서".encode(), " 대한".encode()]
    stream = Utf8Stream(table)
    pieces = [stream.push(i) for i in [5, 4, 1, 2, 3, 0, 4]] + [stream.flush()]
    assert pieces == [" 대한", "서", "", "", "울", "", "서", ""]


def test_utf8_stream_flushes_an_unfinished_character_as_one_replacement():
    stream = Utf8Stream([b"\xec", b"\x9a"])
    assert stream.push(0) + stream.push(1) == ""
    assert stream.flush() == "\ufffd"
