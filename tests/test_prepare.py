"""Corpus -> tokenizer + shards (data/prepare.py), the cache (data/cache.py), and the `python -m data.prepare` CLI:
python -m pytest tests/test_prepare.py -q"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from data.config import DataConfig, DataError
from data.loader import load_tokens
from data.prepare import main as prepare_main, prepare, prepare_sources, publish
from data.sources import builtin_files, dataset_source, open_source, read_documents
from training.config import load_config

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "tiny.toml"


def decode_documents(prepared, split):
    """Split a shard at its <|endoftext|> tokens and decode each document."""
    tok = Tokenizer.from_file(str(prepared.tokenizer_path))
    ids = load_tokens(prepared.dir / f"{split}.bin", prepared.meta["dtype"])
    starts = np.flatnonzero(ids == prepared.meta["eot_id"])
    assert starts[0] == 0
    return [tok.decode(ids[a + 1:b].tolist()) for a, b in zip(starts, list(starts[1:]) + [len(ids)])]


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "data.prepare", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_builtin_shards_decode_back_to_the_corpus(tmp_path):
    cfg = load_config(TINY, [f"--data.cache_dir={tmp_path}"]).data
    prepared = prepare(cfg, verbose=False)
    docs = read_documents(open_source("builtin", cfg).chunks())
    assert decode_documents(prepared, "train") == docs[:-1]
    assert decode_documents(prepared, "val") == docs[-1:]
    meta = prepared.meta
    assert (meta["vocab_size"], meta["dtype"], meta["eot_id"]) == (cfg.vocab_size, "uint16", 0)
    assert meta["splits"]["val"] == {"documents": 1, "chars": 8549, "bytes": builtin_files()[-1].stat().st_size,
                                     "tokens": (prepared.dir / "val.bin").stat().st_size // 2}
    assert meta["splits"]["train"]["documents"] == 10 and meta["splits"]["train"]["chars"] == 65_555 - 8549
    assert meta["data"] == {**cfg.__dict__} and len(meta["tokenizer_hash"]) == 64


def test_cache_is_reused_and_rebuilt_when_the_source_or_a_setting_changes(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("가나다라 마바사\n" * 200, encoding="utf-8")
    cfg = DataConfig(source=str(corpus), vocab_size=300, cache_dir=str(tmp_path / "cache"))
    first = prepare(cfg, verbose=False)
    again = prepare(cfg, verbose=False)
    assert not first.reused and again.reused and again.dir == first.dir and again.meta == first.meta
    corpus.write_text("가나다라 마바사\n" * 199 + "아자차카\n", encoding="utf-8")
    changed = prepare(cfg, verbose=False)
    assert not changed.reused and changed.dir != first.dir
    assert decode_documents(changed, "val")[0].endswith("아자차카\n")
    bigger = prepare(DataConfig(**{**cfg.__dict__, "vocab_size": 310}), verbose=False)
    assert not bigger.reused and bigger.dir not in (first.dir, changed.dir)
    assert sorted(p.name.startswith(".tmp") for p in (tmp_path / "cache").iterdir()) == [False] * 3


def test_an_edit_that_keeps_the_size_and_mtime_is_not_served_from_the_cache(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("가나다라 마바사\n" * 200, encoding="utf-8")
    cfg = DataConfig(source=str(corpus), vocab_size=300, cache_dir=str(tmp_path / "cache"))
    first = prepare(cfg, verbose=False)
    stat = corpus.stat()
    corpus.write_text("가나다라 마바사\n" * 199 + "아자차카 타파하\n", encoding="utf-8")  # as many bytes
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert corpus.stat().st_size == stat.st_size and corpus.stat().st_mtime_ns == stat.st_mtime_ns
    edited = prepare(cfg, verbose=False)
    assert not edited.reused and edited.dir != first.dir
    assert decode_documents(edited, "val")[0].endswith("아자차카 타파하\n")


def damage_meta(text):
    return lambda d: (d / "meta.json").write_text(text)


def flip_last_id(d):  # same size, an id no tokenizer of 300 tokens has
    data = bytearray((d / "val.bin").read_bytes())
    data[-2:] = (65535).to_bytes(2, "little")
    (d / "val.bin").write_bytes(bytes(data))


DAMAGE = {
    "corrupt meta.json": (damage_meta("{not json"), "meta.json is not valid JSON"),
    "empty meta.json": (damage_meta(""), "meta.json is not valid JSON"),
    "keyless meta.json": (damage_meta("{}"), "meta.json lacks"),
    "truncated shard": (lambda d: os.truncate(d / "train.bin", (d / "train.bin").stat().st_size // 2),
                        "train.bin has"),
    "odd-length shard": (lambda d: (d / "val.bin").write_bytes((d / "val.bin").read_bytes() + b"\0"), "val.bin has"),
    "ids outside the vocabulary": (flip_last_id, "val.bin does not hold what was written"),
    "missing tokenizer": (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json is missing"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_cache_is_found_on_reuse_and_rebuilt(tmp_path, case, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("가나다라 마바사\n" * 200, encoding="utf-8")
    cfg = DataConfig(source=str(corpus), vocab_size=300, cache_dir=str(tmp_path / "cache"))
    first = prepare(cfg, verbose=False)
    shards = {name: (first.dir / name).read_bytes() for name in ("train.bin", "val.bin", "tokenizer.json")}
    damage, problem = DAMAGE[case]
    damage(first.dir)
    again = prepare(cfg, verbose=False)
    err = capsys.readouterr().err
    assert err.startswith(f"warning: the data cache {first.dir} is damaged (") and err.count("\n") == 1, err
    assert problem in err and err.endswith("); rebuilding it\n")
    assert not again.reused and again.dir == first.dir
    assert {name: (again.dir / name).read_bytes() for name in shards} == shards
    assert prepare(cfg, verbose=False).reused and capsys.readouterr().err == ""


@pytest.mark.slow
def test_the_leftovers_of_a_killed_preparation_are_removed(tmp_path):
    cache = tmp_path / "cache"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = re.sub(r"\W", "_", socket.gethostname())
    orphan, running = cache / f".tmp-corpus-300-0123-{host}-{dead.stdout.strip()}", cache / f".tmp-x-{host}-{os.getpid()}"
    elsewhere = cache / f".tmp-corpus-300-0123-otherhost-{dead.stdout.strip()}"  # a process on another machine
    for d in (orphan, running, elsewhere):
        d.mkdir(parents=True)
        (d / "train.bin").write_bytes(b"\0" * 10)
    (tmp_path / "corpus.txt").write_text("가나다라 마바사\n" * 200, encoding="utf-8")
    prepare(DataConfig(source=str(tmp_path / "corpus.txt"), vocab_size=300, cache_dir=str(cache)), verbose=False)
    assert not orphan.exists() and running.exists() and elsewhere.exists()


def test_failed_build_leaves_nothing_behind(tmp_path):
    (tmp_path / "blank.txt").write_text("\n\n", encoding="utf-8")
    cfg = DataConfig(source=str(tmp_path / "blank.txt"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(DataError, match="has no text"):
        prepare(cfg, verbose=False)
    assert list((tmp_path / "cache").iterdir()) == []


def test_publish_keeps_a_finished_copy_and_replaces_a_broken_one(tmp_path):
    (tmp_path / "corpus.txt").write_text("가나다라 마바사\n" * 200, encoding="utf-8")
    out = prepare(DataConfig(source=str(tmp_path / "corpus.txt"), vocab_size=300, cache_dir=str(tmp_path)),
                  verbose=False).dir
    late = tmp_path / "late"
    shutil.copytree(out, late)
    (late / "built-later").write_text("")
    publish(late, out)  # another process finished first: keep its files
    assert not (out / "built-later").exists()
    (out / "val.bin").unlink()
    publish(late, out)
    assert (out / "built-later").exists() and not late.exists()


def test_val_source_replaces_the_split(tmp_path):
    (tmp_path / "train.txt").write_text("대한민국 헌법\n" * 50, encoding="utf-8")
    (tmp_path / "held.txt").write_text("국민의 권리\n", encoding="utf-8")
    cfg = DataConfig(source=str(tmp_path / "train.txt"), val_source=str(tmp_path / "held.txt"), vocab_size=300,
                     cache_dir=str(tmp_path / "cache"))
    prepared = prepare(cfg, verbose=False)
    assert decode_documents(prepared, "train") == ["대한민국 헌법\n" * 50]
    assert decode_documents(prepared, "val") == ["국민의 권리\n"]


def test_in_memory_dataset_and_a_literal_end_of_text(tmp_path):
    datasets = pytest.importorskip("datasets")
    texts = ["첫 문서입니다.", "두 번째 <|endoftext|> 문서", "", "셋째 문서\n"]
    source = dataset_source(datasets.Dataset.from_dict({"text": texts}), "text", "memory")
    prepared = prepare_sources(DataConfig(vocab_size=300, val_fraction=0.15, cache_dir=str(tmp_path)), source,
                               verbose=False)
    assert decode_documents(prepared, "train") == texts[:2] and decode_documents(prepared, "val") == texts[3:]


@pytest.mark.slow
def test_cli_prints_the_figures_and_then_reuses(tmp_path):
    args = ["--config", TINY, f"--data.cache_dir={tmp_path}"]
    built, reused = cli(*args), cli(*args)
    assert built.returncode == 0 and reused.returncode == 0, built.stderr
    lines = built.stdout.splitlines()
    assert "built in" in lines[0] and "reused in" in reused.stdout.splitlines()[0]
    assert lines[1].startswith("  train: 10 documents, 57,006 characters, ")
    assert lines[2].startswith("  val:   1 documents, 8,549 characters, ") and "characters/token -> " in lines[2]
    assert lines[3].startswith("  tokenizer: vocab size 1,024 -> ") and lines[3].endswith("tokenizer.json")
    assert Path(lines[2].split(" -> ")[1]).is_file() and reused.stdout.splitlines()[1:] == lines[1:]


@pytest.mark.slow
def test_cli_reads_cp949_with_the_encoding_option(tmp_path):
    (tmp_path / "win.txt").write_bytes("대한민국은 민주공화국이다.\n".encode("cp949") * 40)
    out = cli("--config", TINY, f"--data.source={tmp_path / 'win.txt'}", "--data.encoding=cp949",
              "--data.vocab_size=300", f"--data.cache_dir={tmp_path / 'cache'}")
    assert out.returncode == 0, out.stderr
    assert "train: 1 documents, 540 characters" in out.stdout and "val:   1 documents, 60 characters" in out.stdout


@pytest.mark.slow
def test_cli_hf_source_loads_local_data_offline(tmp_path):
    (tmp_path / "corpus").mkdir()
    rows = [{"body": f"{i}번째 문서입니다."} for i in range(10)]
    (tmp_path / "corpus" / "part.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    out = cli("--config", TINY, f"--data.source=hf:{tmp_path / 'corpus'}", "--data.text_field=body",
              "--data.vocab_size=300", f"--data.cache_dir={tmp_path / 'cache'}",
              env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "hf")})
    assert out.returncode == 0, out.stderr
    assert "train: 9 documents, 90 characters" in out.stdout and "val:   1 documents, 10 characters" in out.stdout


BAD = {
    "missing": (["--data.source={tmp}/nowhere.txt"], "nowhere.txt does not exist"),
    "undecodable": (["--data.source={tmp}/cp949.txt"], "cp949.txt is not valid utf-8 at byte 0 ("),
    "binary": (["--data.source={tmp}/blob.txt"], "looks binary"),
    "empty": (["--data.source={tmp}/blank.txt"], "has no text"),
    "too small": (["--data.source={tmp}/one.txt"], "the train split is empty"),
    "unknown key": (["--data.vocab_sise=512"], "unknown key data.vocab_sise; valid keys in [data]: source, val_source"),
    "bad value": (["--data.vocab_size=12"], "vocab_size must be at least 300"),
    "bad option": (["--model.n_layer=2"], "bad option '--model.n_layer=2'"),
    "no config": (["--config={tmp}/none.toml"], "none.toml does not exist"),
    "hf offline": (["--data.source=hf:nobody/no-such-corpus"], "could not load Hugging Face data set"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", BAD)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, case):
    (tmp_path / "cp949.txt").write_bytes("한국어".encode("cp949"))
    (tmp_path / "blob.txt").write_bytes(b"PK\x03\x04\x00\x00" * 100)
    (tmp_path / "blank.txt").write_text(" \n", encoding="utf-8")
    (tmp_path / "one.txt").write_text("가", encoding="utf-8")
    args, message = BAD[case]
    out = cli("--config", TINY, f"--data.cache_dir={tmp_path}/cache", *[a.format(tmp=tmp_path) for a in args],
              env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []


def test_a_validation_text_equal_to_the_training_text_is_said_to_measure_memory(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국 헌법 제1조 대한민국은 민주공화국이다.\n" * 200, encoding="utf-8")
    argv = ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", f"--data.source={corpus}",
            "--data.vocab_size=300"]
    assert prepare_main([*argv, f"--data.val_source={corpus}"]) == 0
    assert "warning: data.val_source holds the same text as data.source" in capsys.readouterr().err
    other = tmp_path / "held_out.txt"
    other.write_text("국회는 법률을 제정한다.\n" * 50, encoding="utf-8")
    assert prepare_main([*argv, f"--data.val_source={other}"]) == 0
    assert "warning" not in capsys.readouterr().err
