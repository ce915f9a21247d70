"""The GPU check: every CUDA path run for real and timed, one step after another, inside 8 minutes on one GPU.

    bash bench/gpu_check.sh                              # the whole check; results in $OUT, else bench/out/
    bash bench/gpu_check.sh --nanogpt ~/nanoGPT          # nanoGPT's model.py beside ours (a clone of it, not ours)
    python bench/gpu_check.py --only peak,tests          # some steps (and the ones they need)
    python bench/gpu_check.py --budget 400               # seconds for all steps together (default 470)
    python bench/gpu_check.py --dry-run                  # the plan: each step, what it checks, its need and cap

Steps, in this order (the most telling first: a budget cut short loses the last); each prints one JSON line
when it ends, gpu_check.json (one record, rewritten after every step) holds them all, and a table closes the run:
  peak      bf16 (and TF32) matmul rate, 8192^3, median of 10 after 3 warm-ups, and the data sheet's: MFU's peaks
  wheels    installs the wheels in .whl/ (packages the machine lacks) into /tmp/site
  corpus    writes a corpus (below) and prepares it with configs/gpu.toml's tokenizer settings
  train     configs/gpu.toml (GPT-2 small shape), compiled from a cold cache, 30 steps: tokens/s, MFU against
            both peaks, step time, compile time, peak memory
  eager     the same run with compile off; its peak memory against model/memory.py's estimate (a lower bound)
  compiled  train's logged losses against eager's: the same within COMPILED_RTOL
  resume    the compiled run again, in the config's own precision (dtype "auto": bf16 on a bf16 GPU), stopped
            by SIGTERM after step 15 and resumed (a warm compile each): its losses agree with train's (RESUME_RTOL)
  cache     generate.py on the resumed run at gpu.toml's shape, as a user runs it (TF32 on): greedy text with the
            KV cache and with --no-cache the same, and every step's logits of the two paths side by side
  nanogpt   nanoGPT's model.py (--nanogpt PATH) and ours at gpu.toml's shape and precision, compiled, timed in
            one process on the same random batches: tokens/s, MFU and first step of each
  decode    bench/generate_speed.py at GPT-2 small's shape (124M), bf16: ours vs transformers' generate,
            batch 1 and 8, 128 new tokens
  tests     python -m pytest -m gpu, but the inspection doors (a skip fails it, except a kernel this GPU's
            compute capability lacks)
  inspect   python -m pytest -m gpu on every inspection door: each generate.py option, the notebook views, a
            live request and both lesson notebooks, executed in a kernel, on the GPU
  torchrun  torchrun --standalone --nproc_per_node=2: an all-reduce in train.py's process group (two GPUs:
            NCCL; one GPU: both ranks share it over gloo, training/distributed.py), then train.py
            (configs/tiny.toml on the GPU) run straight, and stopped by SIGTERM after step 5 and resumed:
            the two must log the same loss at every step and end with the same weights (fp32 at block 16,
            where the one exact comparison holds: see step_torchrun)
  ddp       compile(DDP) under torchrun with NCCL in the GPU's precision: configs/tiny.toml on 2 ranks, a GPU
            each, compiled, 12 steps; a machine with one GPU says so and skips it (NCCL takes one GPU per rank)

Timing: train.py logs tokens/s over each 5-step interval and syncs only there. The first interval holds
the compile (and CUDA warm-up); the median of the others is the step time, and the first interval's
excess over it is reported as compile_s. MFU is 6N + 12·L·d·T FLOPs per token (GPT.flops_per_token)
times tokens/s over a peak, given against two, each named: the bf16 matmul rate the peak step measured (what
this GPU reaches) and the device's data-sheet figure (training/hardware.py's table, by the device's name: the
convention of nanoGPT's and PaLM's MFU; none for a GPU the table lacks). Peak memory is
torch.cuda.max_memory_allocated of the run. Every step's children share one inductor and Triton cache made
empty for this check, so train's compile is a cold one, as on a new machine, and the later compiles of the same
graph (resume's, nanogpt's of ours) are warm: each record says which.

Budget: a step starts only if at least its `need` seconds are left, and gets as timeout what is left
after keeping the `need` of each later step that could still start (never less than its own need, never
more than its `cap`); past it, its process group is killed and it is reported as "timeout". The caps add
up to 470 s (8 minutes less the check's own start and end), so with the default budget a step is only ever
stopped by its own cap, never squeezed by an earlier one. No GPU has run this check yet: the caps are reasoned
for one H200 with a cold compile cache (docs/gpu.md shows the sums; the heaviest is train's cold compile of
GPT-2 small, 40-90 s by the reading of 2026-12-04), and gpu_check.json's seconds say how each step went, which
is what the caps should be set from. Nothing runs past the budget; the table ends with the headline figures
(MFU against both peaks, tokens/s, compile, ours against nanoGPT, decode) and names every step that did not
finish, and those this machine cannot run ("unsupported": they do not fail the check).

The corpus: the built-in corpus (when konlpy is installed) in each of 8 documents, followed by words
drawn with Zipf frequencies from a made-up lexicon of 40,000 Hangul words, so BPE fills gpu.toml's
32,000 tokens (the built-in corpus alone has merges for about 6,500) and the model has its real shape.
"""

