"""Starting from a pretrained GPT-2 (hf/pretrained.py): data encoded with its tokenizer, `train.init_from`,
generating from it.

A tiny random GPT2LMHeadModel with a KoGPT2-style (▁, end of text `</s>` = id 1) tokenizer is saved in
transformers' layout; the tests prepare data with its tokenizer, fine-tune from it (directly and after
`hf.import_gpt2`), refuse settings that contradict its weights, resume exactly, and score and sample
from the result. Needs the `hf` extra (transformers); skipped without it.

    python -m pytest tests/test_pretrained.py -q
"""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from tokenizers import Tokenizer

pytest.importorskip("transformers")

import data.prepare  # noqa: E402
import generate  # noqa: E402
import train  # noqa: E402
from data.config import DataConfig  # noqa: E402
from data.loader import load_tokens  # noqa: E402
from inference import load_run, score_file  # noqa: E402
from hf.import_gpt2 import import_hf, open_hf  # noqa: E402
from data.tokenizer import tokenizer_hash  # noqa: E402
from storage.checkpoint import load_model  # noqa: E402
from tests.conftest import ROOT, hooked_train  # noqa: E402
from tests.tiny_hf import DOCS, byte_level_tokenizer, metaspace_tokenizer, save_hf_model  # noqa: E402

FINETUNE = ROOT / "configs" / "finetune.toml"
LONG = "\n".join(DOCS * 30)  # ~18,000 characters: the source cuts it into chunks of about 8,192


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    """transformers' layout: 32 positions, gelu_new, 3 embedding rows more than tokens, eos id 1 (</s>)."""
    path = tmp_path_factory.mktemp("kogpt2-like") / "hf"
    save_hf_model(metaspace_tokenizer(), path, eot_id=1)
    return path


@pytest.fixture(scope="module")
def imported(hf_dir, tmp_path_factory) -> Path:
    return import_hf(hf_dir, tmp_path_factory.mktemp("imported") / "ckpt")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """train/ with one .txt document per file (one of them long), and val.txt."""
    path = tmp_path_factory.mktemp("corpus")
    (path / "train").mkdir()
    for i, text in enumerate([*DOCS[:3], LONG]):
        (path / "train" / f"{i}.txt").write_text(text, encoding="utf-8")
    (path / "val.txt").write_text(" ".join(DOCS[:6]), encoding="utf-8")
    return path


def documents(prepared, split: str) -> list[list[int]]:
    """A shard cut before each end-of-text id, that id dropped."""
    ids = load_tokens(prepared.dir / f"{split}.bin", prepared.meta["dtype"]).tolist()
    starts = [i for i, t in enumerate(ids) if t == prepared.meta["eot_id"]]
    assert starts[0] == 0
    return [ids[a + 1 : b] for a, b in zip(starts, starts[1:] + [len(ids)])]


def test_data_is_encoded_with_the_model_s_own_tokenizer(hf_dir, corpus, tmp_path, monkeypatch):
    monkeypatch.setattr(data.prepare, "train_tokenizer", lambda *a: pytest.fail("a BPE was trained"))
    cfg = DataConfig(source=str(corpus / "train"), val_source=str(corpus / "val.txt"), tokenizer=str(hf_dir),
                     cache_dir=str(tmp_path / "cache"))  # fmt: skip
    prepared = data.prepare.prepare(cfg, verbose=False)
    assert (prepared.dir / "tokenizer.json").read_bytes() == (hf_dir / "tokenizer.json").read_bytes()
    tok = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    meta = prepared.meta
    assert (meta["eot_id"], meta["eot_token"]) == (1, "</s>") and tok.id_to_token(1) == "</s>"
    assert meta["tokenizer_hash"] == tokenizer_hash(tok) and meta["vocab_size"] == tok.get_vocab_size()
    assert meta["tokenizer_from"] == str(hf_dir.resolve())
    # each document after </s>, decoding to its text; the long one was cut into chunks, and a chunk that
    # continues a document must not start with a word-start ▁ of its own (it would add a space)
    docs = documents(prepared, "train")
    assert [tok.decode(ids) for ids in docs] == [*DOCS[:3], LONG]
    assert meta["splits"]["train"]["chars"] == sum(map(len, [*DOCS[:3], LONG]))
    assert tok.decode(documents(prepared, "val")[0]) == " ".join(DOCS[:6])

    again = data.prepare.prepare(cfg, verbose=False)
    assert again.reused and again.dir == prepared.dir
    moved = tmp_path / "moved"
    shutil.copytree(hf_dir, moved)  # the cache keys on the tokenizer's contents, not its path
    moved_cfg = DataConfig(**{**cfg.__dict__, "tokenizer": str(moved)})
    assert data.prepare.prepare(moved_cfg, verbose=False).dir == prepared.dir
    other = tmp_path / "other"
    save_hf_model(byte_level_tokenizer(), other, eot_id=0)
    byte_level = data.prepare.prepare(DataConfig(**{**cfg.__dict__, "tokenizer": str(other)}), verbose=False)
    assert byte_level.dir != prepared.dir and byte_level.meta["eot_token"] == "<|endoftext|>"


