"""Train a GPT on Korean text: config -> prepared data -> one training loop -> checkpoints.

    python train.py                                              # configs/small.toml -> runs/small
    python train.py --data.source=texts/ --train.time_budget=30m  # "auto" settings fit the corpus and the time
    python train.py --config configs/tiny.toml --train.max_steps=20 --out runs/t1
    python train.py --config configs/tiny.toml --out runs/t1 --resume     # continue exactly
    python train.py --config configs/tiny.toml --out runs/t1 --overwrite  # replace that run
    torchrun --standalone --nproc_per_node=2 train.py --config configs/tiny.toml

The run directory gets config.json, metrics.jsonl, loss.png, last/ (every evaluation) and best/ (lowest
validation loss). The run ends with the exact loss over the whole validation split and its bits per
character, for the best and the last weights. Exit codes: 0 done; 2 bad input (config, data, checkpoint);
3 the loss became NaN/inf (last/ keeps the last good weights); 130 Ctrl-C and 143 SIGTERM, after
finishing the step and saving last/ (the printed command resumes; a second Ctrl-C aborts without saving).
One trainer at a time per run directory (RUN/.lock), and a run directory that holds a run needs
--resume or --overwrite. Under torchrun only rank 0 locks, logs and saves; for several nodes the run
directory must be on a shared disk.
"""

import time

STARTED = time.perf_counter()  # before the imports below (torch takes seconds): a time budget counts them

import contextlib
import json
import math
import os
import random
import shlex
import signal
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from training.checkpoints import (check_same_model, clear_run, open_run_dir, recover, rng_state, save_checkpoint,
                                  saved_step, set_rng_state)
from data.config import DataError
from data.loader import BatchLoader, load_tokens
from data.prepare import prepare
from data.tokenizer import load_tokenizer
from model.errors import ArgumentParser, UserError, print_error
from training.evaluation import evaluate, sample_text
from training.hardware import default_compile, default_precision, peak_flops
from model import GPT
from model.device import resolve_device
from model.io import tokenizer_hash
from model.nll import bits_per_char, stream_nll, windows_read
from model.io import write_text_atomic
from model.pretrained import Pretrained, open_pretrained
from training.config import RunConfig, TrainConfig, load_config
from training.lock import RunLock
from training.recipe import apply_settings, parse_duration, plan_settings, time_training_step
from training.metrics import RunLog

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
AFTER_SCORING_S = 3.0  # a time budget keeps this for loss.png and the exit (2-3 s on a 2-core CPU)


class TrainingDiverged(Exception):
    """The loss became NaN or infinite; nothing bad was saved."""


