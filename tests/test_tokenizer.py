"""The BPE tokenizer (data/tokenizer.py): lossless, readable, standard: python -m pytest tests/test_tokenizer.py -q"""

import re
import unicodedata
from collections import Counter

import pytest
from tokenizers import Tokenizer

from data.config import DataConfig, DataError
from data.sources import open_source, read_documents
from data.tokenizer import EOT, load_tokenizer, tokenizer_hash, train_tokenizer

ROUND_TRIP = [
    "",
    "대한민국은 민주공화국이다.",
    "ᄒᆞᆫ글 ᄀᆞᄅᆞᆷ",  # old Hangul written with conjoining jamo
    "ㄱㄴㄷ ㅏㅑ ㅋㅋㅋ",  # compatibility jamo
    "大韓民國 憲法 第1條",  # hanja
    "👍🏽 👨‍👩‍👧‍👦 🇰🇷",  # skin tone modifier, ZWJ family, flag
    "Hello, World! café naïve",
    "0123456789 3.14 1,000,000",
    "a   b\t\tc  \r\nd\n\n\n  e \r\n",  # runs of spaces, tabs, CRLF
    "zero\u200bwidth\u200cjoin\u200d\ufeffmark",
    "▁ literal ▁▁ lower one eighth blocks",
    "<0x41> looks like a byte token",
    "\x00\x01\x7f \U0010ffff \ud7a3",
]


@pytest.fixture(scope="module")
def corpus():
    source = open_source("builtin", DataConfig())
    docs = read_documents(source.chunks())
    return docs[:-1], docs[-1]  # train: the Constitution and nine bills; val: the last bill


@pytest.fixture(scope="module", params=[1024, 2048])
def tok(request, corpus):
    return train_tokenizer(iter(corpus[0]), request.param)


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_decode_encode_is_nfc(tok, text):
    assert tok.decode(tok.encode(text).ids) == unicodedata.normalize("NFC", text)


def test_literal_special_token_round_trips_when_kept(tok):
    text = f"앞 {EOT} 뒤"
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


def test_nfd_and_nfc_give_the_same_ids(tok, corpus):
    for text in [corpus[1][:2000], "한글 맞춤법 ᄒᆞᆫ글"]:
        nfd = unicodedata.normalize("NFD", text)
        assert nfd != text and tok.encode(nfd).ids == tok.encode(text).ids


def test_ids_layout_and_vocab_size(tok):
    assert tok.token_to_id(EOT) == 0
    assert [tok.id_to_token(i) for i in (1, 11, 256)] == ["<0x00>", "<0x0A>", "<0xFF>"]
    assert tok.get_vocab_size() in (1024, 2048)
    assert tok.encode("쀍").tokens == ["<0xEC>", "<0x80>", "<0x8D>"]  # unseen: bytes, never unknown


def test_merges_never_cross_a_word_boundary(tok):
    for token in tok.get_vocab():
        assert not re.search(r"\S\s", token), token  # a space may lead a word, never follow one


def test_corpus_hangul_tokens_decode_alone_to_whole_syllables(tok, corpus):
    train, val = corpus
    ids = tok.encode("".join(train)).ids
    assert max(ids) > 256 and not any(1 <= i <= 256 for i in ids)  # no byte pieces in the training text
    val_ids = tok.encode(val).ids
    for i in set(ids) | set(val_ids):
        piece = tok.decode([i])
        if 1 <= i <= 256:
            assert piece == "\ufffd"  # a byte piece of an unseen syllable in the validation bill
        else:
            assert "\ufffd" not in piece and unicodedata.normalize("NFC", piece) == piece
            assert not re.search(r"[\u1100-\u11ff]", piece)  # no conjoining jamo: syllables are whole
    val_bytes = sum(1 <= i <= 256 for i in val_ids)
    assert 0 < val_bytes <= 3 * 23  # 23 occurrences of 10 syllables never seen in training


def test_small_vocabulary_keeps_the_frequent_characters(corpus):
    tok = train_tokenizer(iter(corpus[0]), 300)
    assert tok.get_vocab_size() == 300
    text = corpus[1][:3000]
    assert tok.decode(tok.encode(text).ids) == text
    frequent = [c for c, _ in Counter("".join(corpus[0])).most_common(20)]
    assert all(tok.token_to_id(c) is not None for c in frequent)


def test_saved_file_alone_gives_the_same_ids(tok, corpus, tmp_path):
    tok.save(str(tmp_path / "tokenizer.json"))
    plain = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer_hash(plain) == tokenizer_hash(tok)
    for text in ROUND_TRIP + [corpus[1]]:
        ids = tok.encode(text).ids
        assert plain.encode(text).ids == ids and plain.decode(ids) == tok.decode(ids)


def test_training_is_deterministic(corpus):
    first, second = (train_tokenizer(iter(corpus[0]), 1024) for _ in range(2))
    assert tokenizer_hash(first) == tokenizer_hash(second)


def test_a_literal_end_of_text_is_text_both_in_the_shards_and_for_every_loaded_tokenizer(tmp_path):
    from data.config import DataConfig
    from data.loader import load_tokens
    from data.prepare import prepare

    text = f"첫 줄 {EOT} 둘째 줄\n" * 30
    (tmp_path / "train.txt").write_text(text, encoding="utf-8")
    (tmp_path / "val.txt").write_text("셋째 줄\n", encoding="utf-8")
    prepared = prepare(DataConfig(source=str(tmp_path / "train.txt"), val_source=str(tmp_path / "val.txt"),
                                  vocab_size=300, cache_dir=str(tmp_path / "cache")), verbose=False)
    shard = load_tokens(prepared.dir / "train.bin", prepared.meta["dtype"]).tolist()
    assert shard.count(prepared.meta["eot_id"]) == 1  # only the one the code put before the document
    loaded = load_tokenizer(prepared.tokenizer_path)  # what train.py and generate.py use
    assert [prepared.meta["eot_id"]] + loaded.encode(text, add_special_tokens=False).ids == shard


def test_load_tokenizer_errors(tmp_path):
    with pytest.raises(DataError, match=r"missing\.json is missing; run `python -m data\.prepare`"):
        load_tokenizer(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.json is damaged .*python -m data\.prepare"):
        load_tokenizer(tmp_path / "broken.json")
