"""Corpus sources (data/sources.py), the train/validation split (data/split.py) and the [data] config
(data/config.py): python -m pytest tests/test_sources.py -q"""

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from data import sources
from data.config import DataConfig, DataError
from training.config import ConfigError, load_config
from data.sources import builtin_files, open_source, read_documents
from data.split import plan_split, split_chunks

ROOT = Path(__file__).resolve().parent.parent
KOREAN = "대한민국은 민주공화국이다.\n대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.\n"


def documents(spec, **settings):
    cfg = DataConfig(source=str(spec), **settings)
    return read_documents(open_source(cfg.source, cfg).chunks())


def test_builtin_is_the_constitution_then_the_bills():
    files = builtin_files()
    assert [f.name for f in files] == ["constitution.txt"] + [f"18098{n:02d}.txt" for n in range(90, 100)]
    docs = documents("builtin")
    assert len(docs) == 11 and sum(map(len, docs)) == 65_555
    assert docs[0].startswith("대한민국헌법\r\n")  # line breaks are kept as they are
    assert docs[-1] == files[-1].read_bytes().decode("utf-8")


@pytest.mark.slow
def test_builtin_does_not_import_konlpy_or_its_jvm_bridge():
    code = ("import sys; from data.config import DataConfig; from data.sources import open_source; "
            "list(open_source('builtin', DataConfig()).chunks()); "
            "print(sorted({'konlpy', 'jpype'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_builtin_split_holds_out_the_last_bill():
    source = open_source("builtin", DataConfig())
    plan = plan_split(source.chunks(), 0.1, "builtin")
    assert (plan.documents, plan.chars, plan.first_val_doc) == (11, 65_555, 10)
    val = read_documents(split_chunks(source.chunks(), plan, "val"))
    train = read_documents(split_chunks(source.chunks(), plan, "train"))
    assert val == [builtin_files()[-1].read_bytes().decode("utf-8")]
    assert len(train) == 10 and sum(map(len, train)) == 65_555 - 8_549


def test_several_documents_split_takes_whole_documents_from_the_end(tmp_path):
    for name, n in [("a", 50), ("b", 30), ("c", 12), ("d", 8)]:
        (tmp_path / f"{name}.txt").write_text("가" * n, encoding="utf-8")
    source = open_source(str(tmp_path), DataConfig())
    plan = plan_split(source.chunks(), 0.15, "dir")  # 15 of 100 characters: d (8) is not enough, c+d (20) is
    assert plan.first_val_doc == 2
    assert [len(d) for d in read_documents(split_chunks(source.chunks(), plan, "val"))] == [12, 8]


def test_one_document_split_takes_the_tail_from_a_line_break(tmp_path):
    text = "".join(f"{i:02d} 줄입니다\n" for i in range(40))  # 40 lines of 8 characters
    (tmp_path / "one.txt").write_text(text, encoding="utf-8")
    source = open_source(str(tmp_path / "one.txt"), DataConfig())
    plan = plan_split(source.chunks(), 0.0875, "one")  # 28 of 320: the nominal cut is 4 characters into line 36
    train = read_documents(split_chunks(source.chunks(), plan, "train"))
    val = read_documents(split_chunks(source.chunks(), plan, "val"))
    assert train == [text[:288]] and val == [text[288:]]


def test_big_file_streams_in_pieces_cut_before_a_space(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "CHUNK_CHARS", 64)
    monkeypatch.setattr(sources, "READ_BYTES", 100)  # reads end inside 3-byte Hangul characters
    text = "".join(f"{i}번째  문장은 한국어입니다.\n" for i in range(100))  # a run of two spaces in each line
    (tmp_path / "big.txt").write_text(text, encoding="utf-8")
    chunks = list(open_source(str(tmp_path / "big.txt"), DataConfig()).chunks())
    assert [first for first, _ in chunks] == [True] + [False] * (len(chunks) - 1)
    assert all(len(t) <= 64 for _, t in chunks) and len(chunks) > 40
    # each piece but the first starts with the space of its first word (or a run of spaces), never inside a run
    assert all(t.startswith(" ") for _, t in chunks[1:]) and not any(t[-1].isspace() for _, t in chunks[:-1])
    assert "".join(t for _, t in chunks) == text


def test_a_line_without_spaces_is_cut_after_its_line_break(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "CHUNK_CHARS", 64)
    text = "".join(f"{i}번째문장은한국어입니다.\n" for i in range(20))
    (tmp_path / "tight.txt").write_text(text, encoding="utf-8")
    chunks = [t for _, t in open_source(str(tmp_path / "tight.txt"), DataConfig()).chunks()]
    assert len(chunks) > 3 and all(t.endswith("\n") and len(t) <= 64 for t in chunks)
    assert "".join(chunks) == text


def test_directory_reads_txt_files_below_it_sorted(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.txt").write_text("둘", encoding="utf-8")
    (tmp_path / "a.txt").write_text("하나", encoding="utf-8")
    (tmp_path / "b" / "1.txt").write_text("", encoding="utf-8")  # an empty document is skipped
    (tmp_path / "notes.md").write_text("무시", encoding="utf-8")
    assert documents(tmp_path) == ["하나", "둘"]


def test_text_is_nfc_without_bom(tmp_path):
    nfd = unicodedata.normalize("NFD", KOREAN)
    assert nfd != KOREAN
    (tmp_path / "mac.txt").write_bytes(b"\xef\xbb\xbf" + nfd.encode("utf-8"))
    assert documents(tmp_path / "mac.txt") == [KOREAN]


def test_cp949_file_reads_with_the_encoding_option(tmp_path):
    (tmp_path / "win.txt").write_bytes(KOREAN.encode("cp949"))
    assert documents(tmp_path / "win.txt", encoding="cp949") == [KOREAN]
    with pytest.raises(DataError, match=r"win\.txt is not valid utf-8 at byte 0 .*--data\.encoding=cp949"):
        documents(tmp_path / "win.txt")


def test_undecodable_byte_offset_is_exact(tmp_path):
    (tmp_path / "bad.txt").write_bytes("한국어 ".encode() + b"\xff" + "문장".encode())
    with pytest.raises(DataError, match=r"bad\.txt is not valid utf-8 at byte 10 "):
        documents(tmp_path / "bad.txt")


def test_jsonl_json_and_field_errors(tmp_path):
    jsonl = '{"text": "첫째"}\n\n{"text": "둘째", "id": 2}\n{"text": "\\ud83d 반쪽"}\n'
    (tmp_path / "c.jsonl").write_text(jsonl, encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps([{"body": "하나"}, {"body": "둘"}]), encoding="utf-8")
    assert documents(tmp_path / "c.jsonl") == ["첫째", "둘째", "\ufffd 반쪽"]  # half a surrogate pair is no text
    assert documents(tmp_path / "c.json", text_field="body") == ["하나", "둘"]
    with pytest.raises(DataError, match=r"no 'text' field \(it has: body\); set --data\.text_field"):
        documents(tmp_path / "c.json")
    (tmp_path / "bad.jsonl").write_text('{"text": "좋음"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.jsonl line 2 is not valid JSON"):
        documents(tmp_path / "bad.jsonl")


def test_csv_and_parquet_through_datasets(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet

    (tmp_path / "c.csv").write_text("id,text\n1,첫째 문서\n2,\"둘째, 문서\"\n", encoding="utf-8")
    pyarrow.parquet.write_table(pa.table({"text": ["가나", "다라"]}), tmp_path / "c.parquet")
    cache = str(tmp_path / "cache")
    assert documents(tmp_path / "c.csv", cache_dir=cache) == ["첫째 문서", "둘째, 문서"]
    assert documents(tmp_path / "c.parquet", cache_dir=cache) == ["가나", "다라"]
    with pytest.raises(DataError, match=r"no column 'body' \(it has: id, text\)"):
        documents(tmp_path / "c.csv", cache_dir=cache, text_field="body")


def test_bad_sources_are_clear_errors(tmp_path):
    with pytest.raises(DataError, match=r"nowhere\.txt does not exist"):
        documents(tmp_path / "nowhere.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.txt files under"):
        documents(tmp_path / "empty")
    (tmp_path / "model.bin").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(DataError, match=r"looks binary"):
        documents(tmp_path / "model.bin")
    (tmp_path / "blank.txt").write_text(" \n\t\n", encoding="utf-8")
    source = open_source(str(tmp_path / "blank.txt"), DataConfig())
    with pytest.raises(DataError, match=r"has no text"):
        plan_split(source.chunks(), 0.1, "blank.txt")


def test_3_a_directory_named_like_a_jsonl_file_is_a_folder_of_texts(tmp_path):
    folder = tmp_path / "news.jsonl"
    folder.mkdir()
    (folder / "a.txt").write_text("대한민국 헌법", encoding="utf-8")
    source = sources.open_source(str(folder), DataConfig(source=str(folder)))
    assert sources.read_documents(source.chunks()) == ["대한민국 헌법"]


def test_9_a_numeric_csv_column_is_named_as_not_text(tmp_path):
    table = tmp_path / "numbers.csv"
    table.write_text("text,label\n1,2\n3,4\n", encoding="utf-8")
    source = sources.open_source(str(table), DataConfig(source=str(table), cache_dir=str(tmp_path / "cache")))
    with pytest.raises(DataError, match=r"field 'text' is int, not text"):
        list(source.chunks())


def test_config_validation_and_overrides(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[data]\nsource = "builtin"\nvocab_size = 1024\n[model]\nn_layer = 2\n', encoding="utf-8")
    overridden = load_config(config, ["--data.val_fraction=0.2", "--data.source=my corpus.txt"]).data
    assert overridden == DataConfig(source="my corpus.txt", vocab_size=1024, val_fraction=0.2)  # a bare word: a string
    with pytest.raises(ConfigError, match=r"unknown key data\.vocab_sise; valid keys in \[data\]: source, "):
        load_config(config, ["--data.vocab_sise=5"])
    with pytest.raises(DataError, match=r"data\.vocab_size must be an integer or \"auto\", got 'big'"):
        DataConfig(vocab_size="big")
    with pytest.raises(DataError, match=r"val_fraction must be between 0 and 1"):
        DataConfig(val_fraction=1.5)
    with pytest.raises(DataError, match=r"vocab_size must be at least 300"):
        DataConfig(vocab_size=100)
    with pytest.raises(DataError, match=r"unknown data\.encoding 'klingon'"):
        DataConfig(encoding="klingon")


# encodings x readers: a corpus saved as UTF-16 or UTF-32 (Windows Notepad's "Unicode"), read as the default UTF-8 by
# each reader, is named for what it is, with the setting that reads it; read with that setting, it is the text
WIDE = ["utf-16", "utf-16-le", "utf-16-be", "utf-32"]


@pytest.mark.parametrize("encoding", WIDE)
@pytest.mark.parametrize("kind", [".txt", ".jsonl", ".json"])
def test_a_wide_unicode_corpus_is_named_with_the_encoding_that_reads_it(tmp_path, encoding, kind):
    text = "대한민국 헌법\n제1조 대한민국은 민주공화국이다.\n" * 40
    body = {".txt": text, ".jsonl": json.dumps({"text": text}, ensure_ascii=False) + "\n",
            ".json": json.dumps([{"text": text}], ensure_ascii=False)}[kind]
    path = tmp_path / f"corpus{kind}"
    path.write_bytes(body.encode(encoding))
    with pytest.raises(DataError, match=rf"looks like {encoding} text.*--data\.encoding={encoding}$"):
        list(open_source(str(path), DataConfig()).chunks())
    if kind == ".txt":  # the setting it names reads it
        read = "".join(piece for _, piece in open_source(str(path), DataConfig(encoding=encoding)).chunks())
        assert read == text


def test_binary_and_cp949_files_are_not_taken_for_wide_unicode(tmp_path):
    from data.sources import wide_encoding

    assert wide_encoding(bytes(range(256)) * 32) is None and wide_encoding(bytes(8192)) is None
    assert wide_encoding("대한민국 헌법 제1조".encode("cp949")) is None
    assert wide_encoding("대한민국 헌법 제1조".encode("utf-8")) is None


def test_hf_with_the_hub_out_of_reach_fails_at_once_in_one_line(tmp_path, capsys, monkeypatch):
    from data import prepare

    monkeypatch.setattr(sources, "hub_reachable", lambda: False)  # as on a machine with no network
    capsys.readouterr()
    argv = ["--config", str(ROOT / "configs" / "tiny.toml"), f"--data.cache_dir={tmp_path}", "--data.source=hf:nobody/nothing"]
    assert prepare.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: could not load Hugging Face data set 'nobody/nothing'"), err


def test_the_hub_counts_as_reachable_when_its_endpoint_takes_a_connection(monkeypatch):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        assert sources.hub_reachable()
    assert not sources.hub_reachable()  # the same endpoint, closed now
