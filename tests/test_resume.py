"""Stopping and resuming: signals, exact continuation, kill -9 during a save, crash recovery.

The subprocesses run train.py through tests/train_with_hooks.py, with train.main's two test hooks:
--signal-after STEP:INT|TERM makes the run signal itself after that step (as Ctrl-C or `kill` would), and
--pause-in-save STEP[:best] makes the save of last/ (or best/) at that step sleep halfway, after printing
SAVE_PAUSED.
"""

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from model.errors import UserError
from training.checkpoints import recover
from storage.checkpoint import load_model, snapshot_dirs
from tests.conftest import ROOT, TINY, hooked_train, train_paused_in_a_save


def cli_args(data_cache, run, *extra):
    # dropout on, an uneven log interval and gradient accumulation: every piece of state must survive
    return ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.log_interval=3",
            "--train.grad_accum=2", "--model.dropout=0.1", "--out", str(run), *extra]  # fmt: skip


def run_cli(args, signal_after=None, timeout=180):
    """`python train.py ARGS` in a process, signalling itself after a step ("7:TERM") if asked."""
    command = hooked_train(args, "--signal-after", signal_after) if signal_after else [sys.executable, "train.py", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def logged_losses(run):
    return [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


@pytest.mark.slow
def test_interrupted_and_resumed_run_equals_the_uninterrupted_one(tmp_path, data_cache):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    argv = cli_args(data_cache, straight)
    assert train.main(argv) == 0

    args = cli_args(data_cache, interrupted)
    first = run_cli(args, "7:TERM")
    assert first.returncode == 143, first.stderr
    last_line = first.stderr.strip().splitlines()[-1]
    assert last_line.startswith("stopped at step 7; saved ") and "; resume with: " in last_line  # one line
    command = last_line.split("; resume with: ")[1]
    assert command == shlex.join(["python", "train.py", *args, "--resume"])
    assert torch.load(interrupted / "last" / "train_state.pt", weights_only=True)["step"] == 7

    # the printed command, interrupted again (Ctrl-C this time), then run to the end
    resume = shlex.split(command)[2:]
    second = run_cli(resume, "13:INT")
    assert second.returncode == 130, second.stderr
    assert train.main(resume) == 0

    assert logged_losses(interrupted) == logged_losses(straight)
    assert [s for s, _ in logged_losses(straight)] == [3, 6, 9, 12, 15, 18, 20]
    for ckpt in ("last", "best"):
        assert (interrupted / ckpt / "model.safetensors").read_bytes() == (straight / ckpt / "model.safetensors").read_bytes()
    final = [json.loads(line) for line in (interrupted / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["kind"] == "final" and final["step"] == 20


@pytest.mark.slow
def test_kill_9_during_a_save_leaves_the_previous_checkpoint(tmp_path, data_cache):
    run = tmp_path / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    proc = train_paused_in_a_save(args, "20")  # the save at step 10 completes, the one at 20 hangs
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert (run / ".tmp-last" / "model.safetensors").exists()  # the half-written new checkpoint
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 10
    assert load_model(run / "last").config.n_embd == 32  # the previous one still loads

    assert train.main([*args, "--resume"]) == 0
    assert not (run / ".tmp-last").exists()
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 20


@pytest.mark.slow
def test_kill_9_between_the_last_and_best_saves_is_made_consistent(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    proc = train_paused_in_a_save(args, "20:best")  # last/ of step 20 is saved, best/ not yet
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    last = torch.load(run / "last" / "train_state.pt", weights_only=True)
    assert (last["step"], last["best_step"]) == (20, 20)
    assert torch.load(run / "best" / "train_state.pt", weights_only=True)["step"] == 10  # the pair disagrees

    assert train.main([*args, "--resume"]) == 0  # nothing left to train: recovery and the final report
    assert (run / "best" / "model.safetensors").read_bytes() == (run / "last" / "model.safetensors").read_bytes()
    assert torch.load(run / "best" / "train_state.pt", weights_only=True)["step"] == 20
    report = capsys.readouterr().out.strip().splitlines()[-2]  # the last: best/'s heads (training/evaluation.py)
    assert f"best weights ({run / 'best'}, step 20) " in report and f"last ({run / 'last'}, step 20) " in report
    final = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert final["best_step"] == 20 and final["best_val_bpc"] == final["val_bpc"]


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs (needs root, or the right to mount): a disk that a test can fill."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """Fill `disk` with one file, then free `leave` bytes of it."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_previous_checkpoint(small_disk, data_cache, capsys):
    run = small_disk / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    assert train.main([*args, "--train.max_steps=10"]) == 0
    before = {p.name: p.read_bytes() for p in (run / "last").iterdir()}
    capsys.readouterr()
    filler = fill(small_disk, leave=128 * 1024)  # room for the log lines, not for a checkpoint
    assert train.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"error: cannot save {run / 'last'} (No space left on device); it keeps its previous checkpoint: "
                        f"free some disk space, then continue with --resume\n")
    assert "Traceback" not in err and err.count("error:") == 1
    assert {p.name: p.read_bytes() for p in (run / "last").iterdir()} == before
    assert sorted(p.name for p in run.iterdir()) == ["best", "config.json", "heads.png", "last", "loss.png", "metrics.jsonl"]
    filler.unlink()
    assert train.main([*args, "--resume"]) == 0
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 20


def test_recover_puts_back_a_checkpoint_caught_between_renames(tmp_path):
    run = tmp_path / "run"
    (run / "last.old").mkdir(parents=True)  # crashed after renaming last -> last.old, before .tmp-last -> last
    (run / "last.old" / "model.safetensors").write_text("old")
    (run / ".tmp-last").mkdir()
    (run / "best").mkdir()  # crashed after the swap of best, before deleting best.old
    (run / "best" / "model.safetensors").write_text("new")
    (run / "best.old").mkdir()
    (run / ".metrics.jsonl.k2j3h4.tmp").write_text("half")  # an atomic write cut short
    recover(run)
    assert (run / "last" / "model.safetensors").read_text() == "old"
    assert (run / "best" / "model.safetensors").read_text() == "new"
    assert sorted(p.name for p in run.iterdir()) == ["best", "last"]


def test_a_checkpoint_from_before_a_new_model_setting_still_resumes(tmp_path):
    """A setting added later (model.activation) is absent from an old config.json: its default is assumed."""
    from dataclasses import asdict

    from model import GPTConfig
    from training.run_dir import check_same_model

    config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    old = {k: v for k, v in asdict(config).items() if k != "activation"}
    (tmp_path / "config.json").write_text(json.dumps({"model": old}))
    (tmp_path / "meta.json").write_text(json.dumps({"tokenizer_hash": "h"}))
    check_same_model(tmp_path, asdict(config), {"tokenizer_hash": "h"})  # no error
    with pytest.raises(UserError, match="model.activation gelu -> gelu_new"):
        check_same_model(tmp_path, {**asdict(config), "activation": "gelu_new"}, {"tokenizer_hash": "h"})


@pytest.mark.slow
def test_a_run_killed_after_a_snapshot_resumes_to_the_same_snapshots_lessons_and_head_scores(tmp_path, data_cache):
    # An evaluation takes its snapshot before it saves last/: killed in that save, the run resumes from the
    # evaluation before, drops the snapshot and takes it again, with the same copy lessons on the way.
    extra = ["--train.eval_interval=5", "--train.snapshots=2", "--train.copy_lessons=0.5", "--train.sample_tokens=0"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert train.main(cli_args(data_cache, straight, *extra)) == 0
    args = cli_args(data_cache, killed, *extra)
    proc = train_paused_in_a_save(args, "10")  # the snapshot of step 10 is taken, last/ of step 10 half-written
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert [d.name for d in snapshot_dirs(killed)] == ["step_000010"]
    assert torch.load(killed / "last" / "train_state.pt", weights_only=True)["step"] == 5
    assert train.main([*args, "--resume"]) == 0

    assert [d.name for d in snapshot_dirs(killed)] == [d.name for d in snapshot_dirs(straight)] == ["step_000010",
                                                                                                    "step_000020"]  # fmt: skip
    for a, b in zip(snapshot_dirs(killed), snapshot_dirs(straight)):
        assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert logged_losses(killed) == logged_losses(straight)
    heads = [[r["heads"]["scores"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
              if r.get("kind") == "eval"] for run in (straight, killed)]  # fmt: skip
    assert heads[0] == heads[1] and len(heads[0]) == 4