def get_lr(step: int, tc: TrainConfig) -> float:
    """Learning rate of step `step` (0-based): linear warmup to tc.lr, then cosine decay to tc.min_lr."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    progress = min(1.0, (step - tc.warmup_steps) / max(1, tc.max_steps - tc.warmup_steps))
    return tc.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (tc.lr - tc.min_lr)


def check_finite(what: str, value: float, step: int, out_dir: Path) -> None:
    """Stop before a NaN/inf reaches a checkpoint: last/ keeps the last good weights."""
    if not math.isfinite(value):
        kept = f"{out_dir}/last keeps the last good weights" if (out_dir / "last").exists() else "nothing was saved"
        raise TrainingDiverged(
            f"{what} is {value} at step {step}, so training stopped ({kept}); "
            "lower train.lr or raise train.warmup_steps, then resume with --resume or start again"
        )


def on_master(work, master: bool, world: int):
    """Run `work()` on rank 0 only; a UserError there is raised on every rank, so none waits forever."""
    result, error = None, None
    if master:
        try:
            result = work()
        except UserError as e:
            error = e
    if world > 1:
        box = [None if error is None else str(error)]
        dist.broadcast_object_list(box, src=0)  # also a barrier: the other ranks wait for rank 0's work
        if box[0] is not None and not master:
            raise UserError(box[0])
    if error is not None:
        raise error
    return result


def prepare_data(cfg: RunConfig, master: bool, world: int):
    """Rank 0 prepares (or finds in the cache) the data; the other ranks then reuse it."""
    prepared = on_master(lambda: prepare(cfg.data, verbose=True), master, world)
    return prepared if master else prepare(cfg.data, verbose=False)


def catch_signals() -> tuple[dict, dict]:
    """SIGINT/SIGTERM set a flag the loop checks after each step; a second Ctrl-C aborts at once."""
    caught = {}

    def handle(signum, frame):
        if signum == signal.SIGINT and caught:
            raise KeyboardInterrupt
        caught.setdefault("signum", signum)
        print(f"\n{signal.Signals(signum).name}: finishing this step, then saving (Ctrl-C again aborts)", file=sys.stderr)

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    return caught, previous


def signal_for_tests(step: int) -> None:
    """Test hook: KOGPT_TEST_SIGNAL=<step>:<INT|TERM> makes the process signal itself after that step."""
    at, _, name = os.environ.get("KOGPT_TEST_SIGNAL", "").partition(":")
    if at == str(step):
        os.kill(os.getpid(), getattr(signal, f"SIG{name or 'INT'}"))


def train(cfg: RunConfig, out_dir, resume: bool = False, command: str | None = None, overwrite: bool = False,
          started: float | None = None) -> dict:
    """Run (or resume, or with `overwrite` replace) the run in out_dir. Returns the final record, or
    {"exit_code": 130/143, ...} when a signal stopped it (after saving last/). `started`: when the
    process began (the command line passes it), so a time budget counts its start-up too."""
    out_dir, tc, started = Path(out_dir), cfg.train, started or time.perf_counter()
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))
    device = resolve_device(tc.device, int(os.environ.get("LOCAL_RANK", 0)))
    if tc.threads:
        torch.set_num_threads(tc.threads)
    if world > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    caught, previous_handlers = catch_signals()
    lock = RunLock(out_dir)  # one trainer per run dir, taken by rank 0 for the whole run
    try:
        run, state = set_up(cfg, out_dir, resume, overwrite, device, rank, world, lock)
        state.t_start = started  # a time budget counts the data preparation and set-up too
        return run_training(run, state, caught, command)
    finally:
        lock.release()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        if world > 1:
            dist.destroy_process_group()


@dataclass
class Run:
    """What the loop works with, built once by `set_up`."""

    cfg: RunConfig  # cfg.model.vocab_size is the tokenizer's; a time budget's second plan sets cfg.train.max_steps
    out_dir: Path
    device: torch.device
    rank: int
    world: int
    data_dir: Path
    meta: dict
    raw: GPT  # the uncompiled model: evaluated and saved
    model: nn.Module  # what the step calls: raw, compiled and/or wrapped in DDP
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    loader: BatchLoader
    autocast: torch.autocast
    tokenizer: object
    log: RunLog | None  # rank 0 only
    tokens_per_step: int
    flops_per_token: float
    peak: float  # FLOP/s of one device, 0 when unknown

    @property
    def master(self) -> bool:
        return self.rank == 0


@dataclass
class State:
    """What changes as the run goes on; `save` puts the first six fields and budget_used in train_state.pt."""

    step: int = 0
    best_val: float = math.inf
    best_step: int = 0
    evals_since_best: int = 0
    loss_sum: torch.Tensor | None = None  # train loss summed on the device since the last log
    n_summed: int = 0
    tokens_since_log: int = 0
    train_time: float = 0.0  # seconds spent in training steps, evaluations left out
    trained_tokens: int = 0
    t_log: float = field(default_factory=time.perf_counter)
    t_start: float = field(default_factory=time.perf_counter)
    budget_used: float = 0.0  # seconds of the time budget spent by the processes before this one (resumes)
    t_plan: float = 0.0  # when this process's loop started, then when a time budget last planned max_steps
    plan_step: int = 0  # the step of that moment
    seconds_per_scored_token: float = 0.0  # forward time per token in the last evaluation
    seconds_per_eval: float = 0.0  # the whole of the last evaluation: both estimates, the save, the sample


def set_up(cfg: RunConfig, out_dir: Path, resume: bool, overwrite: bool, device, rank: int, world: int,
           lock: RunLock) -> tuple[Run, State]:
    """Lock and check the run dir, prepare the data, build (or restore) the model and optimizer, write config.json."""
    tc, master = cfg.train, rank == 0
    on_master(lambda: (lock.acquire(), recover(out_dir)), master, world)  # recover: finish or undo a crashed save
    saved = open_run_dir(out_dir, resume, overwrite)
    prepared = prepare_data(cfg, master, world)
    check_splits(prepared.meta, cfg.model.block_size)
    start = open_pretrained(tc.init_from) if tc.init_from and not saved else None  # a resume reads last/ instead
    if start:
        check_same_tokenizer(start, prepared.meta, cfg.data.tokenizer)
    elif not tc.init_from:  # from scratch the embedding has one row per token; a checkpoint's may have more
        cfg = replace(cfg, model=replace(cfg.model, vocab_size=prepared.meta["vocab_size"]))
    precision = default_precision(device) if tc.dtype == "auto" else tc.dtype
    use_compile = default_compile(device) if tc.compile == "auto" else tc.compile in (True, "on")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    autocast = torch.autocast(device.type, dtype=PRECISIONS[precision], enabled=precision != "fp32")
    cfg = resolve_auto(cfg, prepared.meta, saved, device, autocast, world, master)
    tc = cfg.train

    random.seed(tc.seed)
    np.random.seed(tc.seed)
    torch.manual_seed(tc.seed)
    raw = GPT(cfg.model)  # the same seed on every rank, so the same initial weights
    torch.manual_seed(tc.seed + rank)  # but different dropout masks
    if saved:
        check_same_model(out_dir / "last", asdict(cfg.model), prepared.meta)
        raw.load_state_dict(GPT.load(out_dir / "last").state_dict())
    elif start:
        load_start(raw, start)
    raw.to(device)
    params = list(raw.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": tc.weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=tc.lr, betas=(tc.beta1, tc.beta2), fused=device.type == "cuda",
    )  # fmt: skip
    model = torch.compile(raw) if use_compile else raw
    if world > 1:
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    run = Run(
        cfg, out_dir, device, rank, world, prepared.dir, prepared.meta, raw, model, optimizer,
        scaler=torch.amp.GradScaler(device.type, enabled=precision == "fp16"),
        loader=BatchLoader(prepared.dir / "train.bin", cfg.model.block_size, tc.batch_size, tc.seed, device, rank),
        autocast=autocast,
        tokenizer=load_tokenizer(prepared.tokenizer_path),
        log=None,
        tokens_per_step=tc.batch_size * cfg.model.block_size * tc.grad_accum * world,
        flops_per_token=raw.flops_per_token(cfg.model.block_size),
        peak=peak_flops(device, tc.peak_flops),
    )  # fmt: skip
    state = State(loss_sum=torch.zeros((), device=device))
    if saved:
        restore(run, state, saved)
    if master:
        if overwrite:
            clear_run(out_dir)  # only now that everything else checked out
        write_config(run, precision, use_compile, resumed=bool(saved), step=state.step)
        run.log = RunLog(out_dir, cfg.to_dict(), state.step if saved else None, cfg.log)
    return run, state


def resolve_auto(cfg: RunConfig, meta: dict, saved: dict | None, device, autocast, world: int, master: bool) -> RunConfig:
    """Fill in the "auto" settings (training.recipe): a resumed run keeps the values its start chose; a new
    one plans them on rank 0 (timing a throwaway model when the steps must fit a time budget), prints how,
    and every rank takes rank 0's values."""
    if not cfg.auto:
        return cfg
    if saved and "resolved" in saved:
        return apply_settings(cfg, saved["resolved"])
    train_tokens = meta["splits"]["train"]["tokens"]
    def timing(dropout: float) -> float:  # a throwaway model, so the run's weights and RNGs are untouched
        model = GPT(replace(cfg.model, dropout=dropout)).to(device)
        return time_training_step(model, cfg.train.batch_size, autocast, cfg.train.grad_clip)

    box = [plan_settings(cfg, train_tokens, world, timing) if master else None]
    if world > 1:
        dist.broadcast_object_list(box, src=0)
    values, why = box[0]
    if master:
        print(why)
    return apply_settings(cfg, values)


