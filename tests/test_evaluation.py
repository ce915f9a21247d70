"""What each evaluation measures of the heads (training/evaluation.py): their cost when switched off, recorded as
`--heads` prints it (train.head_costs), and heads kept off from the first step (train.heads_off,
common/heads_off.py's HeadsOff) in training, in every command that opens the run, and through a resume.

    python -m pytest tests/test_evaluation.py -q
"""

import json
import os
import re
import shutil
import signal

import pytest
import torch

import generate
import train
from inference.runs import load_run
from model import GPT
from common.heads_off import HeadsOff
from storage.checkpoint import load_model
from training.config import load_config
from training.evaluation import head_costs_due
from training.metrics import read_metrics
from training.plots import plot_heads
from tests.conftest import ROOT, TINY

PROMPT = "대한민국 국회는 법률을"


def trained(root, data_cache, *overrides, steps: int = 6):
    """configs/tiny.toml for `steps` steps (an evaluation every 2), one thread, into root/run."""
    argv = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            f"--train.max_steps={steps}", "--train.eval_interval=2", "--out", str(root / "run"), *overrides]
    assert train.main(argv) == 0
    return root / "run"


def evaluations(run):
    return [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "eval"]


def test_head_costs_are_measured_where_they_are_cheap_or_a_snapshot_is_taken():
    lesson, default = load_config(ROOT / "configs" / "heads.toml"), load_config(ROOT / "configs" / "small.toml")
    assert head_costs_due(lesson.train, lesson.model, snapshot=False)  # 3% of the training between evaluations
    assert not head_costs_due(default.train, default.model, snapshot=False)  # a third of it: with snapshots only
    assert head_costs_due(default.train, default.model, snapshot=True)
    forced = load_config(ROOT / "configs" / "small.toml", ["--train.head_costs=true"])
    assert head_costs_due(forced.train, forced.model, snapshot=False)
    never = load_config(ROOT / "configs" / "heads.toml", ["--train.head_costs=false"])
    assert not head_costs_due(never.train, never.model, snapshot=True)


