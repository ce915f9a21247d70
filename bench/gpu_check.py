"""The GPU check: every CUDA path run for real and timed, one step after another, inside 5 minutes on one GPU.

    bash bench/gpu_check.sh                              # the whole check; results in $OUT, else bench/out/
    python bench/gpu_check.py --only peak,tests          # some steps (and the ones they need)
    python bench/gpu_check.py --budget 240               # seconds for all steps together (default 300)
    python bench/gpu_check.py --dry-run                  # the plan: each step's need and cap; runs nothing

Steps, in this order; each prints one JSON line when it ends, and a table closes the run:
  peak      bf16 (and TF32) matmul rate, 8192^3, median of 10 after 3 warm-ups, and the data sheet's: MFU's peaks
  wheels    installs the wheels in .whl/ (packages the machine lacks) into /tmp/site
  tests     python -m pytest -m gpu (a skip fails it, except a kernel this GPU's compute capability lacks)
  corpus    writes a corpus (below) and prepares it with configs/gpu.toml's tokenizer settings
  train     configs/gpu.toml (GPT-2 small shape), compiled, 30 steps: tokens/s, MFU, step time, compile, memory
  eager     the same run with compile off
  compiled  train's logged losses against eager's: the same within COMPILED_RTOL
  resume    the eager run again, in the config's own precision (dtype "auto": bf16 on a bf16 GPU), stopped
            by SIGTERM after step 15 and resumed: its losses must agree with eager's (RESUME_RTOL)
  decode    bench/generate_speed.py at GPT-2 small's shape (124M), bf16: ours vs transformers' generate,
            batch 1 and 8, 128 new tokens
  torchrun  torchrun --standalone --nproc_per_node=2: an all-reduce in train.py's process group (two GPUs:
            NCCL; one GPU: both ranks share it over gloo, training/distributed.py), then train.py
            (configs/tiny.toml on the GPU) run straight, and stopped by SIGTERM after step 5 and resumed:
            the two must log the same loss at every step and end with the same weights (fp32 at block 16,
            where the one exact comparison holds: see step_torchrun)

Timing: train.py logs tokens/s over each 5-step interval and syncs only there. The first interval holds
the compile (and CUDA warm-up); the median of the others is the step time, and the first interval's
excess over it is reported as compile_s. MFU is 6N + 12·L·d·T FLOPs per token (GPT.flops_per_token)
times tokens/s over a peak, given against two, each named: the bf16 matmul rate the peak step measured (what
this GPU reaches) and the device's data-sheet figure (training/hardware.py's table, by the device's name: the
convention of nanoGPT's and PaLM's MFU; none for a GPU the table lacks). Peak memory is
torch.cuda.max_memory_allocated of the run.

Budget: a step starts only if at least its `need` seconds are left, and gets as timeout what is left
after keeping the `need` of each later step that could still start (never less than its own need, never
more than its `cap`); past it, its process group is killed and it is reported as "timeout". The caps add
up to 290 s of the 300 s budget (the rest is the check's own start and end), so with the default budget a step
is only ever stopped by its own cap, never squeezed by an earlier one. The caps are estimates for one H200 with
a cold compile cache, not yet measured (the heaviest: train's compile and the seven 1.3 GB checkpoints that the
gpu.toml runs write); gpu_check.json's seconds say how each step went. Nothing runs past the budget; the table
ends with the headline figures (MFU, tokens/s, compile, decode) and names every step that did not finish.
gpu_check.json is rewritten after every step, so a run cut off from outside still leaves the steps it finished.

The corpus: the built-in corpus (when konlpy is installed) in each of 8 documents, followed by words
drawn with Zipf frequencies from a made-up lexicon of 40,000 Hangul words, so BPE fills gpu.toml's
32,000 tokens (the built-in corpus alone has merges for about 6,500) and the model has its real shape.
"""

import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PY = sys.executable
SITE = "/tmp/site"  # where the carried wheels are installed
BUDGET_S = 300.0  # the whole check, 5 minutes on one GPU
TRAIN_STEPS, LOG_EVERY, STOP_AT = 30, 5, 15  # the gpu.toml runs; resume's SIGTERM after STOP_AT (a logged step)
DECODE_NEW = 128  # new tokens per decode: at batch 1 the time per token hardly grows, so more adds only seconds
RANKS = 2  # torchrun's processes: DDP's code paths need two; on one GPU they share it (training/distributed.py)
# compiled against eager, both bf16: inductor fuses the elementwise work (layer norms, GELU, residual adds) and
# keeps it in fp32 where eager rounds each op's output to bf16 (8 significant bits: a rounding moves a value by up
# to 2^-8, 0.4%), and it picks other matmul kernels; 30 steps carry those roundings into the weights. 1% leaves
# room for that drift and still catches a compiled graph that computes something else: a wrong mask or a lost
# residual moves the loss by far more once the run has learned for a few steps (est.: no GPU run has set it yet).
COMPILED_RTOL = 1e-2
# resumed against straight, both eager bf16 at the real shape: the same kernels on the same numbers, except that
# fused attention's backward adds dQ over the key blocks in no fixed order (atomics), so the gradients differ in
# their last fp32 bits and the runs drift apart slowly. 0.1% is far above that drift and below what a lost
# optimizer, loader or learning-rate state does to the loss at gpu.toml's lr (est., as above).
RESUME_RTOL = 1e-3