def finetune_args(init_from, corpus, cache, out, *extra) -> list[str]:
    """configs/finetune.toml made tiny: 16 of the 32 positions, four steps on the CPU."""
    return ["--config", str(FINETUNE), f"--train.init_from={init_from}", f"--data.source={corpus / 'train'}",
            f"--data.val_source={corpus / 'val.txt'}", f"--data.cache_dir={cache}", "--model.block_size=16",
            "--train.max_steps=4", "--train.batch_size=4", "--train.grad_accum=1", "--train.eval_interval=2",
            "--train.eval_iters=1", "--train.log_interval=1", "--train.sample_tokens=4", "--train.warmup_steps=1",
            "--train.device=cpu", "--train.dtype=fp32", "--train.compile=off", "--train.threads=1",
            "--out", str(out), *extra]  # fmt: skip


@pytest.mark.parametrize("start", ["hf", "imported"])
def test_init_from_starts_at_the_weights_with_the_position_table_cropped(start, hf_dir, imported, corpus, tmp_path):
    init_from = hf_dir if start == "hf" else imported
    out = tmp_path / "run"
    args = finetune_args(init_from, corpus, tmp_path / "cache", out, "--train.lr=0.0", "--train.min_lr=0.0")
    assert train.main(args) == 0
    expected = open_hf(hf_dir).load_state()
    got = load_model(out / "last")
    c = got.config
    rows = expected["tok_emb.weight"].size(0)  # the tokenizer's 110 tokens and 3 rows more
    assert (c.block_size, c.vocab_size, c.activation, c.dropout) == (16, rows, "gelu_new", 0.1)
    state = {k: t for k, t in got.state_dict().items() if k != "lm_head.weight"}
    assert state.keys() == expected.keys()
    for name, t in state.items():  # lr 0: the weights are still the starting ones
        want = expected[name][:16] if name == "pos_emb.weight" else expected[name]  # the first 16 positions
        assert torch.equal(t, want), name
    meta = json.loads((out / "last" / "meta.json").read_text())
    assert (meta["eot_id"], meta["eot_token"]) == (1, "</s>")


def test_fine_tuning_learns_and_scoring_the_val_text_gives_its_bits_per_char(hf_dir, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    args = finetune_args(hf_dir, corpus, tmp_path / "cache", out, "--train.lr=3e-3", "--train.max_steps=16",
                         "--train.eval_interval=8")  # fmt: skip
    assert train.main(args) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert sum(losses[-4:]) < sum(losses[:4]) - 0.4  # it learns
    final = records[-1]
    score = score_file(load_run(out / "last", device="cpu"), corpus / "val.txt", progress=False)  # val_bpc's weights
    assert score.chars == final["val_chars"] == len(" ".join(DOCS[:6]))
    assert score.tokens == final["val_tokens_predicted"]
    assert score.bits_per_char == pytest.approx(final["val_bpc"], abs=1e-6)
    capsys.readouterr()
    assert generate.main(["--ckpt", str(out), "--prompt", "대한민국의", "--max-new-tokens", "6", "--temperature", "0"]) == 0
    assert generate.main(["--ckpt", str(out), "--prompt", "대한민국의 주권은", "--attention", str(tmp_path / "att")]) == 0
    labels = np.load(tmp_path / "att" / "attention.npz")["labels"].tolist()
    assert labels[:2] == ["</s>", "␣대한민국"] and not any("▁" in label for label in labels)


@pytest.mark.parametrize(
    "override, words",
    [
        ("--model.n_layer=3", "model.n_layer = 3 contradicts"),
        ("--model.n_embd=64", "model.n_embd = 64 contradicts"),
        ("--model.activation=gelu", "model.activation = 'gelu' contradicts"),
        ("--model.block_size=64", "model.block_size = 64 exceeds the 32 positions"),
    ],
)
def test_a_setting_that_contradicts_the_weights_is_refused(override, words, hf_dir, corpus, tmp_path, capsys):
    assert train.main(finetune_args(hf_dir, corpus, tmp_path / "cache", tmp_path / "run", override)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists() and not (tmp_path / "cache").exists()  # refused before any work


def test_a_tokenizer_other_than_the_model_s_is_refused(hf_dir, corpus, tmp_path, capsys):
    other = tmp_path / "other"
    save_hf_model(byte_level_tokenizer(), other, eot_id=0)
    args = finetune_args(hf_dir, corpus, tmp_path / "cache", tmp_path / "run", f"--data.tokenizer={other}")
    capsys.readouterr()
    assert train.main(args) == 2
    err = capsys.readouterr().err
    assert "is not the tokenizer of train.init_from" in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_an_interrupted_fine_tune_resumes_exactly(hf_dir, corpus, tmp_path):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    extra = ("--model.dropout=0.1", "--train.lr=3e-3")
    assert train.main(finetune_args(hf_dir, corpus, tmp_path / "cache", straight, *extra)) == 0
    args = finetune_args(hf_dir, corpus, tmp_path / "cache", interrupted, *extra)
    first = subprocess.run(hooked_train(args, "--signal-after", "3:TERM"), cwd=ROOT, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert first.returncode == 143, first.stderr
    assert train.main([*args, "--resume"]) == 0
    a = safetensors.torch.load_file(straight / "last" / "model.safetensors")
    b = safetensors.torch.load_file(interrupted / "last" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    start = open_hf(hf_dir).load_state()
    assert not torch.equal(a["tok_emb.weight"], start["tok_emb.weight"])  # it did train