import argparse
import json
import math
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
BUDGET_S = 470.0  # the whole check: 8 minutes on one GPU, less the check's own start and end
TRAIN_STEPS, LOG_EVERY, STOP_AT = 30, 5, 15  # the gpu.toml runs; resume's SIGTERM after STOP_AT (a logged step)
DECODE_NEW = 128  # new tokens per decode: at batch 1 the time per token hardly grows, so more adds only seconds
CACHE_NEW = 300  # new tokens of the cached-against-uncached decoding: prompt and all stay inside gpu.toml's 1,024
NANOGPT_STEPS = 10  # timed steps of each model in the nanogpt step, after its first (the compile) and 2 more
RANKS = 2  # torchrun's processes: DDP's code paths need two; on one GPU they share it (training/distributed.py)
# compiled against eager, both bf16: inductor fuses the elementwise work (layer norms, GELU, residual adds) and
# keeps it in fp32 where eager rounds each op's output to bf16 (8 significant bits: a rounding moves a value by up
# to 2^-8, 0.4%), and it picks other matmul kernels; 30 steps carry those roundings into the weights. 1% leaves
# room for that drift and still catches a compiled graph that computes something else: a wrong mask or a lost
# residual moves the loss by far more once the run has learned for a few steps (est.: no GPU run has set it yet).
COMPILED_RTOL = 1e-2
# resumed against straight, both compiled bf16 at the real shape: the same kernels (one cache) on the same numbers,
# except that fused attention's backward adds dQ over the key blocks in no fixed order (atomics), so the gradients
# differ in their last fp32 bits and the runs drift apart slowly. 0.1% is far above that drift and below what a
# lost optimizer, loader or learning-rate state does to the loss at gpu.toml's lr (est., as above).
RESUME_RTOL = 1e-3


class StepFailed(Exception):
    """The step ran and went wrong; the message says how."""


class StepTimeout(Exception):
    """The step ran past its timeout and was stopped."""


class StepUnsupported(Exception):
    """The step cannot run on this machine (too few GPUs, no nanoGPT checkout given); the message says why."""


