"""Everything a training run does before its first step, and what its loop works on.

    run, progress = set_up(cfg, out_dir, resume, overwrite, ddp, lock, started)   # train.py, inside its locks
    cfg = resolve_config(cfg, meta, saved, start, device, autocast, ddp)            # the config, once and complete
    state = train_state(run, progress)            # what last/ and best/ keep; restore_progress reads it back

set_up checks the run directory and the data, makes the config once (vocab size, "auto" settings, run_id),
builds the model and its optimizer, and puts the loop where it starts: step 0, or exactly where last/ left
off. It writes nothing into the run directory until all of that has passed. `TrainingRun` is what it built,
`Progress` where the loop is; train.py's loop changes only those two.
"""

import math
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from cli.command import is_out_of_memory
from cli.errors import UserError
from cli.messages import messages
from common.heads_off import HeadsOff, read_heads
from data.lessons import CopyLessons
from data.loader import BatchLoader, draw_seed
from data.prepare import Prepared, check_splits, prepare
from data.tokenizer import load_tokenizer, ordinary_ids
from hf.pretrained import open_pretrained
from model import GPT
from model.nll import windows_read
from model.speed import speed_up
from storage.atomic import write_json
from storage.checkpoint import load_weights
from training.budget import TimeBudget
from training.checkpoints import drop_snapshots_after, recover, rng_state, set_rng_state
from training.config import RunConfig
from training.distributed import Distributed
from training.hardware import check_memory, compiles, fused_adamw, keep_freed_memory, step_settings
from training.metrics import RunLog
from training.recipe import resolve_auto, resolved_values
from training.run_dir import (check_run_dir, check_same_best, check_same_experiment, check_same_model, clear_run,
                              open_run_dir, run_identity)  # fmt: skip


@dataclass
class TrainingRun:
    """What the loop works on. `cfg` is complete; it changes only when a time budget plans max_steps again."""

    cfg: RunConfig
    out_dir: Path
    ddp: Distributed
    raw: GPT  # the uncompiled model: saved, evaluated, sampled
    model: torch.nn.Module  # what the step calls: raw, compiled and in DDP as the run asks
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    loader: BatchLoader
    prepared: Prepared
    tokenizer: object
    autocast: torch.autocast
    budget: TimeBudget
    log: RunLog | None  # rank 0's only
    tokens_per_step: int
    precision: str = "fp32"  # train.dtype resolved: a resume keeps it (train_state's "precision")
    compiling: bool = False  # the model is compiled and its first step has not run yet (first_compiled_step)
    kept_off: HeadsOff | None = None  # train.heads_off: the heads kept off, their means measured at each evaluation


@dataclass
class Progress:
    """Where the loop is, as last/'s train state keeps it (with every rank's RNG and loader states)."""

    loss_sum: torch.Tensor  # train loss summed on the device since the last log
    n_summed: int = 0
    step: int = 0
    best_val: float = math.inf  # the lowest train.best_by so far
    best_step: int = 0
    evals_since_best: int = 0
    heads: dict | None = None  # the last evaluation's head roles


