"""data.unit = "jamo" (data/jamo.py, data/tokenizer.py): BPE over 초성·중성·종성, lossless both ways, a standard
tokenizer.json; then a jamo run at the tiny size, end to end: it trains, resumes exactly, generates the text its
tokenizer decodes, its attention labels read as Korean, and its bits per character count the same characters as
a syllable run's. (The export to transformers and back: tests/test_export_gpt2.py, tests/test_import_gpt2.py.)

    python -m pytest tests/test_jamo.py -q
"""

import json
import os
import random
import re
import signal
import unicodedata

import numpy as np

import pytest
from tokenizers import Tokenizer, normalizers

import generate
import train

from data.config import DataConfig, DataError
from data.jamo import Composing, compose, split, splits_syllables
from data.loader import load_tokens
from data.prepare import prepare
from data.sources import open_source, read_documents
from data.token_bytes import token_bytes
from data.tokenizer import EOT, fast_encoder, load_tokenizer, tokenizer_hash, train_tokenizer
from inference import load_run, stream_text
from inspection.views.words import word_start_ids
from tests.conftest import TINY, tiny

UNITS = ("syllables", "jamo")
# Code point ranges the random texts draw from: Hangul syllables (most often), conjoining jamo (modern, old and
# the extended blocks), compatibility jamo, Latin with and without combining marks, Hanja, emoji and their
# modifiers, controls and odd spaces, variation selectors, the supplementary planes
POOLS = [(0xAC00, 0xD7A3)] * 6 + [
    (0x1100, 0x1112), (0x1161, 0x1175), (0x11A8, 0x11C2), (0x1100, 0x11FF), (0xA960, 0xA97F), (0xD7B0, 0xD7FF),
    (0x3131, 0x318E), (0x20, 0x7E), (0xC0, 0x24F), (0x300, 0x36F), (0x4E00, 0x9FFF), (0x1F300, 0x1F64F),
    (0x1F3FB, 0x1F3FF), (0x200B, 0x200D), (0x0, 0x1F), (0xFE00, 0xFE0F), (0x10000, 0x10FFFF)]


def random_text(rng: random.Random, n: int) -> str:
    chars = [chr(rng.randint(*rng.choice(POOLS))) for _ in range(n)]
    text = "".join(c for c in chars if not 0xD800 <= ord(c) <= 0xDFFF)
    return unicodedata.normalize(rng.choice(["NFC", "NFD", "NFKD"]), text) if rng.random() < 0.5 else text


def cut(rng: random.Random, text: str) -> list[str]:
    """`text` cut at up to 5 random places (pieces may be empty)."""
    cuts = sorted(rng.choices(range(len(text) + 1), k=rng.randint(0, 5)))
    return [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]


@pytest.fixture(scope="module")
def corpus():
    return read_documents(open_source("builtin", DataConfig()).chunks())


@pytest.fixture(scope="module")
def toks(corpus):
    """A small vocabulary of each unit, so that many characters of the random texts fall back to bytes."""
    return {unit: train_tokenizer(iter(corpus[:-1]), 600, unit) for unit in UNITS}


@pytest.mark.parametrize("unit", UNITS)
def test_decode_of_encode_is_the_nfc_text_for_random_texts(toks, unit):
    tok, rng = toks[unit], random.Random(75)
    tok.encode_special_tokens = True  # as load_tokenizer sets it
    texts = [random_text(rng, rng.randint(0, 40)) for _ in range(3000)]
    texts += [f"앞{EOT}뒤", "ᄒᆞᆫ글 ᄀᆞᄅᆞᆷ", "가\u0308\u11a8", "각\u11a8", "\u1100\u1100\u1161\u1161\u11a8\u11a8", "ㅋㅋ큐"]
    for text, ids in zip(texts, (e.ids for e in tok.encode_batch(texts, add_special_tokens=False))):
        assert tok.decode(ids, skip_special_tokens=False) == unicodedata.normalize("NFC", text), repr(text)
    bytes_used = sum(1 <= i <= 256 for e in tok.encode_batch(texts) for i in e.ids)
    assert bytes_used > 10_000  # the byte fall-back was exercised, not only the vocabulary


