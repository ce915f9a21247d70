"""Stopping and resuming: signals, exact continuation, kill -9 during a save, crash recovery.

The subprocesses use two test hooks of train.py/checkpoint.py: KOGPT_TEST_SIGNAL=<step>:<INT|TERM> makes
the run signal itself after that step (as Ctrl-C or `kill` would), and KOGPT_TEST_SAVE_PAUSE=<step>
makes the save of that step sleep halfway, after printing SAVE_PAUSED.
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
from model import GPT
from tests.conftest import ROOT, TINY


def cli_args(data_cache, run, *extra):
    # dropout on, an uneven log interval and gradient accumulation: every piece of state must survive
    return ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.log_interval=3",
            "--train.grad_accum=2", "--model.dropout=0.1", "--out", str(run), *extra]  # fmt: skip


def run_cli(args, env_hook=None, timeout=180):
    env = {**os.environ, **(env_hook or {})}
    return subprocess.run([sys.executable, "train.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def logged_losses(run):
    return [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def test_interrupted_and_resumed_run_equals_the_uninterrupted_one(tmp_path, data_cache):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    argv = cli_args(data_cache, straight)
    assert train.main(argv) == 0

    args = cli_args(data_cache, interrupted)
    first = run_cli(args, {"KOGPT_TEST_SIGNAL": "7:TERM"})
    assert first.returncode == 143, first.stderr
    assert "stopped at step 7" in first.stderr
    command = first.stderr.strip().splitlines()[-1].strip()
    assert command == shlex.join(["python", "train.py", *args, "--resume"])
    assert torch.load(interrupted / "last" / "train_state.pt", weights_only=True)["step"] == 7

    # the printed command, interrupted again (Ctrl-C this time), then run to the end
    resume = shlex.split(command)[2:]
    second = run_cli(resume, {"KOGPT_TEST_SIGNAL": "13:INT"})
    assert second.returncode == 130, second.stderr
    assert train.main(resume) == 0

    assert logged_losses(interrupted) == logged_losses(straight)
    assert [s for s, _ in logged_losses(straight)] == [3, 6, 9, 12, 15, 18, 20]
    for ckpt in ("last", "best"):
        assert (interrupted / ckpt / "model.safetensors").read_bytes() == (straight / ckpt / "model.safetensors").read_bytes()
    final = [json.loads(line) for line in (interrupted / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["kind"] == "final" and final["step"] == 20


def test_kill_9_during_a_save_leaves_the_previous_checkpoint(tmp_path, data_cache):
    run = tmp_path / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    env = {**os.environ, "KOGPT_TEST_SAVE_PAUSE": "20"}  # the save at step 10 completes, the one at 20 hangs
    proc = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        for line in proc.stdout:
            if line.startswith("SAVE_PAUSED 20"):
                break
        else:
            pytest.fail("the run ended without reaching the save at step 20")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert (run / ".tmp-last" / "model.safetensors").exists()  # the half-written new checkpoint
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 10
    assert GPT.load(run / "last").config.n_embd == 32  # the previous one still loads

    assert train.main([*args, "--resume"]) == 0
    assert not (run / ".tmp-last").exists()
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 20


def test_recover_puts_back_a_checkpoint_caught_between_renames(tmp_path):
    run = tmp_path / "run"
    (run / "last.old").mkdir(parents=True)  # crashed after renaming last -> last.old, before .tmp-last -> last
    (run / "last.old" / "model.safetensors").write_text("old")
    (run / ".tmp-last").mkdir()
    (run / "best").mkdir()  # crashed after the swap of best, before deleting best.old
    (run / "best" / "model.safetensors").write_text("new")
    (run / "best.old").mkdir()
    recover(run)
    assert (run / "last" / "model.safetensors").read_text() == "old"
    assert (run / "best" / "model.safetensors").read_text() == "new"
    assert sorted(p.name for p in run.iterdir()) == ["best", "last"]


def test_a_checkpoint_from_before_a_new_model_setting_still_resumes(tmp_path):
    """A setting added later (model.activation) is absent from an old config.json: its default is assumed."""
    from dataclasses import asdict

    from model import GPTConfig
    from training.checkpoints import check_same_model

    config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    old = {k: v for k, v in asdict(config).items() if k != "activation"}
    (tmp_path / "config.json").write_text(json.dumps({"model": old}))
    (tmp_path / "meta.json").write_text(json.dumps({"tokenizer_hash": "h"}))
    check_same_model(tmp_path, asdict(config), {"tokenizer_hash": "h"})  # no error
    with pytest.raises(UserError, match="model.activation gelu -> gelu_new"):
        check_same_model(tmp_path, {**asdict(config), "activation": "gelu_new"}, {"tokenizer_hash": "h"})