@dataclass
class Context:
    """What the steps share: a scratch folder, the log, the children's environment, results so far."""

    work: Path
    log_path: Path
    env: dict
    peak: float = 0.0  # measured bf16 FLOP/s
    datasheet: float = 0.0  # the device's data-sheet peak (training/hardware.py's table; 0: not in it)
    device: str = ""  # the GPU's name
    gpus: int = 0  # how many this process sees (0: the peak step did not run)
    nanogpt: Path | None = None  # a nanoGPT checkout (--nanogpt)
    trained: Path | None = None  # resume's run, kept for the cache step
    compiled: bool = False  # whether a step has compiled gpu.toml's model yet (the cache is warm after it)
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
    what: str = ""  # what it checks, for the plan


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
            except StepUnsupported as e:
                record |= {"status": "unsupported", "why": str(e)}
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
    ctx.peak, ctx.datasheet = result["bf16_tflops"] * 1e12, result["datasheet_tflops"] * 1e12
    ctx.device, ctx.gpus = result["device"], result["gpus"]
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


INSPECTION = "inspection or notebook"  # the names of tests/test_gpu.py's inspection doors, for pytest's -k


def gpu_tests(selection: str) -> Callable[[Context, float], dict]:
    """A step that runs pytest -m gpu on the tests that `selection` (pytest's -k) picks."""

    def run(ctx: Context, timeout: float) -> dict:
        # a module that fails to import (a missing package) costs its own tests, not every gpu test; one process
        # (no addopts: pyproject's -n 2), as the GPU is one and the machine may lack pytest-xdist
        cmd = [PY, "-m", "pytest", "-q", "-rs", "-m", "gpu", "-k", selection, "-p", "no:cacheprovider", "-o", "addopts=",
               "--continue-on-collection-errors", "tests"]  # fmt: skip
        return judge_pytest(*run_command(cmd, timeout, ctx))

    return run


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
    Without the heads' costs (144 ablations at the evaluation: seconds no step here measures). English
    (--lang=en), since the steps read train.py's lines by their words."""
    args = ["--config", "configs/gpu.toml", f"--data.source={ctx.corpus}", f"--data.cache_dir={ctx.cache}",
            "--train.device=cuda", f"--train.max_steps={steps}", f"--train.log_interval={log_every}",
            "--train.warmup_steps=10", f"--train.eval_interval={steps}", "--train.eval_iters=2",
            "--train.sample_tokens=0", "--train.head_costs=false", "--lang=en"]  # fmt: skip
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
        compiled = summary["compile"] == "on"
        first = ("compile, warm cache" if ctx.compiled else "cold compile") if compiled else "warm-up"
        result["compile_cache"] = ("warm" if ctx.compiled else "cold") if compiled else None
        ctx.compiled = ctx.compiled or compiled
        f, memory, estimate = figures, worker["peak_allocated_gib"], worker["estimate_gib"]
        if not compiled and estimate > memory:  # eager keeps what the estimate counts; a compiled graph may keep less
            raise StepFailed(f"model/memory.py's estimate of a step, {estimate:.2f} GiB, is above the {memory:.2f} GiB "
                             "the run allocated: check_memory would refuse runs that fit")  # fmt: skip
        result["figures"] = (f"{f['tokens_per_s'] / 1e3:.0f}k tok/s, MFU {mfu_text(f)}, step {f['step_ms']:.0f} ms, "
                             f"{first} {max(0.0, f['compile_s']):.0f} s, {summary['precision']}, {memory:.1f} GiB "
                             f"(estimate {estimate:.1f}), "
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
    args = [*train_args(ctx, TRAIN_STEPS, LOG_EVERY), "--out", out_dir]  # compiled, as train
    worker = [PY, Path(__file__), "train-worker"]
    rc, out = run_command([*worker, "--sigterm-after", STOP_AT, *args], deadline - time.monotonic(), ctx)
    if f"stopped at step {STOP_AT}" not in out:
        raise StepFailed(f"the run sent SIGTERM after step {STOP_AT} did not stop there (exit {rc}): {last_line(out)}")
    summary = run_summary(out)
    check_rc("train.py --resume", *run_command([*worker, *args, "--resume"], deadline - time.monotonic(), ctx))
    resumed, straight = logged_losses(read_records(out_dir)), ctx.losses["train"]  # train: the straight run
    ctx.trained = out_dir  # the cache step decodes with it (one run of 1.3 GB checkpoints kept)
    gap = loss_gap(resumed, straight)
    if not gap <= RESUME_RTOL:
        raise StepFailed(f"{summary['precision']}: resumed losses {resumed} differ from the straight run's "
                         f"{straight} by up to {gap:.3%} (more than {RESUME_RTOL:.1%})")  # fmt: skip
    figures = (f"{summary['precision']}, compile {summary['compile']}: stopped at {STOP_AT} + resumed = straight "
               f"within {gap:.3%} ({len(resumed)} losses)")  # fmt: skip
    return {"precision": summary["precision"], "compile": summary["compile"], "loss_gap": gap, "losses": resumed,
            "figures": figures}


def step_cache(ctx: Context, timeout: float) -> dict:
    rc, out = run_command([PY, Path(__file__), "cache-worker", ctx.trained], timeout, ctx)
    check_rc("the decoding", rc, out)
    r = result_of(out)
    if not r["tf32"]:
        raise StepFailed("TF32 was off: this is not the decoding generate.py runs on this GPU")
    if not r["same_text"] or r["first_diff"] is not None and not r["near_tie"]:
        at = r["first_diff"]
        raise StepFailed(f"cached and uncached decoding part at new token {at} (logits apart by up to "
                         f"{r['max_diff']:.3g} before it, the top two {r['gap_at_diff']} apart there): "
                         f"{r['cached'][:80]!r} against {r['uncached'][:80]!r}")  # fmt: skip
    same = "the same text" + ("" if r["first_diff"] is None else f" (token {r['first_diff']} a near-tie)")
    figures = (f"{r['new']} greedy tokens at {r['shape']}, TF32 on: {same}; logits apart by {r['max_diff']:.2g} "
               f"at most (their spread {r['spread']:.2g})")  # fmt: skip
    return {**{k: v for k, v in r.items() if k not in ("cached", "uncached")}, "figures": figures}


def step_nanogpt(ctx: Context, timeout: float) -> dict:
    if ctx.nanogpt is None:
        raise StepUnsupported("no nanoGPT checkout: pass --nanogpt PATH (a clone of github.com/karpathy/nanoGPT)")
    cmd = [PY, Path(__file__), "nanogpt-worker", ctx.nanogpt, "configs/gpu.toml", ctx.peak, ctx.datasheet]
    rc, out = run_command(cmd, timeout, ctx)
    check_rc("the nanoGPT timing", rc, out)
    r = result_of(out)
    ours, theirs = r["ours"], r["nanogpt"]
    r["ours_over_nanogpt"] = round(ours["tokens_per_s"] / theirs["tokens_per_s"], 3)
    r["figures"] = (f"{r['shape']}, {r['precision']}, compiled: ours {ours['tokens_per_s'] / 1e3:.0f}k tok/s "
                    f"(MFU {mfu_text(ours)}), nanoGPT {theirs['tokens_per_s'] / 1e3:.0f}k: "
                    f"{r['ours_over_nanogpt']:.2f}x; "
                    f"first step {ours['first_s']:.0f} s ({'warm cache' if ctx.compiled else 'cold'}) and "
                    f"{theirs['first_s']:.0f} s (cold)")  # fmt: skip
    return r


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


def step_ddp(ctx: Context, timeout: float) -> dict:
    if ctx.gpus < RANKS:
        raise StepUnsupported(f"{ctx.gpus} GPU{'s' if ctx.gpus != 1 else ''} here: NCCL takes one GPU per rank, "
                              f"compile(DDP) over NCCL needs {RANKS}")  # fmt: skip
    deadline = time.monotonic() + timeout
    left = lambda: deadline - time.monotonic()  # noqa: E731
    torchrun = [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={RANKS}"]
    rc, out = run_command([*torchrun, Path(__file__), "allreduce-probe"], left(), ctx)
    check_rc("the all-reduce probe", rc, out)
    probe = result_of(out)
    if probe["backend"] != "nccl":
        raise StepFailed(f"{RANKS} ranks on {', '.join(probe['devices'])} took {probe['backend']}, not NCCL")
    run = ctx.work / "runs" / "ddp"
    cmd = [*torchrun, "train.py", "--config", "configs/tiny.toml", f"--data.cache_dir={ctx.work / 'tiny-cache'}",
           "--train.device=cuda", "--train.compile=on", "--train.dtype=auto", "--train.max_steps=12",
           "--train.log_interval=1", "--train.eval_interval=12", "--train.sample_tokens=0", "--lang=en", "--out", run]
    rc, out = run_command(cmd, left(), ctx)
    check_rc("torchrun train.py, compiled", rc, out)
    if "torch.compile failed" in out:
        raise StepFailed(next(line for line in out.splitlines() if "torch.compile failed" in line)[:300])
    summary, losses = run_summary(out), [loss for _, loss in logged_losses(read_records(run))]
    if summary["compile"] != "on" or len(losses) != 12 or not all(math.isfinite(v) for v in losses) \
            or not losses[-1] < losses[0]:
        raise StepFailed(f"compile {summary['compile']}, {summary['precision']}: losses {losses}")
    figures = (f"{RANKS} ranks on {', '.join(probe['devices'])}, NCCL {probe['nccl']}: compile(DDP), "
               f"{summary['precision']}, loss {losses[0]:.2f}->{losses[-1]:.2f} in 12 steps")  # fmt: skip
    return {"probe": probe, "precision": summary["precision"], "losses": losses, "figures": figures}


STEPS = [
    Step("peak", need=8, cap=12, run=step_peak, what="bf16 and TF32 matmul rates; the data sheet's peak"),
    Step("wheels", need=1, cap=8, run=step_wheels, what="the packages in .whl/, if any"),
    Step("corpus", need=10, cap=15, run=step_corpus, what="a 32,000-token corpus for gpu.toml"),
    Step("train", need=80, cap=110, run=train_step("train"), requires=("corpus",),
         what="gpu.toml compiled from a cold cache: tokens/s, MFU (both peaks), compile, memory"),
    Step("eager", need=18, cap=25, run=train_step("eager", "--train.compile=off"), requires=("corpus",),
         what="the same eager; its memory against model/memory.py's estimate"),
    Step("compiled", need=0, cap=1, run=step_compiled, requires=("train", "eager"),
         what="compiled losses = eager's within 1%"),
    Step("resume", need=28, cap=40, run=step_resume, requires=("corpus", "train"),
         what="compiled bf16 stopped and resumed = straight within 0.1%"),
    Step("cache", need=15, cap=25, run=step_cache, requires=("resume",),
         what="generate.py cached = uncached at gpu.toml's shape, TF32 on"),
    Step("nanogpt", need=40, cap=60, run=step_nanogpt,
         what="nanoGPT's model.py beside ours: same shape, precision, GPU"),
    Step("decode", need=12, cap=20, run=step_decode, what="decoding tokens/s, ours against transformers"),
    Step("tests", need=20, cap=30, run=gpu_tests(f"not ({INSPECTION})"), what="pytest -m gpu"),
    Step("inspect", need=40, cap=60, run=gpu_tests(INSPECTION),
         what="every inspection view, the notebook views, a live request, both notebooks"),
    Step("torchrun", need=25, cap=35, run=step_torchrun, what="2 ranks: straight = stopped and resumed, bit for bit"),
    Step("ddp", need=20, cap=29, run=step_ddp, what="compile(DDP), NCCL, bf16 on 2 ranks (2 GPUs, else unsupported)"),
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
              "datasheet_tflops": round(table_peak(props.name) / 1e12, 1), "device": props.name,
              "gpus": torch.cuda.device_count(), "capability": f"{props.major}.{props.minor}",
              "sms": props.multi_processor_count,
              "memory_gib": round(props.total_memory / 2**30, 1), "torch": torch.__version__,
              "cuda": torch.version.cuda}  # fmt: skip
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def worker_train(argv: list[str]) -> int:
    """train.main(argv), then RESULT with the peak GPU memory of its steps (before the final scoring, whose batches
    fill half the free memory), model/memory.py's estimate of a step and the run's FLOPs per token. With
    `--sigterm-after N` first, the run sends itself SIGTERM after step N (in place of train.after_step)."""
    import os
    import signal

    import torch
    import train
    from model import GPT, GPTConfig
    from model.memory import training_bytes

    cuda, steps_peak = torch.cuda.is_available(), []
    finish = train.finish

    def finish_after_the_peak(*args):
        steps_peak.append(torch.cuda.max_memory_allocated() if cuda else 0)
        return finish(*args)

    train.finish = finish_after_the_peak

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
    block, t = config["model"]["block_size"], config["train"]
    estimate = training_bytes(GPTConfig(**config["model"]), t["batch_size"], fused_attention=t["speed_up"] and cuda)
    result = {"rc": rc, "peak_allocated_gib": round(steps_peak[0] / 2**30, 2) if steps_peak else 0.0,
              "peak_with_scoring_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else 0.0,
              "estimate_gib": round(estimate / 2**30, 2), "flops_per_token": model.flops_per_token(block),
              "params": model.num_params(), "tokens_per_step": t["batch_size"] * t["grad_accum"] * block}  # fmt: skip
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


def worker_cache(argv: list[str]) -> int:
    """generate.py greedy on the run in argv[0], with the KV cache and with --no-cache, as a user runs it on this
    GPU (TF32 on: model/device.py); then the two paths' logits at every new token (model.sampling's decoding, the
    one generate.py runs). RESULT: the texts, whether they match, where the tokens part (a near-tie there, where
    the top two logits are closer than the paths' largest difference so far, is rounding, not a bug)."""
    import contextlib
    import io

    import torch

    import generate
    from inference import load_run
    from model.sampling import stream_with_logits

    run_dir, prompt = argv[0], "대한민국 국회는 법률을 제정한다"
    texts = []
    for flags in ([], ["--no-cache"]):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            rc = generate.main(["--ckpt", run_dir, "--prompt", prompt, "--temperature", "0", "--max-new-tokens",
                                str(CACHE_NEW), "--device", "cuda", "--lang", "en", *flags])  # fmt: skip
        if rc != 0:
            return rc
        texts.append(printed.getvalue())
    run = load_run(run_dir, device="cuda")
    idx = torch.tensor([run.encode_prompt(prompt)], device=run.device)
    paths = [list(stream_with_logits(run.model, idx, CACHE_NEW, temperature=0, use_cache=cache))
             for cache in (True, False)]  # fmt: skip
    tokens = [torch.stack([t for t, _ in path])[:, 0] for path in paths]  # (new,)
    logits = [torch.stack([l for _, l in path])[:, 0].double() for path in paths]  # (new, V)
    parted = (tokens[0] != tokens[1]).nonzero()
    first = int(parted[0]) if len(parted) else None
    upto = CACHE_NEW if first is None else first + 1
    diff = (logits[0][:upto] - logits[1][:upto]).abs().amax().item()
    gap = None
    if first is not None:
        top2 = logits[1][first].topk(2).values
        gap = (top2[0] - top2[1]).item()
    c = run.model.config
    result = {"same_text": texts[0] == texts[1], "first_diff": first, "max_diff": diff, "gap_at_diff": gap,
              "near_tie": gap is not None and gap <= 2 * diff, "spread": logits[1].std().item(), "new": CACHE_NEW,
              "tf32": torch.backends.cuda.matmul.allow_tf32, "cached": texts[0], "uncached": texts[1],
              "shape": f"{c.n_layer}x{c.n_embd}, {c.n_head} heads, block {c.block_size}, vocab {c.vocab_size}"}
    print("RESULT " + json.dumps(result, ensure_ascii=False), flush=True)
    return 0


def worker_nanogpt(argv: list[str]) -> int:
    """nanoGPT's model.py (argv[0]: its checkout) and ours at the shape of a config (argv[1]: configs/gpu.toml), in
    the GPU's precision (training/hardware.py: bf16, or fp16 without it), each compiled as its train.py compiles
    it and timed on the same random batches: fused AdamW, NANOGPT_STEPS steps after its first (the compile) and
    2 more, synced. argv[2:]: the measured and the data-sheet peak, for MFU (one shape: the same FLOPs a token)."""
    import gc
    import importlib.util

    import torch

    from model import GPT, GPTConfig
    from model.speed import speed_up
    from training.config import load_config
    from training.hardware import PRECISIONS, default_precision

    spec = importlib.util.spec_from_file_location("nanogpt_model", Path(argv[0]) / "model.py")
    theirs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(theirs)
    measured, datasheet = float(argv[2]), float(argv[3])
    cfg = load_config(ROOT / argv[1], [])
    m, B = cfg.model, cfg.train.batch_size
    shape = dict(block_size=m.block_size, vocab_size=cfg.data.vocab_size, n_layer=m.n_layer, n_head=m.n_head,
                 n_embd=m.n_embd, dropout=m.dropout, bias=m.bias)  # fmt: skip
    device = torch.device("cuda")
    precision = default_precision(device)
    autocast = torch.autocast("cuda", dtype=PRECISIONS[precision])
    generator = torch.Generator(device="cuda").manual_seed(0)
    batches = [torch.randint(shape["vocab_size"], (B, m.block_size + 1), device=device, generator=generator)
               for _ in range(3 + NANOGPT_STEPS)]  # fmt: skip
    with torch.device("meta"):  # the shape alone
        flops = GPT(GPTConfig(**shape)).flops_per_token(m.block_size)

    def timed(model, loss_of) -> dict:
        model = model.to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        step_model = torch.compile(model)  # the model, not the step: as both train.py files do
        torch.cuda.reset_peak_memory_stats()
        seconds = []
        for batch in batches:
            torch.cuda.synchronize()
            started = time.perf_counter()
            with autocast:
                loss = loss_of(step_model, batch[:, :-1], batch[:, 1:])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
        step_s = statistics.median(seconds[3:])
        tok_s = B * m.block_size / step_s
        out = {"first_s": round(seconds[0], 1), "step_ms": round(step_s * 1e3, 2), "tokens_per_s": round(tok_s),
               "loss": round(loss.item(), 4), "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
               **mfu_figures(flops, tok_s, measured, datasheet)}  # fmt: skip
        del model, optimizer, step_model
        gc.collect()
        torch.cuda.empty_cache()
        return out

    torch.manual_seed(0)
    ours = timed(speed_up(GPT(GPTConfig(**shape)).to(device)), lambda model, x, y: model(x, y, loss_only=True)[1])
    torch.manual_seed(0)
    nanogpt = timed(theirs.GPT(theirs.GPTConfig(**shape)), lambda model, x, y: model(x, y)[1])
    result = {"ours": ours, "nanogpt": nanogpt, "precision": precision, "batch": B,
              "shape": f"{m.n_layer}x{m.n_embd}, block {m.block_size}, vocab {shape['vocab_size']}, batch {B}"}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


WORKERS = {"peak": worker_peak, "train-worker": worker_train, "allreduce-probe": worker_probe,
           "cache-worker": worker_cache, "nanogpt-worker": worker_nanogpt}


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
    """The figures a reader looks for first, from the train, nanogpt and decode steps ("-" where they did not
    finish)."""
    train, nanogpt, decode = (next((r for r in records if r["step"] == name and r["status"] == "ok"), {})
                              for name in ("train", "nanogpt", "decode"))  # fmt: skip

    def figure(record, key, form):
        return form.format(record[key]) if key in record else "-"

    return (f"MFU {mfu_text(train)}, {figure(train, 'tokens_per_s', '{:,}')} tokens/s, "
            f"compile {figure(train, 'compile_s', '{:.0f}')} s, ours {figure(nanogpt, 'ours_over_nanogpt', '{:.2f}')}x "
            f"nanoGPT's tokens/s, decode {figure(decode, 'tok_s_b1', '{:,}')} tokens/s at batch 1 "
            f"({figure(decode, 'tok_s_b8', '{:,}')} at 8)")  # fmt: skip


def percent(value) -> str:
    return "-" if value is None else f"{value:.1%}"


def mfu_text(figures: dict) -> str:
    """"41.2% of the measured peak, 33.8% of the data sheet's": both MFUs of a record, each named."""
    measured, datasheet = percent(figures.get("mfu")), percent(figures.get("mfu_datasheet"))
    return f"{measured} of the measured peak, {datasheet} of the data sheet's"


def table(records: list[dict]) -> str:
    lines = [f"{'step':9} {'status':11} {'seconds':>7}  figures", "-" * 100]
    for r in records:
        seconds = f"{r['seconds']:7.1f}" if "seconds" in r else " " * 7
        lines.append(f"{r['step']:9} {r['status']:11} {seconds}  {r.get('figures') or r.get('why', '')}")
    lines.append(headline(records))
    unfinished = [f"{r['step']} ({r['status']}: {r.get('why', '')})" for r in records
                  if r["status"] not in ("ok", "unsupported")]  # fmt: skip
    lines.append("skipped or unfinished: " + ("; ".join(unfinished) if unfinished else "none"))
    elsewhere = [f"{r['step']} ({r['why']})" for r in records if r["status"] == "unsupported"]
    if elsewhere:
        lines.append("not run on this machine: " + "; ".join(elsewhere))
    return "\n".join(lines)


def passed(records: list[dict]) -> bool:
    """Every step ended ok, or cannot run on this machine (too few GPUs, no nanoGPT checkout given)."""
    return all(r["status"] in ("ok", "unsupported") for r in records)


def plan(steps: list[Step], budget: float) -> str:
    """The --dry-run listing: each step with its need and cap, and their totals against the budget."""
    lines = [f"{'step':9} {'need s':>6} {'cap s':>6}  {'after':15} what it checks"]
    lines += [f"{s.name:9} {s.need:6.0f} {s.cap:6.0f}  {', '.join(s.requires) or '-':15} {s.what}" for s in steps]
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
    p.add_argument("--nanogpt", metavar="PATH", help="a clone of github.com/karpathy/nanoGPT: its model.py is timed "
                   "beside ours (without it the nanogpt step is not run)")
    args = p.parse_args(argv)
    if args.nanogpt is not None and not (Path(args.nanogpt) / "model.py").is_file():
        print(f"error: --nanogpt {args.nanogpt} holds no model.py; pass a clone of github.com/karpathy/nanoGPT",
              file=sys.stderr)  # fmt: skip
        return 2
    only = set(filter(None, args.only.split(",")))
    unknown = only - {s.name for s in STEPS}
    if unknown:
        names = ", ".join(s.name for s in STEPS)
        print(f"error: unknown step {sorted(unknown)[0]} in --only; the steps are {names}", file=sys.stderr)
        return 2
    for step in reversed(STEPS):  # --only cache brings resume, and resume its train and corpus
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
    # one compile cache for every step, empty at the start: train's compile is cold, as on a new machine
    env["TORCHINDUCTOR_CACHE_DIR"], env["TRITON_CACHE_DIR"] = str(work / "inductor"), str(work / "triton")
    ctx = Context(work=work, log_path=log_path, env=env, nanogpt=Path(args.nanogpt).resolve() if args.nanogpt else None)
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
    return 0 if passed(records) else 1


if __name__ == "__main__":
    sys.exit(main())