def test_only_precomposed_syllables_are_split(toks):
    normalize = toks["jamo"].normalizer.normalize_str
    assert normalize("각") == "\u1100\u1161\u11a8" and normalize("가") == "\u1100\u1161"
    assert normalize("힣") == "\u1112\u1175\u11c2" and normalize("꽃") == "\u1101\u1169\u11be"
    assert normalize("\u1100\u1161\u11a8") == "\u1100\u1161\u11a8"  # NFD in, the same jamo out
    # compatibility jamo, accented Latin, Hanja, emoji, lone conjoining jamo: as NFC has them
    for text in ["ㅋㅋ ㄱㅏ", "café é", "大韓民國", "👍🏽🇰🇷", "\u1100", "\u11a8", "\u1161"]:
        assert normalize(text) == unicodedata.normalize("NFC", text)
    every = "".join(chr(c) for c in range(0xAC00, 0xD7A4))
    assert normalize(every) == unicodedata.normalize("NFD", every) == split(every)
    rng = random.Random(3)  # the Python split (the trainer's character counts) is the normalizer's
    for text in (random_text(rng, 30) for _ in range(500)):
        assert normalize(text) == split(unicodedata.normalize("NFC", text)), repr(text)


@pytest.mark.parametrize("unit", UNITS)
def test_the_fast_path_of_prepare_gives_the_tokenizer_s_ids(toks, unit):
    """data/prepare.py encodes a corpus with the normalizer's work done in Python (data.tokenizer.fast_encoder)."""
    tok, rng = toks[unit], random.Random(4)
    bare, normalize = fast_encoder(tok)
    assert bare.normalizer is None and normalize is not None
    texts = [random_text(rng, rng.randint(0, 40)) for _ in range(1000)]
    for text in texts:
        assert normalize(text) == tok.normalizer.normalize_str(text), repr(text)
    assert [e.ids for e in bare.encode_batch([*map(normalize, texts)])] == [e.ids for e in tok.encode_batch(texts)]
    other = Tokenizer.from_str(tok.to_str())
    other.normalizer = normalizers.NFKC()  # a normalizer this project does not write: encoded as it is
    assert fast_encoder(other) == (other, None)


def test_nfd_and_nfc_give_the_same_ids(toks, corpus):
    tok = toks["jamo"]
    nfd = unicodedata.normalize("NFD", corpus[-1])
    assert nfd != corpus[-1] and tok.encode(nfd).ids == tok.encode(corpus[-1]).ids


def test_the_vocabulary_starts_from_jamo_and_learns_syllables(toks, corpus):
    vocab = toks["jamo"].get_vocab()
    assert not any("\uac00" <= ch <= "\ud7a3" for piece in vocab for ch in piece)  # no precomposed syllable
    for syllable in ["한", "국", "법", "의"]:  # frequent ones are merges of their jamo
        assert unicodedata.normalize("NFD", syllable) in vocab
    seen = set(split("".join(corpus[:-1]))) & {chr(c) for c in range(0x1100, 0x11C3)}
    assert len(seen) == 53 and seen <= vocab.keys()  # every jamo of the text is a token of its own
    hangul = "".join(ch for ch in corpus[-1] if "가" <= ch <= "힣")  # the validation bill's syllables
    unseen = {}  # the characters spelled in bytes
    for unit in UNITS:
        pieces = toks[unit].encode(hangul).tokens
        unseen[unit] = set(bytes(int(p[3:5], 16) for p in pieces if p.startswith("<0x")).decode())
    assert set("갖루빙삭엽잃짓착핍홍") < unseen["syllables"]  # never seen in training, and rare ones past the limit
    assert unseen["jamo"] == {"\u11bd", "\u11b6"}  # of their jamo, only the 종성 of 갖 and 잃


def test_compose_is_what_the_decoder_does(toks):
    """The Python joining that streaming and labels use equals the tokenizer's 11,172 decoder steps."""
    decoder, rng = toks["jamo"].decoder, random.Random(1)
    jamo = [chr(c) for c in [*range(0x1100, 0x1115), *range(0x1160, 0x1178), *range(0x11A6, 0x11C4)]] + ["가", "a", " "]
    for _ in range(2000):
        text = "".join(rng.choice(jamo) for _ in range(rng.randint(0, 12)))
        pieces = cut(rng, text)
        assert decoder.decode([text]) == compose(text), repr(text)
        assert decoder.decode(pieces) == compose("".join(pieces)), repr(pieces)