def set_up(cfg: RunConfig, out_dir: Path, resume: bool, overwrite: bool, ddp: Distributed, lock,
           started: float) -> tuple[TrainingRun, Progress]:
    """The run in out_dir, from the checks of its directory to its log, and where its loop starts."""
    device = ddp.device
    if device.type == "cpu":
        keep_freed_memory()  # before the timed trial, so that it plans with the steps the run will take
    # the run directory (a run's or empty, checked before the lock touches it) and the data
    ddp.from_master(lambda: (check_run_dir(out_dir), lock.acquire(), recover(out_dir)))  # recover: a crashed save
    saved = open_run_dir(out_dir, resume, overwrite)  # last/'s train state when resuming
    if saved:  # before any data work: a resume that would make the run another experiment is refused
        check_same_experiment(out_dir / "last", cfg.to_dict())
    prepared = ddp.master_first(lambda: prepare(cfg.data, verbose=ddp.master))
    check_splits(prepared.meta, cfg.model.block_size)
    start = open_pretrained(cfg.train.init_from) if cfg.train.init_from and not saved else None  # a resume reads last/
    precision, autocast, warning = step_settings(device, cfg.train, saved.get("precision") if saved else None)
    if warning and ddp.master:  # bf16 on a GPU that only emulates it
        say = messages()
        print(say("warning", text=say(warning, device=device, name=torch.cuda.get_device_name(device))))
    cfg = resolve_config(cfg, prepared.meta, saved, start, device, autocast, ddp)
    tc, use_compile = cfg.train, bool(compiles(device, cfg.train.compile))

    # the model and the optimizer
    raw = initial_model(cfg, ddp.rank, saved, start, out_dir, prepared.meta)
    raw.to(device)
    kept_off = None  # train.heads_off: kept off from the first step to the last, and in every command that opens the run
    if tc.heads_off:
        kept_off = HeadsOff(raw, read_heads(tc.heads_off, "train.heads_off", raw.config, layers=True), tc.heads_off_mode)
    raw.train()  # a loaded model comes in eval mode; the speed layer puts the training variants on a training model
    if tc.speed_up:
        speed_up(raw)  # faster variants of some parts, the same numbers but dropout's masks (model/speed/)
    optimizer = make_optimizer(raw, tc, device)
    # what the step calls (raw is saved): DDP inside the compile, so that the compiler splits the backward at DDP's
    # buckets and each bucket's all-reduce overlaps the rest of the backward (DDPOptimizer)
    model = torch.compile(ddp.wrap(raw)) if use_compile else ddp.wrap(raw)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    tokenizer = load_tokenizer(prepared.tokenizer_path)
    lessons = CopyLessons(tc.copy_lessons, ordinary_ids(tokenizer, cfg.model.vocab_size)) if tc.copy_lessons else None
    loader = BatchLoader(prepared.dir / "train.bin", cfg.model.block_size, tc.batch_size, tc.seed, device, ddp.rank,
                         lessons=lessons)  # fmt: skip
    tokens_per_step = tc.batch_size * cfg.model.block_size * tc.grad_accum * ddp.world

    progress = restore_progress(saved, optimizer, scaler, loader, ddp, tc.seed)
    read = windows_read(prepared.meta["splits"]["val"]["tokens"], cfg.model.block_size) // ddp.world
    budget = TimeBudget(tc.time_budget, started, saved.get("budget_used_s", 0.0) if saved else 0.0, read)
    log = None
    if ddp.master:
        say = messages()
        summary = say("train.summary", params=f"{raw.num_params() / 1e6:.2f}", device=device, precision=precision,
                      compile="on" if use_compile else "off", world=ddp.world, tokens=tokens_per_step,
                      resuming=say("train.resuming", step=progress.step) if saved else "")
        log = open_log(cfg, out_dir, overwrite, progress.step if saved else None, summary)
    run = TrainingRun(cfg, out_dir, ddp, raw, model, optimizer, scaler, loader, prepared, tokenizer, autocast, budget,
                      log, tokens_per_step, precision, compiling=use_compile, kept_off=kept_off)  # fmt: skip
    return run, progress


def resolve_config(cfg: RunConfig, meta: dict, saved: dict | None, start, device: torch.device, autocast,
                   ddp: Distributed) -> RunConfig:
    """The run's config, complete: the vocabulary size of the prepared data (`meta`), the "auto" settings
    (training/recipe.py: taken back from `saved` on a resume, planned otherwise) and the run_id. `start`: the
    pretrained model of train.init_from, whose tokenizer must encode the data as the prepared one does."""
    if start:
        start.check_encodes(meta, cfg.data.tokenizer)
    elif not cfg.train.init_from:  # from scratch the embedding has one row per token; a checkpoint's may have more
        cfg = replace(cfg, model=replace(cfg.model, vocab_size=meta["vocab_size"]))
    check_memory(cfg, device)  # before anything of that size is allocated (the "auto" settings time a model)
    cfg = resolve_auto(cfg, meta, saved, device, autocast, ddp)
    return replace(cfg, run_id=run_identity(cfg.to_dict(), meta, saved))  # which its snapshots carry


def initial_model(cfg: RunConfig, rank: int, saved: dict | None, start, out_dir: Path, meta: dict) -> GPT:
    """The model with its first weights: last/'s on a resume, else the pretrained `start`'s (which it says), else
    seeded."""
    tc = cfg.train
    random.seed(tc.seed)
    np.random.seed(tc.seed % 2**32)  # numpy's seeds are 32-bit; nothing here draws from it
    torch.manual_seed(tc.seed)
    raw = GPT(cfg.model)  # the same seed on every rank, so the same initial weights
    torch.manual_seed(draw_seed(tc.seed, rank))  # but different dropout masks
    if saved:
        check_same_model(out_dir / "last", asdict(cfg.model), meta)
        check_same_best(saved, tc.best_by, out_dir / "last")
        load_weights(raw, out_dir / "last")
    elif start:
        start.copy_into(raw)
        print(messages()("train.starting_from", origin=start.origin, positions=start.config.block_size,
                             kept=raw.config.block_size))
    return raw