def check_splits(meta: dict, block_size: int) -> None:
    """Both splits must hold one window of block_size + 1 tokens: found now, not after steps were spent."""
    for part in ("train", "val"):
        tokens = meta["splits"][part]["tokens"]
        if tokens < block_size + 1:
            raise DataError(f"the {part} split holds {tokens} tokens, fewer than model.block_size + 1 = "
                            f"{block_size + 1}; lower model.block_size or give it more text (data.val_fraction, "
                            f"data.val_source)")


def check_same_tokenizer(start: Pretrained, meta: dict, tokenizer: str) -> None:
    """The data must be encoded with the tokenizer the starting weights were trained with."""
    if meta["tokenizer_hash"] != tokenizer_hash(start.tokenizer):
        raise UserError(
            f"data.tokenizer {tokenizer} is not the tokenizer of train.init_from {start.origin}; "
            "leave data.tokenizer empty to encode the data with the model's own"
        )


def load_start(raw: GPT, start: Pretrained) -> None:
    """Copy the starting weights (position table cropped to block_size) into a new model."""
    result = raw.load_state_dict(start.state_for(raw.config), strict=False)
    assert result.missing_keys == ["lm_head.weight"] and not result.unexpected_keys, result  # the tied head only
    print(f"starting from {start.origin} ({start.config.block_size} positions, {raw.config.block_size} kept)")