class StepFailed(Exception):
    """The step ran and went wrong; the message says how."""


class StepTimeout(Exception):
    """The step ran past its timeout and was stopped."""


@dataclass
class Context:
    """What the steps share: a scratch folder, the log, the children's environment, results so far."""

    work: Path
    log_path: Path
    env: dict
    peak: float = 0.0  # measured bf16 FLOP/s
    datasheet: float = 0.0  # the device's data-sheet peak (training/hardware.py's table; 0: not in it)
    device: str = ""  # the GPU's name
    corpus: Path | None = None
    cache: Path | None = None
    losses: dict = field(default_factory=dict)  # step name -> [(step, loss)] its run logged, for the comparisons

    def add_path(self, path: str) -> None:
        """Put `path` first on the import path of this process and of every later child."""
        sys.path.insert(0, path)
        self.env["PYTHONPATH"] = os.pathsep.join([path, self.env.get("PYTHONPATH", "")]).rstrip(os.pathsep)


@dataclass
class Step:
    name: str
    need: float  # seconds: not started with less left
    cap: float  # seconds: the most it may take
    run: Callable[[Context, float], dict]  # (context, timeout) -> figures; raises StepFailed / StepTimeout
    requires: tuple[str, ...] = field(default=())  # steps that must have ended "ok" first


def plan_timeout(left: float, need: float, later_needs: list[float], cap: float) -> float | None:
    """Seconds a step may take with `left` seconds of budget, keeping the needs of the later steps that
    could still start after it (in order, as long as they fit); None when not even its own need is left."""
    if left < need:
        return None
    spare, reserved = left - need, 0.0
    for later in later_needs:
        if later <= spare:
            spare, reserved = spare - later, reserved + later
    return min(cap, left - reserved)


def run_steps(steps: list[Step], budget: float, ctx: Context, emit=print, clock=time.monotonic) -> list[dict]:
    """Run the steps in order within `budget` seconds; one record per step, passed to `emit` as it ends.
    A step whose `requires` did not end "ok" is skipped, as is one that has less than its need left."""
    start, records, status = clock(), [], {}
    for i, step in enumerate(steps):
        left = budget - (clock() - start)
        missing = [name for name in step.requires if status.get(name) != "ok"]
        # a later step whose requirement already failed will not run: keep nothing for it
        later = [s.need for s in steps[i + 1 :] if all(status.get(r, "ok") == "ok" for r in s.requires)]
        timeout = plan_timeout(left, step.need, later, step.cap)
        record = {"step": step.name}
        if missing:
            record |= {"status": "skipped", "why": f"needs {', '.join(missing)}"}
        elif timeout is None:
            record |= {"status": "skipped", "why": f"{max(left, 0):.0f} s left, needs {step.need:.0f} s"}
        else:
            began = clock()
            try:
                record |= {"status": "ok", **step.run(ctx, timeout)}
            except StepTimeout:
                record |= {"status": "timeout", "why": f"stopped after its {timeout:.0f} s"}
            except StepFailed as e:
                record |= {"status": "failed", "why": str(e)}
            except Exception as e:  # a bug in a step must not cost the steps after it
                record |= {"status": "failed", "why": f"{type(e).__name__}: {e}"}
            record["seconds"] = round(clock() - began, 1)
        status[step.name] = record["status"]
        records.append(record)
        emit(record)
    return records