def make_optimizer(raw: GPT, tc, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices, not on biases or gains."""
    matrices = [p for p in raw.parameters() if p.dim() >= 2]
    others = [p for p in raw.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": matrices, "weight_decay": tc.weight_decay},
                              {"params": others, "weight_decay": 0.0}],
                             lr=tc.lr, betas=(tc.beta1, tc.beta2), fused=fused_adamw(device))  # fmt: skip


def restore_progress(saved: dict | None, optimizer, scaler, loader: BatchLoader, ddp: Distributed,
                     seed: int) -> Progress:
    """Where the loop starts: step 0, or exactly where last/ left off (`saved`: its train state), with the
    optimizer, the scaler, this rank's RNGs and its loader as they were. Saved by another number of processes,
    the ranks' states are not this run's: each rank's RNGs and loader start afresh from (`seed`, rank, step)."""
    if not saved:
        return Progress(loss_sum=torch.zeros((), device=ddp.device))
    progress = Progress(saved["loss_sum"].to(ddp.device), saved["n_summed"], saved["step"], saved["best_val_loss"],
                        saved["best_step"], saved["evals_since_best"])
    optimizer.load_state_dict(saved["optimizer"])
    if saved["scaler"]:
        scaler.load_state_dict(saved["scaler"])
    if len(saved["ranks"]) == ddp.world:
        mine = saved["ranks"][ddp.rank]
        if isinstance(mine.get("loss_sum"), torch.Tensor):  # states saved before it hold rank 0's alone
            progress.loss_sum = mine["loss_sum"].to(ddp.device)
        set_rng_state(mine["rng"], ddp.device)
        loader.load_state_dict(mine["loader"])
    else:  # not step 0's seeds again (initial_model's), which would replay its batches and dropout masks
        loader.start_at(seed, ddp.rank, progress.step)
        torch.manual_seed(draw_seed(seed, ddp.rank, progress.step))  # the CPU's and every GPU's generator
        if ddp.master:
            say = messages()
            print(say("warning", text=say("train.ranks", saved=len(saved["ranks"]), world=ddp.world,
                                          step=progress.step)))
    return progress


def train_state(run: TrainingRun, progress: Progress) -> dict:
    """What last/ and best/ keep to resume exactly: `progress`, the optimizer and scaler, every rank's RNG
    and loader states (a gather: every rank calls it), the "auto" values and the time budget spent."""
    p, tc = progress, run.cfg.train
    return {"step": p.step, "best_val_loss": p.best_val, "best_by": tc.best_by,  # the lowest best_by so far
            "best_step": p.best_step, "evals_since_best": p.evals_since_best,
            "loss_sum": p.loss_sum.cpu(), "n_summed": p.n_summed, "optimizer": run.optimizer.state_dict(),
            "scaler": run.scaler.state_dict() if run.scaler.is_enabled() else {}, "world_size": run.ddp.world,
            "ranks": run.ddp.gather({"rng": rng_state(run.ddp.device), "loader": run.loader.state_dict(),
                                      "loss_sum": p.loss_sum.cpu()}),  # each rank's own, for its first log after a resume
            "resolved": resolved_values(run.cfg), "precision": run.precision, "budget_used_s": run.budget.used(), "run_id": run.cfg.run_id}  # fmt: skip


def open_log(cfg: RunConfig, out_dir: Path, overwrite: bool, resumed_at: int | None, summary: str) -> RunLog:
    """Rank 0's first writes, only now that everything else checked out: the run directory cleared
    (--overwrite) or a resume's later snapshots dropped, config.json, the config and `summary` printed."""
    if overwrite:
        clear_run(out_dir)
    elif resumed_at is not None:
        drop_snapshots_after(out_dir, resumed_at, cfg)  # this run takes them again, the same
    write_json(out_dir / "config.json", cfg.to_dict())
    print(cfg.describe())
    print(summary)
    return RunLog(out_dir, cfg.to_dict(), resumed_at, cfg.log)


def first_compiled_step(run: TrainingRun, p: Progress, lr: float, step) -> None:
    """`step(run, p, lr)` for the first step of a compiled run, where torch.compile compiles: where it cannot (no
    C compiler or Python headers for Triton's launcher, an operator its backend lacks), the step's gradients,
    loss, batches and random draws are taken back and the step runs eager, as the whole run then does, with one
    warning instead of a traceback. Not so for a GPU out of memory, which is no compiler's failure (its one line,
    cli/command.py), nor under torchrun: a rank that built its model again would wait in DDP's broadcast while the
    others wait for it in the backward's all-reduce, so the failing rank stops with one line and torchrun stops
    the others."""
    loss_sum, n_summed = p.loss_sum.clone(), p.n_summed
    loader, rng = run.loader.state_dict(), rng_state(run.ddp.device)
    try:
        step(run, p, lr)
        return
    except (UserError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 (whatever the compiler raises; the eager step below is the test)
        if is_out_of_memory(e):
            raise
        error, detail = type(e).__name__, (str(e).strip().splitlines() or [""])[0][:200]
        if run.ddp.world > 1:
            failed = UserError(f"torch.compile failed at the first step on rank {run.ddp.rank} ({error}: {detail}); "
                               "under torchrun no rank can go on eager while the others wait for it in DDP's "
                               "all-reduce, so every rank stops: run again with --train.compile=off")
            failed.own_rank = True
            raise failed from None
    finally:
        run.compiling = False
    # out of the except block, so that the failed attempt's frames (and the tensors they hold) are gone
    run.optimizer.zero_grad(set_to_none=True)  # the step again from where it began: an eager run's first step
    p.loss_sum, p.n_summed = loss_sum, n_summed
    run.loader.load_state_dict(loader)
    set_rng_state(rng, run.ddp.device)
    run.model = run.ddp.wrap(run.raw)
    if run.ddp.master:
        say = messages()
        print(say("warning", text=say("train.compile_step_failed", error=error, detail=detail)))
    step(run, p, lr)
