"""Heads over training: the role scores of every evaluation, heads.png, train.snapshots and the page with a slider
over them (training/evaluation.py, training/plots.py, training/checkpoints.py, inspection/over_training.py).

    python -m pytest tests/test_over_training.py -q
"""

import json
import re
import shutil
import types

import numpy as np
import pytest
import torch

import generate
import train
from inference.runs import load_run
from inspection.views.roles import ROLES
from storage.checkpoint import read_config, snapshot_dirs
from training.checkpoints import drop_snapshots_after, snapshot_due, snapshots_taken
from training.metrics import read_metrics
from training.plots import plot_heads
from tests.conftest import CHROMIUM, TINY

PROMPT = "대한민국 국회는 법률을 제정한다"


@pytest.fixture(scope="module")
def run(tmp_path_factory, data_cache):
    """configs/tiny.toml for 40 steps, an evaluation every 10, and 3 snapshots."""
    out = tmp_path_factory.mktemp("over-training") / "run"
    argv = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.max_steps=40", "--train.snapshots=3", "--out", str(out)]  # fmt: skip
    assert train.main(argv) == 0
    return out


def evaluations(run):
    return [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "eval"]


def test_every_evaluation_records_every_heads_role_scores_and_the_run_draws_them(run):
    records = evaluations(run)
    assert [r["step"] for r in records] == [10, 20, 30, 40]
    for r in records:
        assert set(r["heads"]["scores"]) == {*ROLES, "same-word", "word-start", "previous-word"}  # the word roles: word starts known
        assert all(np.array(r["heads"]["scores"][role]).shape == (2, 2) for role in ROLES)  # (layers, heads)
        assert r["heads"]["repeat"] == 7  # (block_size 16 - 1) // 2 random tokens, twice
        assert 0 < r["heads"]["seconds"] < 5
    assert (run / "heads.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_snapshots_are_taken_at_the_evaluations_that_space_them_evenly(run):
    # the k-th of 3 is due at step 40 k / 3 (13.3, 26.7, 40): the evaluations at 20, 30 and 40
    assert [d.name for d in snapshot_dirs(run)] == ["step_000020", "step_000030", "step_000040"]
    taken = []
    for step in range(10, 101, 10):  # 4 of 100 steps: due at 25, 50, 75 and 100
        if snapshot_due(step, 100, len(taken), 4):
            taken.append(step)
    assert taken == [30, 50, 80, 100]
    assert [s for s in range(10, 51, 10) if snapshot_due(s, 50, 0, 0)] == []  # train.snapshots = 0: none


def test_a_snapshot_is_a_checkpoint_every_command_takes(run, tmp_path, capsys):
    snapshot = run / "snapshots" / "step_000030"
    assert sorted(p.name for p in snapshot.iterdir()) == ["config.json", "meta.json", "model.safetensors",
                                                          "tokenizer.json"]  # no train state  # fmt: skip
    assert json.loads((snapshot / "config.json").read_text())["step"] == 30
    assert load_run(snapshot).model.config.n_layer == 2
    for argv in (["--prompt", "대한민국은", "--max-new-tokens", "5", "--temperature", "0"],
                 ["--prompt", PROMPT, "--attention", tmp_path / "maps", "--explain", "1.0"]):
        assert generate.main(["--ckpt", str(snapshot), *map(str, argv)]) == 0
    assert (tmp_path / "maps" / "attention.html").is_file()


def test_recorded_scores_equal_those_of_heads_on_the_snapshot_of_that_step(run, tmp_path, capsys):
    recorded = {r["step"]: r["heads"] for r in evaluations(run)}
    for snapshot in snapshot_dirs(run):
        out = tmp_path / snapshot.name
        assert generate.main(["--ckpt", str(snapshot), "--heads", "--attention", str(out)]) == 0
        saved = json.loads((out / "heads.json").read_text())
        record = recorded[int(snapshot.name[5:])]
        for role in ROLES:  # heads.json holds the scores in the form metrics.jsonl's evaluations do
            assert np.allclose(saved["scores"][role], record["scores"][role], atol=1e-6, rtol=0), role
        for copy in ("loss_first_copy", "loss_second_copy"):
            assert saved[copy] == pytest.approx(record[copy], abs=1e-6)


def test_heads_png_needs_scores_to_draw(tmp_path):
    assert plot_heads([{"kind": "eval", "step": 10, "train_loss": 1.0, "val_loss": 1.0}], tmp_path / "h.png") is False
    assert not (tmp_path / "h.png").exists()


def test_over_training_writes_one_page_and_a_line_per_snapshot(run, tmp_path, capsys):
    assert generate.main(["--prompt", PROMPT, "--attention", str(tmp_path), "--over-training", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {tmp_path / 'over_training.html'} (3 snapshots, ")
    assert [line.split()[0] for line in out.splitlines()[2:]] == ["20", "30", "40"]
    page = (tmp_path / "over_training.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    recorded = {r["step"]: r["heads"] for r in evaluations(run)}
    assert [f["step"] for f in data["frames"]] == [20, 30, 40]
    for frame in data["frames"]:
        assert frame["scores"]["scores"] == recorded[frame["step"]]["scores"]  # the run's own record
    assert sorted(p.name for p in tmp_path.iterdir()) == ["over_training.html"]


@pytest.mark.parametrize("argv, message", [
    (["--prompt", "x", "--over-training", "RUN"], "--over-training RUN draws the maps of --prompt TEXT"),
    (["--prompt", "x", "--attention", "OUT", "--over-training", "RUN", "--heads"], "; drop --heads"),
    (["--prompt", "x", "--attention", "OUT", "--over-training", "RUN", "--ckpt", "RUN"], "; drop --ckpt"),
])  # fmt: skip
def test_over_training_refuses_what_it_cannot_do_in_one_line(argv, message, capsys):
    assert generate.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_over_training_of_a_run_without_snapshots_says_how_to_take_them(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert generate.main(["--prompt", "x", "--attention", str(tmp_path / "o"), "--over-training", str(tmp_path / "run")]) == 2
    assert "train it with --train.snapshots=8" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_the_slider_steps_the_page_through_the_snapshots(run, tmp_path, capsys, browser):
    assert generate.main(["--prompt", PROMPT, "--attention", str(tmp_path), "--over-training", str(run)]) == 0
    maps = {s: load_run(run / "snapshots" / f"step_{s:06d}") for s in (20, 30, 40)}
    ids = maps[40].encode_prompt(PROMPT)
    expected = {s: r.model.attention_maps(torch.tensor([ids]))[0].detach().numpy() for s, r in maps.items()}
    recorded = {r["step"]: r["heads"] for r in evaluations(run)}
    page = browser(tmp_path / "over_training.html", "#step=20&layer=1&head=all")
    assert page.problems() == ([], "")
    assert page.evaluate("document.getElementById('trainer').hidden") is False
    for step in (20, 30, 40):
        if step != 20:
            page.click(*page.centre("#frame-on"))
        assert page.evaluate("document.getElementById('frame-text').textContent").startswith(f"step {step} (")
        page.move(*page.centre("#tokens .tok", 5))  # layer 1, every head's row 5
        shown = np.array([float(w) for w in page.texts("#outgoing .w")]).reshape(2, len(ids))
        np.testing.assert_allclose(shown, expected[step][1, :, 5], atol=6e-4)
        assert page.evaluate("document.querySelector('#roles p').textContent").startswith(f"role scores at step {step} ")
        rows = page.evaluate("Array.from(document.querySelector('#roles table').rows, r => Array.from(r.cells, c => c.textContent))")
        induction = [float(row[5]) for row in rows[1:3]]  # heads 0 and 1 of layer 1 (a real table); word roles after
        np.testing.assert_allclose(induction, recorded[step]["scores"]["induction"][1], atol=5e-4)
    assert page.problems() == ([], "")


def test_over_training_draws_only_this_runs_snapshots_and_names_each_other_entry(run, tmp_path, data_cache, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    snapshots = copy / "snapshots"
    other = tmp_path / "other"  # another run of the same shape: another seed, 10 steps, its one snapshot at step 10
    assert train.main(["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.seed=7",
                       "--train.sample_tokens=0", "--train.max_steps=10", "--train.snapshots=1", "--out", str(other)]) == 0
    shutil.copytree(other / "snapshots" / "step_000010", snapshots / "step_000010")
    shutil.copytree(snapshots / "step_000020", snapshots / "step_000025")  # another shape: 3 layers of 4 heads
    config = json.loads((snapshots / "step_000025" / "config.json").read_text(encoding="utf-8"))
    config["model"] |= {"n_layer": 3, "n_head": 4}
    (snapshots / "step_000025" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for name in ("step_²", "step_١٥"):  # digits, but not ASCII ones
        shutil.copytree(snapshots / "step_000020", snapshots / name)
    (snapshots / "step_000035").write_text("not a directory", encoding="utf-8")
    records = [json.loads(line) for line in (copy / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    for r in records:
        if r.get("kind") == "eval" and r["step"] == 30:
            r["heads"] = {"seconds": 0.1}  # a record whose heads hold no scores
    (copy / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    capsys.readouterr()

    assert generate.main(["--prompt", PROMPT, "--attention", str(tmp_path / "page"), "--over-training", str(copy)]) == 0
    out, err = capsys.readouterr()
    page = (tmp_path / "page" / "over_training.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert [f["step"] for f in data["frames"]] == [20, 30, 40]  # this run's three, nothing else
    skipped = {line.split()[1].rstrip(":").rsplit("/", 1)[1]: line for line in err.splitlines() if line.startswith("skipped")}
    assert sorted(skipped) == ["step_000010", "step_000025", "step_000035", "step_²", "step_١٥"]
    assert "another run's (run_id " in skipped["step_000010"]
    assert "another model's (n_layer 3 here, 2 in the run, n_head 4 here, 2 in the run)" in skipped["step_000025"]
    assert all("not a directory named step_<ASCII digits>" in skipped[n] for n in ("step_000035", "step_²", "step_١٥"))
    assert "metrics.jsonl's head scores for step_000030 cannot be read; scoring that snapshot again" in err
    assert "Traceback" not in err and out.count("\n") == 5  # the "wrote" line, the table's header and three steps


def test_a_resume_counts_and_retakes_only_its_own_snapshots(run, tmp_path, data_cache):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    foreign = copy / "snapshots" / "step_000035"
    shutil.copytree(copy / "snapshots" / "step_000030", foreign)
    config = json.loads((foreign / "config.json").read_text(encoding="utf-8")) | {"run_id": "0123456789abcdef"}
    (foreign / "config.json").write_text(json.dumps(config), encoding="utf-8")
    cfg = types.SimpleNamespace(model=read_config(copy / "last"), run_id=json.loads((copy / "config.json").read_text())["run_id"])
    assert [d.name for d in snapshots_taken(copy, cfg)] == ["step_000020", "step_000030", "step_000040"]
    drop_snapshots_after(copy, 20, cfg)  # what a resume from step 20 does: the foreign one stays where it was
    assert sorted(d.name for d in (copy / "snapshots").iterdir()) == ["step_000020", "step_000035"]