def test_composing_a_stream_in_pieces_equals_composing_it_whole():
    rng = random.Random(2)
    jamo = [chr(c) for c in [*range(0x1100, 0x1114), *range(0x1161, 0x1176), *range(0x11A8, 0x11C3)]] + ["각", "x"]
    for _ in range(3000):
        text = "".join(rng.choice(jamo) for _ in range(rng.randint(0, 15)))
        held = Composing()
        out = [held.push(piece) for piece in cut(rng, text)]
        assert "".join(out) + held.push("", final=True) == compose(text), repr(text)
    held = Composing()  # what is held back, and when it comes out
    assert [held.push("\u1100"), held.push("\u1161"), held.push("\u11a8"), held.push("\u1102")] == ["", "", "각", ""]
    assert held.push("\u1161 ") == "나 "


def test_the_saved_file_alone_gives_the_same_ids_and_text(toks, corpus, tmp_path):
    tok = toks["jamo"]
    tok.save(str(tmp_path / "tokenizer.json"))
    plain = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))  # tokenizers alone, nothing of ours
    assert tokenizer_hash(plain) == tokenizer_hash(tok) and splits_syllables(plain)
    for text in [corpus[-1], "ㅋㅋ 각\u11a8 café 👍🏽"]:
        ids = tok.encode(text).ids
        assert plain.encode(text).ids == ids and plain.decode(ids) == unicodedata.normalize("NFC", text)
    assert not splits_syllables(toks["syllables"])


def test_training_is_deterministic(corpus):
    first, second = (train_tokenizer(iter(corpus[:3]), 400, "jamo") for _ in range(2))
    assert tokenizer_hash(first) == tokenizer_hash(second)


def test_token_bytes_are_the_jamo_and_words_still_start_with_a_space(toks):
    tok = toks["jamo"]
    table = token_bytes(tok, tok.get_vocab_size())
    ids = tok.encode(" 대한민국은 헌법").ids
    joined = b"".join(table[i] for i in ids).decode()
    assert joined == unicodedata.normalize("NFD", " 대한민국은 헌법") and compose(joined) == " 대한민국은 헌법"
    starts = word_start_ids(table)
    assert [bool(starts[i]) for i in ids] == [tok.id_to_token(i).startswith(" ") for i in ids]
    assert sum(starts[i] for i in ids) == 2


def test_a_bad_unit_is_refused_naming_the_units():
    with pytest.raises(DataError, match='data.unit must be "syllables" or "jamo", got \'letters\''):
        DataConfig(unit="letters")


def test_prepare_counts_the_nfc_characters_in_both_units(tmp_path):
    text = unicodedata.normalize("NFD", "대한민국은 민주공화국이다. 모든 권력은 국민으로부터 나온다.\n") * 20
    (tmp_path / "corpus.txt").write_text(text, encoding="utf-8")
    prepared = {unit: prepare(DataConfig(source=str(tmp_path / "corpus.txt"), vocab_size=300, unit=unit,
                                         cache_dir=str(tmp_path / "cache")), verbose=False) for unit in UNITS}
    assert prepared["jamo"].dir != prepared["syllables"].dir
    assert {p.meta["unit"] for p in prepared.values()} == set(UNITS) and prepared["jamo"].meta["unit"] == "jamo"
    for part in ("train", "val"):
        chars = {unit: p.meta["splits"][part]["chars"] for unit, p in prepared.items()}
        assert chars["jamo"] == chars["syllables"] < len(text)  # NFC characters, not the NFD file's
    total = sum(p.meta["splits"][part]["chars"] for part in ("train", "val") for p in [prepared["jamo"]])
    assert total == len(unicodedata.normalize("NFC", text))
    tok = load_tokenizer(prepared["jamo"].tokenizer_path)
    shard = load_tokens(prepared["jamo"].dir / "train.bin", prepared["jamo"].meta["dtype"]).tolist()
    assert tok.decode(shard[1:]).startswith("대한민국은 민주공화국이다.")


# ---- a jamo run ------------------------------------------------------------------------------------------

CONJOINING = re.compile("[\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff]")


def args(data_cache, run, *extra):
    # dropout on, an uneven log interval and gradient accumulation: every piece of state must survive a resume
    return ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--data.unit=jamo",
            "--train.log_interval=3", "--train.grad_accum=2", "--out", str(run), *extra]  # fmt: skip


