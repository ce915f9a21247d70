"""bench/gpu_check.sh without a GPU: the one-line refusal, the time budget with fake steps, the speed figures."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import gpu_check
from bench.gpu_check import Context, Step, StepFailed, plan_timeout, run_command, run_steps, train_figures

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_without_cuda_the_check_refuses_with_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OUT": str(tmp_path / "out")}  # no GPU, even on a GPU machine
    result = subprocess.run(["bash", "bench/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no CUDA device"), result.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_plan_timeout_keeps_the_need_of_later_steps_that_can_still_run():
    assert plan_timeout(left=100, need=10, later_needs=[30, 20], cap=80) == 50
    assert plan_timeout(left=300, need=10, later_needs=[30, 20], cap=80) == 80  # the cap binds
    assert plan_timeout(left=100, need=10, later_needs=[60, 35], cap=80) == 40  # 35 no longer fits after 60
    assert plan_timeout(left=100, need=10, later_needs=[95], cap=80) == 80  # 95 can never run: nothing kept
    assert plan_timeout(left=100, need=10, later_needs=[60, 30], cap=80) == 10  # its own need comes first
    assert plan_timeout(left=9, need=10, later_needs=[], cap=80) is None


def sleeper(seconds: float):
    """A fake step: a child process that sleeps, run like the real steps' commands."""

    def run(ctx, timeout):
        code, _ = run_command([sys.executable, "-c", f"import time; time.sleep({seconds})"], timeout, ctx)
        if code:
            raise StepFailed(f"exit {code}")
        return {"figures": f"slept {seconds} s"}

    return run


@pytest.mark.slow
def test_a_step_past_its_share_is_stopped_and_the_budget_holds(tmp_path):
    ctx = Context(work=tmp_path, log_path=tmp_path / "log", env=dict(os.environ))
    steps = [
        Step("quick", need=0.1, cap=5, run=sleeper(0.05)),
        Step("slow", need=0.5, cap=1.0, run=sleeper(60)),  # past its 1 s cap: killed
        Step("after_slow", need=0.1, cap=5, run=sleeper(0), requires=("slow",)),
        Step("huge", need=50, cap=100, run=sleeper(0)),  # more than the whole budget
        Step("last", need=0.2, cap=5, run=sleeper(0)),
    ]
    emitted = []
    began = time.monotonic()
    records = run_steps(steps, budget=4.0, ctx=ctx, emit=emitted.append)
    elapsed = time.monotonic() - began
    assert emitted == records
    assert [(r["step"], r["status"]) for r in records] == [
        ("quick", "ok"), ("slow", "timeout"), ("after_slow", "skipped"), ("huge", "skipped"), ("last", "ok"),
    ]  # fmt: skip
    assert 0.9 < records[1]["seconds"] < 2.0 and records[1]["why"] == "stopped after its 1 s"
    assert records[2]["why"] == "needs slow"
    assert records[3]["why"].endswith("needs 50 s")
    assert elapsed < 4.0
    assert "[killed after 1 s]" in (tmp_path / "log").read_text()
    summary = gpu_check.table(records).splitlines()[-1]
    assert summary.startswith("skipped or unfinished: slow (timeout") and "huge (skipped" in summary


def test_a_failing_or_broken_step_does_not_stop_the_next(tmp_path):
    ctx = Context(work=tmp_path, log_path=tmp_path / "log", env=dict(os.environ))

    def broken(ctx, timeout):
        return {"x": 1 / 0}

    steps = [Step("fails", 0.1, 5, run=lambda c, t: (_ for _ in ()).throw(StepFailed("went wrong"))),
             Step("broken", 0.1, 5, run=broken), Step("fine", 0.1, 5, run=sleeper(0))]  # fmt: skip
    records = run_steps(steps, budget=10, ctx=ctx, emit=lambda r: None)
    assert [(r["status"], r.get("why")) for r in records] == [
        ("failed", "went wrong"), ("failed", "ZeroDivisionError: division by zero"), ("ok", None),
    ]  # fmt: skip


def test_train_figures_separate_the_compile_from_the_step_time():
    # 10-step intervals of 1,000 tokens per step: the first took 25 s (compile), the others 0.5 s per step
    records = [{"step": 10, "loss": 7.0, "tokens_per_s": 10 * 1000 / 25}]
    records += [{"step": s, "loss": 6.0, "tokens_per_s": rate} for s, rate in [(20, 2000), (30, 1900), (40, 2100)]]
    records += [{"kind": "eval", "step": 40, "val_loss": 5.9},
                {"kind": "final", "step": 40, "val_bpc": 3.21, "tokens_per_s": 900}]  # fmt: skip
    figures = train_figures(records, tokens_per_step=1000, flops_per_token=1e9, peak=4e12)
    assert figures["tokens_per_s"] == 2000 and figures["step_ms"] == 500.0
    assert figures["compile_s"] == pytest.approx(25 - 10 * 0.5)
    assert figures["mfu"] == 0.5  # 1e9 FLOPs x 2000 tokens/s over 4e12 FLOP/s
    assert (figures["loss_first"], figures["loss_last"], figures["val_bpc"]) == (7.0, 6.0, 3.21)
    with pytest.raises(StepFailed, match="1 logged intervals"):
        train_figures(records[:1], tokens_per_step=1000, flops_per_token=1e9, peak=4e12)
