"""Train a GPT on Korean text: config -> prepared data -> model and optimizer -> one training loop -> checkpoints.

    python train.py                                              # configs/small.toml -> runs/small
    python train.py --data.source=texts/ --train.time_budget=30m  # "auto" settings fit the corpus and the time
    python train.py --config configs/tiny.toml --train.max_steps=20 --out runs/t1
    python train.py --config configs/tiny.toml --out runs/t1 --resume     # continue exactly
    python train.py --config configs/tiny.toml --out runs/t1 --overwrite  # replace that run (torchrun: README)
    python train.py --config configs/heads.toml --watch                   # a live page of the run (docs/watch.md)

The run directory gets config.json, metrics.jsonl (with every head's role scores at each evaluation),
loss.png, heads.png, last/ (every evaluation), best/ (lowest train.best_by, the validation loss by default)
and, with train.snapshots, snapshots/. The run ends with the exact loss over the whole validation split and
its bits per character, for the best and the last weights, and a line on best/'s heads. Exit codes: 0 done;
2 bad input (config, data, checkpoint); 3 the loss became NaN/inf (last/ keeps the last good weights); 130
Ctrl-C and 143 SIGTERM, after finishing the step and saving last/ (the printed command resumes; a second
Ctrl-C aborts without saving). One trainer per run directory (RUN/.lock); a directory that holds a run needs
--resume or --overwrite. Under torchrun rank 0 locks, logs and saves (several nodes: a shared disk). The
pieces that are not the loop live in training/: everything before the first step in training/setup.py;
train.patience may end the run early (training/early_stop.py).
"""

import time

STARTED = time.perf_counter()  # before the imports below (torch takes seconds): a time budget counts them

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import contextlib
import math
import os
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from cli.command import ArgumentParser, integer, run_command
from cli.messages import LANGUAGES, locale_language, messages, use_language
from cli.errors import UserError
from storage.atomic import write_json
from training.checkpoints import save_checkpoint, save_snapshot, snapshot_due, snapshots_taken
from training.config import RunConfig, TrainConfig, load_config
from training.distributed import Distributed
from training.evaluation import (copy_loss, evaluate, final_report, final_scores, head_costs_due, measure_kept_off,
                                 sample_text, score_heads)
from training.early_stop import stop_line, stops_early
from training.hardware import peak_flops
from training.lock import RunLock
from training.metrics import Speedometer
from training.recipe import replan
from training.setup import Progress, TrainingRun, first_compiled_step, set_up, train_state
from training.stopping import StopSignals, check_finite


def get_lr(step: int, tc: TrainConfig) -> float:
    """Learning rate of step `step` (0-based): linear warmup to tc.lr, then cosine decay to tc.min_lr."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    progress = min(1.0, (step - tc.warmup_steps) / max(1, tc.max_steps - tc.warmup_steps))
    return tc.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (tc.lr - tc.min_lr)


def after_step(step: int) -> None:
    """Called after each optimisation step; it does nothing: a seam that tests replace (monkeypatch,
    tests/train_with_hooks.py) to signal a run at a given step."""


def train(cfg: RunConfig, out_dir, resume: bool = False, overwrite: bool = False, command: list[str] | None = None,
          started: float | None = None) -> dict:
    """Run (or resume, or with `overwrite` replace) the run in out_dir. Returns the final record, or
    {"exit_code": 130/143, ...} when a signal stopped it (after saving last/). `command`: the command line
    without --resume and --overwrite, for the advice after a signal. `started`: when the process began, so a
    time budget counts its start-up too. What it prints is in the terminal's language (cli/messages.py)."""
    out_dir, started = Path(out_dir), started or time.perf_counter()
    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    lock = RunLock(out_dir)  # one trainer per run dir, taken by rank 0 for the whole run
    with Distributed(cfg.train.device) as ddp, StopSignals(out_dir, resume, overwrite, command) as signals, lock:
        run, progress = set_up(cfg, out_dir, resume, overwrite, ddp, lock, started)
        speed = Speedometer(run.raw.flops_per_token(run.cfg.model.block_size),
                            peak_flops(ddp.device, run.cfg.train.peak_flops), ddp.devices)  # fmt: skip
        # a signal during the last evaluation stops the run too; the final scores abort at once
        stop = signals.stopped(loop(run, progress, signals, speed))
        if not stop:
            return finish(run, progress, speed, started)
        if run.log:
            run.log.close(plot=False)
            print(messages()("train.stopped", step=progress.step, path=out_dir / "last",
                             command=signals.command("--resume")),
                  file=sys.stderr)
        return {"step": progress.step, "exit_code": 128 + stop}