def logged_losses(run):
    return [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


@pytest.fixture(scope="module")
def jamo_run(tmp_path_factory, data_cache):
    run = tmp_path_factory.mktemp("jamo") / "run"
    assert train.main(args(data_cache, run)) == 0
    return run


def test_a_jamo_run_resumes_exactly(jamo_run, data_cache, tmp_path, monkeypatch):
    run = tmp_path / "interrupted"
    monkeypatch.setattr(train, "after_step", lambda step: step == 7 and os.kill(os.getpid(), signal.SIGINT))
    assert train.main(args(data_cache, run)) == 130  # stopped after step 7, last/ saved
    monkeypatch.undo()
    assert train.main([*args(data_cache, run), "--resume"]) == 0
    assert logged_losses(run) == logged_losses(jamo_run)
    for ckpt in ("last", "best"):
        assert (run / ckpt / "model.safetensors").read_bytes() == (jamo_run / ckpt / "model.safetensors").read_bytes()


def test_the_run_is_jamo_and_its_bits_per_character_count_the_nfc_characters(jamo_run, data_cache):
    meta = json.loads((jamo_run / "last" / "meta.json").read_text())
    final = [json.loads(line) for line in (jamo_run / "metrics.jsonl").read_text().splitlines()][-1]
    assert meta["unit"] == "jamo" and splits_syllables(load_run(jamo_run, device="cpu").tokenizer)
    syllables = prepare(tiny(data_cache).data, verbose=False).meta  # the same corpus and split, in syllables
    assert syllables["unit"] == "syllables" and syllables["tokenizer_hash"] != meta["tokenizer_hash"]
    assert final["val_chars"] == meta["splits"]["val"]["chars"] == syllables["splits"]["val"]["chars"]
    assert meta["splits"]["val"]["tokens"] > syllables["splits"]["val"]["tokens"]  # more tokens, the same characters


@pytest.mark.parametrize("seed, temperature", [(0, 0.6), (1, 0.6), (2, 0.6), (0, 1.5), (1, 1.5), (2, 1.5)])
def test_generated_text_arrives_as_the_tokenizer_decodes_it(jamo_run, seed, temperature):
    run = load_run(jamo_run, device="cpu")
    ids, text = [], ""
    narrow = {"top_k": 50} if temperature < 1 else {}
    for step, pieces in stream_text(run, "대한민국은", max_new_tokens=40, seed=seed, temperature=temperature, **narrow):
        ids += step
        text += pieces[0]
    # the syllables joined across tokens, as the decoder joins them; a lone byte token is U+FFFD (as without jamo)
    assert len(ids) == 40 and text == compose(b"".join(run.token_bytes[i] for i in ids).decode("utf-8", "replace"))
    assert any(1 <= i <= 256 for i in ids) == (temperature > 1)  # the tiny model samples bytes only when hot
    if temperature < 1:
        assert text == run.tokenizer.decode(ids)
    assert compose(text) == text and re.search("[가-힣]", text)  # no 초성 + 중성 left unjoined


def test_attention_labels_read_as_korean_with_the_word_start_mark(jamo_run, tmp_path, capsys):
    out = tmp_path / "maps"
    assert generate.main(["--ckpt", str(jamo_run), "--prompt", "대한민국은 국민에게", "--attention", str(out)]) == 0
    with np.load(out / "attention.npz", allow_pickle=False) as f:
        labels, pieces = f["labels"].tolist(), f["tokens"].tolist()
    assert labels[0] == "<|endoftext|>" and len(labels) == len(pieces) > 5
    assert not any(CONJOINING.search(label) for label in labels)  # no raw 초성, 중성 or 종성
    for piece, label in zip(pieces[1:], labels[1:]):
        whole = re.findall("[가-힣]", unicodedata.normalize("NFC", piece))  # the syllables the token holds whole
        assert re.findall("[가-힣]", label) == whole, (piece, label)
        assert label.startswith("␣") == piece.startswith(" ")  # the word-start mark, for the 어절 views
    assert sum(label.startswith("␣") for label in labels) == 1
    syllables = iter("대한민국은국민에게")  # the syllables the labels show, in the prompt's order
    assert all(s in syllables for s in re.findall("[가-힣]", "".join(labels)))
    assert len(re.findall("[가-힣]", "".join(labels))) >= 6