def restore(run: Run, state: State, saved: dict) -> None:
    """Put a resumed run back where its last/ checkpoint left it: counters, optimizer, RNGs, loader."""
    state.step, state.best_val, state.best_step = saved["step"], saved["best_val_loss"], saved["best_step"]
    state.evals_since_best, state.n_summed = saved["evals_since_best"], saved["n_summed"]
    state.budget_used = saved.get("budget_used_s", 0.0)
    state.loss_sum = saved["loss_sum"].to(run.device)
    run.optimizer.load_state_dict(saved["optimizer"])
    if saved["scaler"]:
        run.scaler.load_state_dict(saved["scaler"])
    if len(saved["ranks"]) == run.world:
        set_rng_state(saved["ranks"][run.rank]["rng"])
        run.loader.load_state_dict(saved["ranks"][run.rank]["loader"])
    elif run.master:
        print(f"warning: {len(saved['ranks'])} processes saved this run, {run.world} resume it: the batches will differ")


def write_config(run: Run, precision: str, use_compile: bool, resumed: bool, step: int) -> None:
    """RUN/config.json (atomically) and the resolved settings on stdout."""
    config = run.cfg.to_dict()
    write_text_atomic(run.out_dir / "config.json", json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    for section, values in config.items():
        if isinstance(values, dict):
            print(f"[{section}] " + " ".join(f"{k}={v!r}" for k, v in values.items()))
    print(f"{run.raw.num_params() / 1e6:.2f}M parameters on {run.device}, {precision}, compile {'on' if use_compile else 'off'}, "
          f"{run.world} process(es), {run.tokens_per_step} tokens/step" + (f"; resuming at step {step}" if resumed else ""))  # fmt: skip


def optimisation_step(run: Run, state: State, lr: float) -> None:
    """One optimizer step over grad_accum micro-batches; the loss stays on the device."""
    tc = run.cfg.train
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    for micro in range(tc.grad_accum):
        x, y = run.loader.next_batch()
        # DDP averages the gradients across ranks in the backward of the last micro-step only
        last_micro = run.world == 1 or micro == tc.grad_accum - 1
        with contextlib.nullcontext() if last_micro else run.model.no_sync():
            with run.autocast:
                loss = run.model(x, y)[1] / tc.grad_accum
            run.scaler.scale(loss).backward()
        state.loss_sum += loss.detach()
    if tc.grad_clip > 0:
        run.scaler.unscale_(run.optimizer)
        torch.nn.utils.clip_grad_norm_(run.raw.parameters(), tc.grad_clip)
    run.scaler.step(run.optimizer)
    run.scaler.update()
    run.optimizer.zero_grad(set_to_none=True)
    state.step, state.n_summed, state.tokens_since_log = state.step + 1, state.n_summed + 1, state.tokens_since_log + run.tokens_per_step


def log_progress(run: Run, state: State, lr: float, caught: dict, bar) -> int | None:
    """Log the mean train loss since the last log (the loop's one host-device sync); under DDP the ranks
    also agree here on whether a signal arrived. Returns that signal's number, or None."""
    mean_loss, stop = state.loss_sum / state.n_summed, caught.get("signum")
    if run.world > 1:
        signum = torch.tensor(stop or 0, device=run.device)
        dist.all_reduce(signum, op=dist.ReduceOp.MAX)
        dist.all_reduce(mean_loss)
        mean_loss, stop = mean_loss / run.world, signum.item() or None
    mean_loss = mean_loss.item()
    check_finite("the training loss", mean_loss, state.step, run.out_dir)
    elapsed = time.perf_counter() - state.t_log
    state.train_time, state.trained_tokens = state.train_time + elapsed, state.trained_tokens + state.tokens_since_log
    record = {"step": state.step, "loss": round(mean_loss, 6), "lr": lr, "tokens_per_s": round(state.tokens_since_log / elapsed, 1)}
    if run.peak:
        record["mfu"] = round(run.flops_per_token * record["tokens_per_s"] / run.world / run.peak, 4)
    if run.master:
        run.log.write(record)
        bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{record['tokens_per_s']:.0f}")
    state.loss_sum.zero_()
    state.n_summed, state.tokens_since_log, state.t_log = 0, 0, time.perf_counter()
    return stop


def evaluate_and_save(run: Run, state: State, bar) -> bool:
    """Estimate both losses, save last/ (and best/ on a new best), log a sample. True: stop early."""
    tc, t_eval = run.cfg.train, time.perf_counter()
    losses = evaluate(run.raw, run.data_dir, tc, run.device, run.autocast, run.rank, run.world)
    state.seconds_per_scored_token = (time.perf_counter() - t_eval) / losses["tokens"]
    check_finite("the validation loss", losses["val"], state.step, run.out_dir)
    improved = losses["val"] < state.best_val
    if improved:
        state.best_val, state.best_step = losses["val"], state.step
    state.evals_since_best = 0 if improved else state.evals_since_best + 1
    save(run, state, ["last", "best"] if improved else ["last"])
    if run.master:
        record = {"kind": "eval", "step": state.step, "train_loss": round(losses["train"], 6),
                  "val_loss": round(losses["val"], 6), "best_val_loss": round(state.best_val, 6)}  # fmt: skip
        if tc.sample_tokens:
            record["sample"] = sample_text(run.raw, run.tokenizer, run.meta["eot_id"], tc.sample_tokens, run.device)
        run.log.write(record)
        bar.write(f"step {state.step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
                  + (" (best)" if improved else "") + (f" | {record['sample'][:100]}" if tc.sample_tokens else ""))  # fmt: skip
    state.seconds_per_eval = time.perf_counter() - t_eval
    state.t_log += state.seconds_per_eval  # evaluation time is not training time
    early_stop = bool(tc.patience) and state.evals_since_best >= tc.patience
    if early_stop and run.master:
        bar.write(f"early stop: no better val loss in {tc.patience} evaluations")
    return early_stop


def save(run: Run, state: State, names: list[str]) -> None:
    """Every rank contributes its RNG and loader states; rank 0 writes the checkpoints."""
    check_finite("the training loss", (state.loss_sum / max(1, state.n_summed)).item(), state.step, run.out_dir)
    biggest = torch.stack([p.detach().abs().max().float() for p in run.raw.parameters()]).max().item()
    check_finite("a weight", biggest, state.step, run.out_dir)
    ranks = [{"rng": rng_state(), "loader": run.loader.state_dict()}]
    if run.world > 1:
        ranks = [None] * run.world
        dist.all_gather_object(ranks, {"rng": rng_state(), "loader": run.loader.state_dict()})
    train_state = {
        "step": state.step, "best_val_loss": state.best_val, "best_step": state.best_step,
        "evals_since_best": state.evals_since_best, "loss_sum": state.loss_sum.cpu(), "n_summed": state.n_summed,
        "optimizer": run.optimizer.state_dict(), "scaler": run.scaler.state_dict() if run.scaler.is_enabled() else {},
        "ranks": ranks, "world_size": run.world,
        "resolved": resolved_values(run.cfg),
        "budget_used_s": budget_used(state),
    }  # fmt: skip
    config = {**run.cfg.to_dict(), "step": state.step}
    for name in names if run.master else []:
        save_checkpoint(run.out_dir, name, run.raw, config, run.data_dir, train_state)


def resolved_values(cfg: RunConfig) -> dict:
    """What the "auto" settings came to ({"train.lr": 0.001, ...}), as a resume must take them back."""
    sections = asdict(cfg)
    return {name: sections[name.split(".")[0]][name.split(".")[1]] for name in cfg.auto}


def budget_used(state: State) -> float:
    """Seconds of the run's time budget spent so far, over all its processes: each from its start (data,
    set-up) through its steps, evaluations and saves."""
    return state.budget_used + time.perf_counter() - state.t_start


def replan(run: Run, state: State, bar) -> None:
    """Plan a time budget's max_steps again: the steps that fit in what is left, at the time per step
    measured since the last plan (evaluations and saves included), so a machine that slows down or speeds
    up moves the end of the schedule with it. Rank 0 decides, so every DDP rank stops at the same step."""
    tc, now = run.cfg.train, time.perf_counter()
    per_step = (now - state.t_plan) / max(1, state.step - state.plan_step)
    state.t_plan, state.plan_step = now, state.step
    # kept for the end: the evaluation and save at the last step (per_step spreads evaluations over
    # eval_interval steps, but the last one comes whole however few steps are left), the final scoring
    # of best/ and last/ (windows every T/2 read each validation token twice), the plot and the exit
    read = windows_read(run.meta["splits"]["val"]["tokens"], run.cfg.model.block_size) // run.world
    final_scoring = 2 * read * state.seconds_per_scored_token
    end = state.seconds_per_eval + final_scoring + AFTER_SCORING_S
    left = parse_duration(tc.time_budget) - budget_used(state) - end
    box = [state.step + max(0, int(left / per_step))]
    if run.world > 1:
        dist.broadcast_object_list(box, src=0)
    run.cfg = replace(run.cfg, train=replace(tc, max_steps=max(state.step, box[0])))
    bar.total = run.cfg.train.max_steps
    if run.master:
        write_text_atomic(run.out_dir / "config.json", json.dumps(run.cfg.to_dict(), indent=2, ensure_ascii=False) + "\n")
        if abs(run.cfg.train.max_steps - tc.max_steps) > 0.02 * tc.max_steps:  # say so when it moves much
            bar.write(f"plan: {run.cfg.train.max_steps:,} steps fit in train.time_budget = {tc.time_budget} "
                      f"({per_step:.3g} s a step lately, evaluations included)")


def run_training(run: Run, state: State, caught: dict, command: str | None) -> dict:
    """The loop: step, log, evaluate and save, until max_steps, early stop or a signal."""
    stop, state.t_plan, state.plan_step = None, time.perf_counter(), state.step
    replans = "train.max_steps" in run.cfg.auto
    with tqdm(total=run.cfg.train.max_steps, initial=state.step, disable=not run.master, dynamic_ncols=True) as bar:
        while state.step < run.cfg.train.max_steps and not stop:
            tc = run.cfg.train  # a time budget plans max_steps again at each evaluation
            lr = get_lr(state.step, tc)
            optimisation_step(run, state, lr)
            bar.update()
            signal_for_tests(state.step)
            stop = caught.get("signum") if run.world == 1 else None  # DDP ranks agree on it when they log
            last = state.step == tc.max_steps
            if state.step % tc.log_interval == 0 or last:
                stop = log_progress(run, state, lr, caught, bar)
            if state.step % tc.eval_interval == 0 or last:
                if evaluate_and_save(run, state, bar):
                    break
                if replans and not last:
                    replan(run, state, bar)
            elif stop:
                save(run, state, ["last"])
    if stop:
        if run.master:
            run.log.close(plot=False)
            print(f"stopped at step {state.step}; saved {run.out_dir}/last. Resume with:\n  "
                  f"{command or '(the same command) --resume'}", file=sys.stderr)
        return {"step": state.step, "exit_code": 128 + stop}
    return final_report(run, state)


def final_report(run: Run, state: State) -> dict:
    """The exact loss and bits per character of the whole validation split, for the weights in last/ (the
    model in memory) and in best/ (the step its own config.json names, whatever the run's counters say)."""
    if run.world > 1:
        dist.barrier()  # best/ is complete on disk before any rank reads it
    val_tokens, chars = load_tokens(run.data_dir / "val.bin", run.meta["dtype"]), run.meta["splits"]["val"]["chars"]
    nll, count = stream_nll(run.raw, val_tokens, rank=run.rank, world=run.world)
    best_dir, last_dir = run.out_dir / "best", run.out_dir / "last"
    best_step = saved_step(best_dir)
    if best_step is None:  # no best/ to score: last/ is the best there is
        best_dir, best_step = last_dir, state.step
    best_is_last = best_step == state.step  # last/ and best/ of the same step hold the same weights
    best_model = run.raw if best_is_last else GPT.load(best_dir, run.device)
    best_nll = nll if best_is_last else stream_nll(best_model, val_tokens, rank=run.rank, world=run.world)[0]
    final = {
        "kind": "final", "step": state.step, "val_loss": nll / count, "val_bpc": bits_per_char(nll, chars),
        "best_step": best_step, "best_val_loss": best_nll / count, "best_val_bpc": bits_per_char(best_nll, chars),
        "val_tokens_predicted": count, "val_chars": chars, "wall_s": round(time.perf_counter() - state.t_start, 1),
        "budget_used_s": round(budget_used(state), 1),  # what train.time_budget counts: data, steps, scoring
        "tokens_per_s": round(state.trained_tokens / state.train_time, 1) if state.train_time else None,
    }  # fmt: skip
    if run.peak and final["tokens_per_s"]:
        final["mfu"] = round(run.flops_per_token * final["tokens_per_s"] / run.world / run.peak, 4)
    if run.master:
        run.log.write(final)
        run.log.close()
        speed = f"; {final['tokens_per_s']:.0f} tokens/s" if final["tokens_per_s"] else ""
        print(f"whole validation split ({count} tokens, {chars} characters): best weights ({best_dir}, step {best_step}) "
              f"{final['best_val_bpc']:.4f} bits/char, last ({last_dir}, step {state.step}) {final['val_bpc']:.4f} bits/char"
              + speed + (f", MFU {final['mfu']:.1%}" if "mfu" in final else ""))  # fmt: skip
    return final


def resume_command(argv: list[str]) -> str:
    """The command line that continues this run."""
    world = int(os.environ.get("WORLD_SIZE", 1))
    script = os.path.relpath(__file__) if not os.path.relpath(__file__).startswith("..") else __file__
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"]
    return shlex.join(launcher + [script] + [a for a in argv if a not in ("--resume", "--overwrite")] + ["--resume"])


def main(argv: list[str] | None = None) -> int:
    started = STARTED if argv is None else None  # the process's start, unless called in-process (tests)
    argv = sys.argv[1:] if argv is None else argv
    parser = ArgumentParser(
        prog="python train.py", description=__doc__.split("\n")[0], epilog="Overrides: --section.key=value, e.g. --train.lr=3e-4", allow_abbrev=False
    )
    parser.add_argument("--config", default="configs/small.toml", help="TOML run config (default: configs/small.toml)")
    parser.add_argument("--out", help="run directory (default: runs/<config file stem>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last/ checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace the run in --out (its checkpoints and metrics)")
    try:
        args, overrides = parser.parse_known_args(argv)
        cfg = load_config(args.config, overrides)
        out_dir = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
        result = train(cfg, out_dir, args.resume, command=resume_command(argv), overwrite=args.overwrite, started=started)
    except UserError as e:
        print_error(e)
        return 2
    except TrainingDiverged as e:
        print_error(e)
        return 3
    except KeyboardInterrupt:
        print("error: aborted by a second Ctrl-C without saving; --resume continues from the last checkpoint", file=sys.stderr)
        return 130
    return result.get("exit_code", 0)


if __name__ == "__main__":
    sys.exit(main())