def run_command(cmd, timeout: float, ctx: Context, env: dict | None = None) -> tuple[int, str]:
    """Run cmd from the repository root, its output appended to the log; (exit code, output).
    Past `timeout` seconds its whole process group is killed and StepTimeout raised."""
    if timeout <= 0:
        raise StepTimeout()
    cmd = [str(c) for c in cmd]
    with open(ctx.log_path, "ab") as log:
        log.write(f"\n$ {shlex.join(cmd)}   (timeout {timeout:.0f} s)\n".encode())
        log.flush()
        offset = log.tell()
        # a session of its own, so a timeout kills torchrun's workers and compile workers along with it
        proc = subprocess.Popen(cmd, cwd=ROOT, env={**ctx.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            log.write(f"\n[killed after {timeout:.0f} s]\n".encode())
            raise StepTimeout() from None
        except BaseException:  # Ctrl-C of this script: take the children down too
            kill_group(proc)
            raise
    with open(ctx.log_path, "rb") as log:
        log.seek(offset)
        return rc, log.read().decode("utf-8", errors="replace")


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group that `proc` leads (it has not been reaped, so the id is still its own)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def result_of(output: str) -> dict:
    """The JSON of the last `RESULT {...}` line a worker printed."""
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise StepFailed(f"no RESULT line; last output: {last_line(output)}")
    return json.loads(lines[-1][len("RESULT ") :])


def last_line(output: str) -> str:
    """The last non-empty line, the one that usually says what went wrong."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def check_rc(what: str, rc: int, output: str) -> None:
    if rc != 0:
        raise StepFailed(f"{what} exited {rc}: {last_line(output)}")


# --- the steps ---------------------------------------------------------------------------------------


def step_wheels(ctx: Context, timeout: float) -> dict:
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    if not wheels:
        return {"installed": 0, "figures": "no .whl/ folder: nothing to install"}
    cmd = [PY, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir",
           "--upgrade", "--target", SITE, *wheels]  # fmt: skip
    check_rc("pip install", *run_command(cmd, timeout, ctx))
    ctx.add_path(SITE)
    return {"installed": len(wheels), "figures": f"{len(wheels)} wheels into {SITE}"}


def step_peak(ctx: Context, timeout: float) -> dict:
    rc, out = run_command([PY, Path(__file__), "peak"], timeout, ctx)
    check_rc("the matmul timing", rc, out)
    result = result_of(out)
    ctx.peak, ctx.datasheet, ctx.device = result["bf16_tflops"] * 1e12, result["datasheet_tflops"] * 1e12, result["device"]
    sheet = f"data sheet {result['datasheet_tflops']:.0f}" if ctx.datasheet else "not in the data-sheet table"
    figures = (f"bf16 {result['bf16_tflops']:.0f} TFLOP/s measured ({sheet}), tf32 {result['tf32_tflops']:.0f}; "
               f"{result['device']}")
    return {**result, "figures": figures}


def judge_pytest(rc: int, out: str) -> dict:
    """The counts of a `pytest -rs` run; StepFailed unless it passed. A skip fails it too (a module that saw no
    GPU skips every test), except one for a kernel that this GPU's compute capability lacks (flash on a T4)."""
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", out)}
    figures = ", ".join(f"{n} {word}" for word, n in counts.items() if word != "deselected")
    failed = [line[len("FAILED ") :][:200] for line in out.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED ")]
    failed += [line[:200] for line in skips if "compute capability" not in line]
    if rc != 0 or failed or not counts.get("passed"):
        raise StepFailed(f"pytest exited {rc}: {figures or last_line(out)}" + "".join(f"; {f}" for f in failed))
    if skips:  # the ones this GPU cannot run, said in the table
        figures += " (" + "; ".join(line.split(": ", 1)[-1][:100] for line in skips) + ")"
    return {"counts": counts, "figures": figures}


def step_tests(ctx: Context, timeout: float) -> dict:
    # a module that fails to import (a missing package) costs its own tests, not every gpu test
    cmd = [PY, "-m", "pytest", "-q", "-rs", "-m", "gpu", "-p", "no:cacheprovider", "--continue-on-collection-errors",
           "tests"]  # fmt: skip
    return judge_pytest(*run_command(cmd, timeout, ctx))


def make_corpus(directory: Path, docs: int = 8, words: int = 600_000, seed: int = 0) -> int:
    """Write the corpus of the module docstring as `docs` .txt files; returns the characters written."""
    rng = random.Random(seed)
    common = [chr(0xAC00 + i) for i in range(2350)]  # the first 2,350 Hangul syllables
    lexicon = ["".join(rng.choices(common, k=rng.randint(2, 4))) for _ in range(40_000)]
    drawn = rng.choices(lexicon, weights=[1 / (rank + 10) for rank in range(len(lexicon))], k=words)
    lines = [" ".join(drawn[i : i + 12]) for i in range(0, words, 12)]
    try:
        from data.sources import builtin_files

        builtin = "".join(f.read_text(encoding="utf-8") for f in builtin_files())
    except Exception:  # no konlpy: the made-up words alone
        builtin = ""
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for d in range(docs):
        text = builtin + "\n" + "\n".join(lines[d::docs]) + "\n"
        (directory / f"doc{d}.txt").write_text(text, encoding="utf-8")
        written += len(text)
    return written


def step_corpus(ctx: Context, timeout: float) -> dict:
    ctx.corpus, ctx.cache = ctx.work / "corpus", ctx.work / "cache"
    chars = make_corpus(ctx.corpus)
    cmd = [PY, "-m", "data.prepare", "--config", "configs/gpu.toml", f"--data.source={ctx.corpus}",
           f"--data.cache_dir={ctx.cache}"]  # fmt: skip
    check_rc("data.prepare", *run_command(cmd, timeout, ctx))
    meta = json.loads(next(ctx.cache.glob("*/meta.json")).read_text())
    tokens, vocab = meta["splits"]["train"]["tokens"], meta["vocab_size"]
    figures = f"{chars / 1e6:.1f}M characters, vocab {vocab}, {tokens / 1e6:.2f}M train tokens"
    return {"chars": chars, "vocab_size": vocab, "train_tokens": tokens, "figures": figures}


def train_args(ctx: Context, steps: int, log_every: int) -> list[str]:
    """train.py options for a short timed run of configs/gpu.toml on the corpus: one evaluation at the end.
    gpu.toml's 500-step warm-up would keep the learning rate under 4e-5 in all 30 steps and every run's loss
    near ln(32,000), where the comparisons of the losses would say little: here its lr comes after 10 steps.
    English (--lang=en), since the steps read train.py's lines by their words."""
    args = ["--config", "configs/gpu.toml", f"--data.source={ctx.corpus}", f"--data.cache_dir={ctx.cache}",
            "--train.device=cuda", f"--train.max_steps={steps}", f"--train.log_interval={log_every}",
            "--train.warmup_steps=10", f"--train.eval_interval={steps}", "--train.eval_iters=2",
            "--train.sample_tokens=0", "--lang=en"]  # fmt: skip
    return args + ([f"--train.peak_flops={ctx.peak:.6e}"] if ctx.peak else [])


def read_records(run: Path) -> list[dict]:
    path = run / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def logged_losses(records: list[dict]) -> list[tuple[int, float]]:
    """(step, train loss) of every interval a run logged."""
    return [(r["step"], r["loss"]) for r in records if "loss" in r and "kind" not in r]


def loss_gap(losses: list[tuple[int, float]], reference: list[tuple[int, float]]) -> float:
    """The largest |loss - reference| / |reference| over the logged steps (NaN when a loss is NaN, so it passes
    no `<=`); StepFailed when the two runs did not log the same steps."""
    if [s for s, _ in losses] != [s for s, _ in reference] or not losses:
        raise StepFailed(f"logged steps {[s for s, _ in losses]}, against {[s for s, _ in reference]}")
    gaps = [abs(a - b) / abs(b) for (_, a), (_, b) in zip(losses, reference)]
    return float("nan") if any(g != g for g in gaps) else max(gaps)


def run_summary(output: str) -> dict:
    """Device, precision and compile from the line train.py prints when it starts."""
    found = re.search(r"parameters on (\S+), (\w+), compile (\w+)", output)
    if not found:
        raise StepFailed(f"train.py printed no summary line; last output: {last_line(output)}")
    return dict(zip(("device", "precision", "compile"), found.groups()))


def mfu_figures(flops_per_token: float, tokens_per_s: float, measured: float, datasheet: float) -> dict:
    """MFU against both peaks, each None where its peak is unknown: "mfu" of the measured bf16 matmul rate (what this
    GPU reaches), "mfu_datasheet" of the device's data-sheet figure (the convention of nanoGPT and PaLM's papers)."""
    return {"mfu": round(flops_per_token * tokens_per_s / measured, 4) if measured else None,
            "mfu_datasheet": round(flops_per_token * tokens_per_s / datasheet, 4) if datasheet else None}


def train_figures(records: list[dict], tokens_per_step: int, flops_per_token: float, measured: float,
                  datasheet: float) -> dict:  # fmt: skip
    """Speed from metrics.jsonl's interval records: the median step time of the intervals after the
    first, and the first interval's seconds beyond that (compile and warm-up); MFU against both peaks."""
    intervals = [r for r in records if "tokens_per_s" in r and "kind" not in r]
    if len(intervals) < 2:
        raise StepFailed(f"{len(intervals)} logged intervals; need 2 or more to separate compile from steps")
    step_s = [tokens_per_step / r["tokens_per_s"] for r in intervals]  # seconds per step, each interval
    steady = statistics.median(step_s[1:])
    tok_s = tokens_per_step / steady
    out = {"tokens_per_s": round(tok_s), "step_ms": round(steady * 1e3, 1),
           "compile_s": round(intervals[0]["step"] * (step_s[0] - steady), 1),
           "loss_first": intervals[0]["loss"], "loss_last": intervals[-1]["loss"],
           **mfu_figures(flops_per_token, tok_s, measured, datasheet)}  # fmt: skip
    final = next((r for r in records if r.get("kind") == "final"), None)
    if final:
        out["val_bpc"] = round(final["val_bpc"], 4)
    return out


def train_step(name: str, *overrides: str) -> Callable[[Context, float], dict]:
    """A step that runs train.py's main (through the train-worker) with configs/gpu.toml and `overrides`."""

    def run(ctx: Context, timeout: float) -> dict:
        out_dir = ctx.work / "runs" / name
        args = [*train_args(ctx, TRAIN_STEPS, LOG_EVERY), *overrides, "--out", out_dir]
        rc, out = run_command([PY, Path(__file__), "train-worker", *args], timeout, ctx)
        check_rc("train.py", rc, out)
        if "torch.compile failed" in out:  # train.py went on eager: nothing compiled was timed or compared
            raise StepFailed(next(line for line in out.splitlines() if "torch.compile failed" in line)[:300])
        worker, records, summary = result_of(out), read_records(out_dir), run_summary(out)
        shutil.rmtree(out_dir, ignore_errors=True)  # two 1.3 GB checkpoints: the disk is small
        ctx.losses[name] = logged_losses(records)
        figures = train_figures(records, worker["tokens_per_step"], worker["flops_per_token"], ctx.peak, ctx.datasheet)
        result = {**figures, **worker, **summary, "overrides": list(overrides), "records": records}
        first = "compile" if summary["compile"] == "on" else "warm-up"
        f, memory = figures, worker["peak_allocated_gib"]
        result["figures"] = (f"{f['tokens_per_s'] / 1e3:.0f}k tok/s, MFU {mfu_text(f)}, step {f['step_ms']:.0f} ms, "
                             f"{first} {max(0.0, f['compile_s']):.0f} s, {summary['precision']}, {memory:.1f} GiB, "
                             f"loss {f['loss_first']:.2f}->{f['loss_last']:.2f}")  # fmt: skip
        return result

    return run


def step_compiled(ctx: Context, timeout: float) -> dict:
    """The compiled run's logged losses against the eager run's: within COMPILED_RTOL."""
    compiled, eager = ctx.losses["train"], ctx.losses["eager"]
    gap = loss_gap(compiled, eager)
    if not gap <= COMPILED_RTOL:
        raise StepFailed(f"compiled losses {compiled} differ from eager's {eager} by up to {gap:.2%} "
                         f"(more than {COMPILED_RTOL:.0%})")  # fmt: skip
    return {"loss_gap": gap, "figures": f"compiled = eager within {gap:.2%} ({len(compiled)} logged losses)"}


def step_resume(ctx: Context, timeout: float) -> dict:
    deadline = time.monotonic() + timeout  # one timeout for the two launches together
    out_dir = ctx.work / "runs" / "resume"
    args = [*train_args(ctx, TRAIN_STEPS, LOG_EVERY), "--train.compile=off", "--out", out_dir]
    worker = [PY, Path(__file__), "train-worker"]
    rc, out = run_command([*worker, "--sigterm-after", STOP_AT, *args], deadline - time.monotonic(), ctx)
    if f"stopped at step {STOP_AT}" not in out:
        raise StepFailed(f"the run sent SIGTERM after step {STOP_AT} did not stop there (exit {rc}): {last_line(out)}")
    precision = run_summary(out)["precision"]
    check_rc("train.py --resume", *run_command([*worker, *args, "--resume"], deadline - time.monotonic(), ctx))
    resumed, straight = logged_losses(read_records(out_dir)), ctx.losses["eager"]  # eager: the straight run
    shutil.rmtree(out_dir, ignore_errors=True)
    gap = loss_gap(resumed, straight)
    if not gap <= RESUME_RTOL:
        raise StepFailed(f"{precision}: resumed losses {resumed} differ from the straight run's {straight} by up to "
                         f"{gap:.3%} (more than {RESUME_RTOL:.1%})")  # fmt: skip
    figures = f"{precision}, eager: stopped at {STOP_AT} + resumed = straight within {gap:.3%} ({len(resumed)} losses)"
    return {"precision": precision, "loss_gap": gap, "losses": resumed, "figures": figures}


def step_decode(ctx: Context, timeout: float) -> dict:
    cmd = [PY, "bench/generate_speed.py", "--device", "cuda", "--dtype", "bf16", "--shapes", "gpt2", "--vocab", "50257",
           "--batch", "1,8", "--new", DECODE_NEW, "--modes", "ours,hf", "--repeat", "2", "--json"]  # fmt: skip
    rc, out = run_command(cmd, timeout, ctx)
    check_rc("generate_speed.py", rc, out)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    rates = {(r["batch"], r["mode"]): r["tok_s"] for r in rows}
    result, parts = {"rows": rows}, []
    for batch in (1, 8):
        ours, hf = rates.get((batch, "ours")), rates.get((batch, "hf"))
        if ours:
            result[f"tok_s_b{batch}"] = round(ours)
        if ours and hf:
            result[f"ours_over_hf_b{batch}"] = round(ours / hf, 2)
            parts.append(f"B={batch} ours {ours:.0f} vs hf {hf:.0f} tok/s ({ours / hf:.2f}x)")
        elif ours:
            parts.append(f"B={batch} ours {ours:.0f} tok/s (no transformers)")
    if "tok_s_b1" not in result:
        raise StepFailed(f"generate_speed.py timed no decoding of ours; last output: {last_line(out)}")
    result["figures"] = "; ".join(parts)
    return result


def step_torchrun(ctx: Context, timeout: float) -> dict:
    deadline = time.monotonic() + timeout  # one timeout for the four launches together
    left = lambda: deadline - time.monotonic()  # noqa: E731
    torchrun = [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={RANKS}"]
    rc, out = run_command([*torchrun, Path(__file__), "allreduce-probe"], left(), ctx)
    check_rc("the all-reduce probe", rc, out)
    probe = result_of(out)
    if not probe["ok"] or probe["world"] != RANKS:
        raise StepFailed(f"the all-reduce over {probe['world']} ranks gave {probe['value']}, not {probe['expected']}")

    # Bit-exactness is checked only here, in fp32 at tiny's block 16: attention there has one key block, so the
    # fused backward adds in one fixed order, and the all-reduce of two ranks adds two numbers (a + b = b + a). At
    # real shapes the fused backward on CUDA sums dQ over many key blocks in no fixed order, so two runs differ in
    # the last bits: the resume step compares such a run (bf16, gpu.toml's shape) within RESUME_RTOL instead.
    runs = {name: ctx.work / "runs" / f"torchrun-{name}" for name in ("straight", "resumed")}
    base = ["train.py", "--config", "configs/tiny.toml", f"--data.cache_dir={ctx.work / 'tiny-cache'}",
            "--train.device=cuda", "--train.max_steps=12", "--train.log_interval=1", "--train.eval_interval=6",
            "--train.sample_tokens=0", "--lang=en"]  # fmt: skip
    straight_cmd, resumed_cmd = ([*torchrun, *base, "--out", runs[name]] for name in ("straight", "resumed"))
    rc, out = run_command(straight_cmd, left(), ctx)
    check_rc("torchrun train.py", rc, out)
    summary = run_summary(out)
    signalled = [*torchrun, Path(__file__), "train-worker", "--sigterm-after", "5", *base[1:], "--out", runs["resumed"]]
    rc, out = run_command(signalled, left(), ctx)
    if "stopped at step 5" not in out:
        raise StepFailed(f"the run sent SIGTERM after step 5 did not stop there (exit {rc}): {last_line(out)}")
    check_rc("torchrun train.py --resume", *run_command([*resumed_cmd, "--resume"], left(), ctx))

    straight, resumed = (logged_losses(read_records(runs[name])) for name in ("straight", "resumed"))
    weights = [(run / "last" / "model.safetensors").read_bytes() for run in runs.values()]
    if straight != resumed or len(straight) != 12:
        raise StepFailed(f"resumed losses {resumed} differ from the straight run's {straight}")
    if weights[0] != weights[1]:
        raise StepFailed("the resumed run logged the same losses but ended with other weights")
    figures = (f"{RANKS} ranks on {', '.join(probe['devices'])}, {probe['backend']}: all-reduce ok; "
               f"{summary['precision']}: stopped at 5 + resumed = straight (12 losses, same weights)")  # fmt: skip
    return {"probe": probe, "losses": straight, "figures": figures}


STEPS = [
    Step("peak", need=8, cap=12, run=step_peak),
    Step("wheels", need=2, cap=10, run=step_wheels),
    Step("tests", need=30, cap=45, run=step_tests),
    Step("corpus", need=10, cap=20, run=step_corpus),
    Step("train", need=45, cap=72, run=train_step("train"), requires=("corpus",)),
    Step("eager", need=15, cap=25, run=train_step("eager", "--train.compile=off"), requires=("corpus",)),
    Step("compiled", need=0, cap=1, run=step_compiled, requires=("train", "eager")),
    Step("resume", need=25, cap=35, run=step_resume, requires=("corpus", "eager")),
    Step("decode", need=15, cap=25, run=step_decode),
    Step("torchrun", need=35, cap=45, run=step_torchrun),
]


# --- workers: run in child processes ------------------------------------------------------------------


def worker_peak(argv: list[str]) -> int:
    """Print RESULT with the bf16 and TF32 matmul rates (median of CUDA-event timings), the device and its
    data-sheet peak."""
    import torch
    from training.hardware import table_peak

    def rate(dtype, n=8192, warmup=3, repeat=10) -> float:
        a, b = (torch.randn(n, n, device="cuda", dtype=dtype) for _ in range(2))  # random, never zeros
        c = torch.empty_like(a)
        for _ in range(warmup):
            torch.matmul(a, b, out=c)
        seconds = []
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        if not torch.isfinite(c).all():
            raise SystemExit("the matmul result is not finite")
        return 2 * n**3 / statistics.median(seconds)

    torch.backends.cuda.matmul.allow_tf32 = True
    props = torch.cuda.get_device_properties(0)
    result = {"bf16_tflops": round(rate(torch.bfloat16) / 1e12, 1), "tf32_tflops": round(rate(torch.float32) / 1e12, 1),
              "datasheet_tflops": round(table_peak(props.name) / 1e12, 1), "device": props.name, "capability": f"{props.major}.{props.minor}", "sms": props.multi_processor_count,
              "memory_gib": round(props.total_memory / 2**30, 1), "torch": torch.__version__,
              "cuda": torch.version.cuda}  # fmt: skip
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def worker_train(argv: list[str]) -> int:
    """train.main(argv), then RESULT with the peak GPU memory and the run's FLOPs per token. With
    `--sigterm-after N` first, the run sends itself SIGTERM after step N (in place of train.after_step)."""
    import os
    import signal

    import torch
    import train
    from model import GPT, GPTConfig

    if argv[:1] == ["--sigterm-after"]:
        at, argv = int(argv[1]), argv[2:]

        def after_step(step: int) -> None:
            if step == at:
                os.kill(os.getpid(), signal.SIGTERM)

        train.after_step = after_step
    rc = train.main(argv)
    if rc != 0:
        return rc  # train.py's own error line is the last one printed
    config = json.loads((Path(argv[argv.index("--out") + 1]) / "config.json").read_text())
    with torch.device("meta"):  # the shape alone: no memory, no initialisation
        model = GPT(GPTConfig(**config["model"]))
    block, t, cuda = config["model"]["block_size"], config["train"], torch.cuda.is_available()
    result = {"rc": rc, "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else 0.0,
              "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 2) if cuda else 0.0,
              "flops_per_token": model.flops_per_token(block), "params": model.num_params(),
              "tokens_per_step": t["batch_size"] * t["grad_accum"] * block}  # fmt: skip
    print("RESULT " + json.dumps(result), flush=True)
    return rc


def worker_probe(argv: list[str]) -> int:
    """Under torchrun: an all-reduce in the process group that train.py makes (training/distributed.py: NCCL with
    a GPU per rank, gloo where ranks share one); RESULT on rank 0 says whether every rank got the sum."""
    import torch
    import torch.distributed as dist
    from training.distributed import Distributed

    with Distributed("cuda") as ddp:
        t = torch.full((1 << 20,), float(ddp.rank + 1), device=ddp.device)
        dist.all_reduce(t)
        expected = ddp.world * (ddp.world + 1) / 2
        each = ddp.gather((bool((t == expected).all()), str(ddp.device)))
        result = {"ok": all(ok for ok, _ in each), "value": t[0].item(), "expected": expected, "world": ddp.world,
                  "devices": sorted({device for _, device in each}), "backend": dist.get_backend(),
                  "nccl": str(torch.cuda.nccl.version())}  # fmt: skip
    if ddp.master:
        print("RESULT " + json.dumps(result), flush=True)
    return 0


WORKERS = {"peak": worker_peak, "train-worker": worker_train, "allreduce-probe": worker_probe}


# --- the check ---------------------------------------------------------------------------------------


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    with warnings.catch_warnings():  # a CUDA build without a driver warns here: the error line says it all
        warnings.simplefilter("ignore")
        return torch.cuda.is_available()


def headline(records: list[dict]) -> str:
    """The figures a reader looks for first, from the train and decode steps ("-" where they did not finish)."""
    train = next((r for r in records if r["step"] == "train" and r["status"] == "ok"), {})
    decode = next((r for r in records if r["step"] == "decode" and r["status"] == "ok"), {})

    def figure(record, key, form):
        return form.format(record[key]) if key in record else "-"

    return (f"MFU {mfu_text(train)}, {figure(train, 'tokens_per_s', '{:,}')} tokens/s, "
            f"compile {figure(train, 'compile_s', '{:.0f}')} s, decode {figure(decode, 'tok_s_b1', '{:,}')} tokens/s "
            f"at batch 1 ({figure(decode, 'tok_s_b8', '{:,}')} at 8)")  # fmt: skip


def percent(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def mfu_text(figures: dict) -> str:
    """"41.2% of the measured peak, 33.8% of the data sheet's": both MFUs of a record, each named."""
    return f"{percent(figures.get('mfu'))} of the measured peak, {percent(figures.get('mfu_datasheet'))} of the data sheet's"


def table(records: list[dict]) -> str:
    lines = [f"{'step':9} {'status':8} {'seconds':>7}  figures", "-" * 100]
    for r in records:
        seconds = f"{r['seconds']:7.1f}" if "seconds" in r else " " * 7
        lines.append(f"{r['step']:9} {r['status']:8} {seconds}  {r.get('figures') or r.get('why', '')}")
    lines.append(headline(records))
    unfinished = [f"{r['step']} ({r['status']}: {r.get('why', '')})" for r in records if r["status"] != "ok"]
    lines.append("skipped or unfinished: " + ("; ".join(unfinished) if unfinished else "none"))
    return "\n".join(lines)


def plan(steps: list[Step], budget: float) -> str:
    """The --dry-run listing: each step with its need and cap, and their totals against the budget."""
    lines = [f"{'step':9} {'need s':>6} {'cap s':>6}  after"]
    lines += [f"{s.name:9} {s.need:6.0f} {s.cap:6.0f}  {', '.join(s.requires)}" for s in steps]
    needs, caps = sum(s.need for s in steps), sum(s.cap for s in steps)
    lines.append(f"{'total':9} {needs:6.0f} {caps:6.0f}  of a {budget:.0f} s budget")
    if needs > budget:
        lines.append("the needs exceed the budget: the last steps will not start")
    elif caps > budget:
        lines.append("the caps exceed the budget: a step that runs to its cap shortens or skips a later one")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in WORKERS:
        return WORKERS[argv[0]](argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds for all steps (default {BUDGET_S:.0f})")
    p.add_argument("--only", default="", help="comma list of steps to run: " + ",".join(s.name for s in STEPS))
    p.add_argument("--dry-run", action="store_true", help="list the steps with their need and cap; run nothing")
    args = p.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    unknown = only - {s.name for s in STEPS}
    if unknown:
        names = ", ".join(s.name for s in STEPS)
        print(f"error: unknown step {sorted(unknown)[0]} in --only; the steps are {names}", file=sys.stderr)
        return 2
    for step in reversed(STEPS):  # --only resume brings eager, and eager its corpus
        if step.name in only:
            only |= set(step.requires)
    steps = [s for s in STEPS if not only or s.name in only]
    if args.dry_run:
        print(plan(steps, args.budget))
        return 0
    if not cuda_available():
        print("error: no CUDA device here (torch.cuda.is_available() is False); run the GPU check on a machine with "
              "an NVIDIA GPU and a CUDA build of torch", file=sys.stderr)  # fmt: skip
        return 2

    out_dir = Path(os.environ.get("OUT") or ROOT / "bench" / "out")
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kogpt-gpu-check-"))
    log_path = out_dir / "gpu_check.log"
    log_path.write_text("")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    ctx = Context(work=work, log_path=log_path, env=env)
    unselected = [s.name for s in STEPS if s not in steps]

    began, done = time.monotonic(), []

    def emit(record: dict) -> None:
        line = json.dumps({k: v for k, v in record.items() if k not in ("records", "rows")}, ensure_ascii=False)
        print(line, flush=True)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"\n{line}\n")
        done.append(record)
        report = {"budget_s": args.budget, "total_s": round(time.monotonic() - began, 1), "steps": done}
        tmp = out_dir / "gpu_check.json.tmp"
        tmp.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, out_dir / "gpu_check.json")

    try:
        records = run_steps(steps, args.budget, ctx, emit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = table(records) + (f"\nnot selected (--only): {', '.join(unselected)}" if unselected else "")
    summary += f"\ntotal {time.monotonic() - began:.0f} s of a {args.budget:.0f} s budget"
    print("\n" + summary, flush=True)
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("\n" + summary + "\n")
    return 0 if all(r["status"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