def loop(run: TrainingRun, p: Progress, signals: StopSignals, speed: Speedometer) -> int | None:
    """The loop: an optimisation step; a log line every log_interval; an evaluation and a save every
    eval_interval. Returns the signal that stopped it, if one did."""
    stop, replans, ddp = None, "train.max_steps" in run.cfg.auto, run.ddp
    run.budget.start_loop(p.step)
    signals.defer()  # from here a signal waits for the end of its step
    with tqdm(total=run.cfg.train.max_steps, initial=p.step, disable=not ddp.master, dynamic_ncols=True) as bar:
        while p.step < run.cfg.train.max_steps and not stop:
            tc = run.cfg.train
            lr = get_lr(p.step, tc)
            if run.compiling:  # the first step compiles; a compiler that fails leaves the run eager, with a warning
                first_compiled_step(run, p, lr, optimisation_step)
            else:
                optimisation_step(run, p, lr)
            speed.add(run.tokens_per_step)
            bar.update()
            after_step(p.step)
            stop = signals.caught if ddp.world == 1 else None  # under DDP the ranks agree on it when they log
            last = p.step == tc.max_steps

            if p.step % tc.log_interval == 0 or last:
                mean_loss, stop = ddp.mean_and_stop(p.loss_sum / p.n_summed, signals.caught)  # the one host-device sync
                log_loss(run, p, lr, mean_loss, speed, bar)

            if p.step % tc.eval_interval == 0 or last:
                if evaluate_and_save(run, p, speed, bar):  # train.patience ended the run
                    break
                if replans and not last:  # a time budget plans max_steps again from the time per step lately
                    replan_steps(run, p.step, bar)
            elif stop:
                save(run, p, ["last"])
    return stop