@pytest.mark.slow
def test_each_evaluation_s_costs_are_those_heads_prints_for_its_snapshot(tmp_path, data_cache, capsys):
    """A run with head 1.0 kept off (mean mode) and costs at every evaluation: the cost columns and the role scores
    of the evaluation that took a snapshot are what `generate.py --ckpt SNAPSHOT --heads` computes, and heads.png
    draws the costs in two panels more."""
    run = trained(tmp_path, data_cache, "--train.heads_off=1.0", "--train.head_costs=true", "--train.snapshots=1")
    records = evaluations(run)
    assert [r["step"] for r in records] == [2, 4, 6] and all("importance" in r["heads"] for r in records)
    capsys.readouterr()
    assert generate.main(["--ckpt", str(run / "snapshots" / "step_000006"), "--heads", "--attention",
                          str(tmp_path / "heads")]) == 0  # fmt: skip
    assert "this run kept heads 1.0 off from its first step" in capsys.readouterr().err
    printed = json.loads((tmp_path / "heads" / "heads.json").read_text(encoding="utf-8"))
    recorded = records[-1]["heads"]  # the same record's form as heads.json's
    for l, k in ((0, 0), (0, 1), (1, 1)):
        for table, key in (("importance", "loss"), ("importance", "drop"), ("scores", "induction")):
            assert printed[table][key][l][k] == pytest.approx(recorded[table][key][l][k], abs=2e-6)
    for saved in (printed, recorded):  # kept off: marked so, no role or cost of its own, in both
        assert saved["off"] == ["1.0"] and saved["importance"]["loss"][1][0] is None
        assert saved["scores"]["induction"][1][0] is None
    assert generate.main(["--prompt", PROMPT, "--attention", str(tmp_path / "page"), "--over-training", str(run)]) == 0
    page = (tmp_path / "page" / "over_training.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert data["frames"][0]["scores"]["importance"]["drop"] == recorded["importance"]["drop"]  # the slider's step
    import matplotlib.image

    with_costs = matplotlib.image.imread(run / "heads.png").shape[0]
    plain = [{**r, "heads": {k: v for k, v in r["heads"].items() if k != "importance"}} for r in records]
    assert plot_heads(plain, tmp_path / "plain.png")
    assert with_costs / matplotlib.image.imread(tmp_path / "plain.png").shape[0] == pytest.approx(9 / 7, rel=0.02)


@pytest.mark.parametrize("heads_off, mode, off", [("1.0", "mean", ["1.0"]), ("0.1", "zero", ["0.1"]),
                                                   ("0", "mean", ["0.0", "0.1"]), ('["1.1", "0.0"]', "zero", ["0.0", "1.1"])])
def test_kept_off_heads_are_marked_off_in_every_record_and_in_heads_png(tmp_path, data_cache, monkeypatch, heads_off,
                                                                        mode, off):  # fmt: skip
    # 4 runs x (3 evaluation records, the final record, heads.png): an off head has no role score, no cost and no
    # line, and is named; every live head keeps its numbers
    run = trained(tmp_path, data_cache, f"--train.heads_off={heads_off}", f"--train.heads_off_mode={mode}",
                  "--train.head_costs=true")  # fmt: skip
    records = read_metrics(run / "metrics.jsonl")
    scored = [r["heads"] for r in records if r.get("kind") == "eval"] + [records[-1]["best_heads"]]
    assert len(scored) == 4
    for heads in scored:
        assert heads["off"] == off
        tables = [*heads["scores"].values(), heads["importance"]["loss"], heads["importance"]["drop"]]
        for layer in range(2):
            for head in range(2):
                values = [table[layer][head] for table in tables]
                if f"{layer}.{head}" in off:
                    assert values == [None] * len(tables)
                else:  # duplicate-token may be null on a text with no repeated token; the rest are numbers
                    assert all(isinstance(v, float) for v in values[1:] if v is not None) and values[-1] is not None
    figures = []
    monkeypatch.setattr("training.plots.save_png", lambda fig, png: figures.append(fig))
    assert plot_heads(records, tmp_path / "heads.png")
    axes = figures[0].axes
    assert any(t.get_text() == "kept off, no line: " + ", ".join(off) for t in axes[1].texts)
    for ax in axes[1:6] + axes[-2:]:  # the five role panels and the two cost panels
        drawn = [line for line in ax.get_lines() if list(line.get_xdata()) == [2, 4, 6]  # a head's, not a bar's
                 and any(y == y for y in line.get_ydata())]
        assert len(drawn) == 4 - len(off), ax.get_ylabel()


@pytest.mark.slow
def test_a_zeroed_head_never_changes_but_by_weight_decay_and_every_command_keeps_it_off(tmp_path, data_cache, capsys):
    """train.heads_off = "1.0" in zero mode: no gradient ever reaches the head's q, k, v or its W_O columns, so
    AdamW's weight decay alone moves them, by (1 - lr_t * weight_decay) a step, from the seeded initial weights;
    generate.py on the run writes what --ablate 1.0 --ablate-mode zero writes on the same weights."""
    run = trained(tmp_path, data_cache, "--train.heads_off=1.0", "--train.heads_off_mode=zero")
    cfg = load_config(TINY, ["--train.max_steps=6"])
    end = load_model(run / "last")
    torch.manual_seed(cfg.train.seed)
    first = GPT(end.config)  # seeded as training.setup.initial_model seeds it
    decay = 1.0
    for step in range(cfg.train.max_steps):
        decay *= 1 - train.get_lr(step, cfg.train) * cfg.train.weight_decay
    c, hs = end.config.n_embd, end.config.head_dim
    for name, rows in (("attn.c_attn.weight", [slice(p * c, p * c + hs) for p in range(3)]),
                       ("attn.c_proj.weight", [(slice(None), slice(0, hs))])):
        for index in rows:
            w0, w1 = (m.blocks[1].get_submodule(name.rsplit(".", 1)[0]).weight.detach()[index] for m in (first, end))
            torch.testing.assert_close(w1, w0 * decay, rtol=2e-5, atol=1e-7)
    copy = tmp_path / "copy"
    shutil.copytree(run / "best", copy)
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    config.pop("kept_off")
    (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
    texts = []
    for ckpt, extra in ((run, []), (copy, ["--ablate", "1.0", "--ablate-mode", "zero"])):
        capsys.readouterr()
        assert generate.main(["--ckpt", str(ckpt), "--prompt", PROMPT, "--max-new-tokens", "12", "--temperature", "0",
                              *extra]) == 0  # fmt: skip
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1]


@pytest.mark.slow
def test_a_head_kept_off_in_mean_mode_stays_off_through_a_resume_and_in_every_command(tmp_path, data_cache,
                                                                                     monkeypatch):
    """Six steps straight, and the same run stopped by Ctrl-C after step 3 and resumed: the same weights and the
    same recorded means; the run opened by load_run gives what `HeadsOff` gives the bare weights with those means."""
    straight = trained(tmp_path / "a", data_cache, "--train.heads_off=0.1")
    argv = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.max_steps=6", "--train.eval_interval=2", "--train.heads_off=0.1", "--out", str(tmp_path / "b")]
    with monkeypatch.context() as hooked:
        hooked.setattr(train, "after_step", lambda step: os.kill(os.getpid(), signal.SIGINT) if step == 3 else None)
        assert train.main(argv) == 130
    assert train.main([*argv, "--resume"]) == 0
    resumed = tmp_path / "b"
    a, b = load_model(straight / "last"), load_model(resumed / "last")
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    kept = [json.loads((r / "last" / "config.json").read_text(encoding="utf-8"))["kept_off"] for r in (straight, resumed)]
    assert kept[0] == kept[1] and kept[0]["heads"] == ["0.1"] and kept[0]["mode"] == "mean"
    run = load_run(straight, device="cpu")
    bare = load_model(straight / "last")  # the network alone: the kept-off heads are on in it
    hs = bare.config.head_dim
    means = torch.zeros(bare.config.n_layer, bare.config.n_embd)
    means[0, hs : 2 * hs] = torch.tensor(kept[0]["means"]["0.1"])
    x = torch.tensor([run.encode_prompt(PROMPT)])
    with torch.no_grad(), HeadsOff(bare, [(0, 1)], "mean", means):
        expected = bare(x, all_logits=True)[0]
    with torch.no_grad():
        torch.testing.assert_close(run.model(x, all_logits=True)[0], expected, rtol=0, atol=1e-6)