def optimisation_step(run: TrainingRun, p: Progress, lr: float) -> None:
    """One step at learning rate `lr`: grad_accum micro-steps, clipping, the optimizer; the train loss is
    summed on the device (no host-device sync)."""
    tc, optimizer, scaler = run.cfg.train, run.optimizer, run.scaler
    for group in optimizer.param_groups:
        group["lr"] = lr
    for micro in range(tc.grad_accum):  # teacher forcing: y is x shifted by one token
        x, y = run.loader.next_batch()
        if run.ddp.world > 1:  # DDP (under a compile: its _orig_mod) averages the gradients in the last backward only
            getattr(run.model, "_orig_mod", run.model).require_backward_grad_sync = micro == tc.grad_accum - 1
        with run.autocast:
            loss = run.model(x, y, loss_only=True)[1] / tc.grad_accum
        scaler.scale(loss).backward()
        p.loss_sum += loss.detach()
    if tc.grad_clip > 0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(run.raw.parameters(), tc.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    p.step, p.n_summed = p.step + 1, p.n_summed + 1


def log_loss(run: TrainingRun, p: Progress, lr: float, mean_loss: float, speed: Speedometer, bar: tqdm) -> None:
    """The log line of every log_interval: the mean train loss since the last one, checked finite."""
    check_finite("the training loss", mean_loss, p.step, run.out_dir)
    record = {"step": p.step, "loss": round(mean_loss, 6), "lr": lr, **speed.lap()}
    if run.log:
        run.log.write(record)
        bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{record['tokens_per_s']:.0f}")
    p.loss_sum.zero_()
    p.n_summed = 0


def evaluate_and_save(run: TrainingRun, p: Progress, speed: Speedometer, bar: tqdm) -> bool:
    """The evaluation of every eval_interval: the losses and the heads' roles, a snapshot when one is due,
    last/ (and best/), the log. True when train.patience ends the run here."""
    tc, ddp, raw, prepared = run.cfg.train, run.ddp, run.raw, run.prepared
    t_eval = time.perf_counter()
    measure_kept_off(run.kept_off, raw, prepared.dir, prepared.meta)  # train.heads_off: their outputs from now on
    losses = evaluate(raw, prepared.dir, tc, ddp.device, run.autocast, ddp.rank, ddp.world)
    t_scored = time.perf_counter()
    snapshot = ddp.master and snapshot_due(p.step, tc.max_steps, len(snapshots_taken(run.out_dir, run.cfg)), tc.snapshots)
    costs = head_costs_due(tc, raw.config, snapshot)  # what switching each head off costs, as --heads prints it
    p.heads = score_heads(raw, prepared.dir, prepared.meta, run.tokenizer, costs, run.kept_off) if ddp.master else None
    check_finite("the validation loss", losses["val"], p.step, run.out_dir)
    score = losses["val"] if tc.best_by == "val_loss" else ddp.from_master(lambda: copy_loss(p.heads))
    improved = score < p.best_val  # best/ keeps the lowest train.best_by
    if improved:
        p.best_val, p.best_step = score, p.step
    p.evals_since_best = 0 if improved else p.evals_since_best + 1
    if snapshot:
        save_snapshot(run.out_dir, p.step, raw, checkpoint_config(run), prepared.dir)  # before last/: see drop_snapshots_after
    save(run, p, ["last", "best"] if improved else ["last"])
    if run.log:
        record = {"kind": "eval", "step": p.step, "train_loss": round(losses["train"], 6),
                  "val_loss": round(losses["val"], 6), f"best_{tc.best_by}": round(p.best_val, 6), "heads": p.heads}  # fmt: skip
        if tc.sample_tokens:
            record["sample"] = sample_text(raw, run.tokenizer, prepared.meta["eot_id"], tc.sample_tokens, ddp.device)
        run.log.write(record)
        say = messages()
        bar.write(say("train.eval", step=p.step, train=f"{losses['train']:.4f}", val=f"{losses['val']:.4f}",
                      best=say("train.best") if improved else "")
                  + (f" | {record['sample'][:100]}" if tc.sample_tokens else ""))  # fmt: skip
    run.budget.evaluated(time.perf_counter() - t_eval, t_scored - t_eval, losses["tokens"])
    speed.pause(run.budget.seconds_per_eval)  # evaluation time is not training time
    stops = stops_early(run.cfg, p.step, p.evals_since_best)  # train.patience (training/early_stop.py)
    if stops and run.log:
        bar.write(stop_line(tc, p.step, p.best_step, p.evals_since_best, run.budget.seconds_per_step))
    return stops


def replan_steps(run: TrainingRun, step: int, bar: tqdm) -> None:
    """max_steps planned again at the evaluation of `step` (training/budget.py), into config.json too."""
    tc = run.cfg.train
    planned = max(step, run.ddp.from_master(lambda: run.budget.steps_that_fit(step)))
    if run.log and abs(planned - tc.max_steps) > 0.02 * tc.max_steps:  # say so when it moves much
        bar.write(messages()("train.plan", steps=f"{planned:,}", budget=tc.time_budget,
                             seconds=f"{run.budget.seconds_per_step:.3g}"))
    run.cfg, bar.total = replan(run.cfg, planned), planned
    if run.ddp.master:
        write_json(run.out_dir / "config.json", run.cfg.to_dict())


def save(run: TrainingRun, p: Progress, names: list[str]) -> None:
    """Save last/ (and best/) once the train loss and the weights are checked finite: every rank gives its
    RNG and loader states; rank 0 writes."""
    loss = (p.loss_sum / max(1, p.n_summed)).item()
    biggest = torch.stack([w.detach().abs().max().float() for w in run.raw.parameters()]).max().item()
    loss, biggest = run.ddp.worst([loss, biggest])  # a NaN on one rank stops every rank, before the gather below
    check_finite("the training loss", loss, p.step, run.out_dir)
    check_finite("a weight", biggest, p.step, run.out_dir)
    state = train_state(run, p)
    for name in names if run.ddp.master else []:
        save_checkpoint(run.out_dir, name, run.raw, {**checkpoint_config(run), "step": p.step}, run.prepared.dir, state)


def checkpoint_config(run: TrainingRun) -> dict:
    """What a checkpoint's config.json holds beside the model's sizes: the run's config and, with train.heads_off,
    the heads kept off and what they give (read back by storage.checkpoint.load_kept_off)."""
    return {**run.cfg.to_dict(), **({"kept_off": run.kept_off.record()} if run.kept_off else {})}


def finish(run: TrainingRun, p: Progress, speed: Speedometer, started: float) -> dict:
    """The exact loss over the whole validation split for best/ and last/, logged and reported."""
    ddp = run.ddp
    ddp.barrier()  # best/ is complete on disk before any rank reads it
    final, best_dir = final_scores(run.raw, run.prepared, run.tokenizer, run.out_dir, p.step, ddp.rank, ddp.world,
                                   run.kept_off)
    final |= {"wall_s": round(time.perf_counter() - started, 1), "budget_used_s": round(run.budget.used(), 1),
              **speed.overall()}  # budget_used_s: what train.time_budget counts (data, steps, scoring)
    if run.log:
        run.log.write(final)
        run.log.close()
        print(final_report(final, best_dir, run.out_dir, p.heads, run.cfg.train.copy_lessons > 0))
    return final


def base_command(argv: list[str]) -> list[str]:
    """The command line of this run without --resume and --overwrite (the advice after a signal adds one)."""
    world = int(os.environ.get("WORLD_SIZE", 1))
    script = os.path.relpath(__file__) if not os.path.relpath(__file__).startswith("..") else __file__
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"]
    return launcher + [script] + [a for a in argv if a not in ("--resume", "--overwrite")]


def main(argv: list[str] | None = None) -> int:
    """The command line: parsed here, then train()."""
    started = STARTED if argv is None else None  # the process's start, unless called in-process (tests)
    argv = sys.argv[1:] if argv is None else argv
    parser = ArgumentParser(prog="python train.py", description=__doc__.split("\n")[0], allow_abbrev=False,
                            epilog="Overrides: --section.key=value, e.g. --train.lr=3e-4")
    parser.add_argument("--config", default="configs/small.toml", help="TOML run config (default: configs/small.toml)")
    parser.add_argument("--out", help="run directory (default: runs/<config file stem>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last/ checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace the run in --out (its checkpoints and metrics)")
    parser.add_argument("--lang", choices=LANGUAGES, help="language of what the run prints: en or ko (default: the "
                        "locale's)")
    parser.add_argument("--watch", nargs="?", const=8000, type=integer, metavar="PORT", help="serve a live page of the "
                        "run while it trains: losses, heads forming, attention maps (default port 8000; 0: any free one)")
    parser.add_argument("--host", help="address --watch listens on (default 127.0.0.1, this machine only)")

    def work() -> int:
        args, overrides = parser.parse_known_args(argv)
        if args.host is not None and args.watch is None:
            raise UserError("--host says where --watch listens; add --watch")
        if args.watch is not None and not 0 <= args.watch <= 65535:
            raise UserError(f"--watch {args.watch} must be a port between 0 and 65535")
        cfg = load_config(args.config, overrides)
        out_dir = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
        use_language(args.lang)  # every line the run prints, warnings included (None: the locale's)
        page = contextlib.nullcontext()
        if args.watch is not None and int(os.environ.get("RANK", "0")) == 0:  # rank 0 alone under torchrun
            from inspection.watch_server import watching  # the web server's packages, only for a run that serves

            page = watching(out_dir, args.host or "127.0.0.1", args.watch, args.lang or locale_language())
        with page:
            result = train(cfg, out_dir, args.resume, args.overwrite, base_command(argv), started)
        return result.get("exit_code", 0)

    return run_command(work, interrupted="interrupted before training began; nothing was written (run the command again)")


if __name__ == "__main__":
    sys.exit(main())
