"""Train a GPT on Korean text: config -> prepared data -> model and optimizer -> one training loop -> checkpoints.

    python train.py                                              # configs/small.toml -> runs/small
    python train.py --data.source=texts/ --train.time_budget=30m  # "auto" settings fit the corpus and the time
    python train.py --config configs/tiny.toml --train.max_steps=20 --out runs/t1
    python train.py --config configs/tiny.toml --out runs/t1 --resume     # continue exactly
    python train.py --config configs/tiny.toml --out runs/t1 --overwrite  # replace that run (torchrun: README)

The run directory gets config.json, metrics.jsonl (with every head's role scores at each evaluation),
loss.png, heads.png, last/ (every evaluation), best/ (lowest train.best_by, the validation loss by default)
and, with train.snapshots, snapshots/. The run ends with the exact loss over the whole validation split and
its bits per character, for the best and the last weights, and a line on best/'s heads. Exit codes: 0 done;
2 bad input (config, data, checkpoint); 3 the loss became NaN/inf (last/ keeps the last good weights); 130
Ctrl-C and 143 SIGTERM, after finishing the step and saving last/ (the printed command resumes; a second
Ctrl-C aborts without saving). One trainer per run directory (RUN/.lock); a directory that holds a run needs
--resume or --overwrite. Under torchrun rank 0 locks, logs and saves (several nodes: a shared disk). The
pieces that are not the loop live in training/; train.patience may end the run early (training/early_stop.py).
"""

import time

STARTED = time.perf_counter()  # before the imports below (torch takes seconds): a time budget counts them

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import math
import os
import random
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from cli.command import ArgumentParser, run_command
from data.loader import BatchLoader
from data.prepare import check_splits, prepare
from data.lessons import CopyLessons
from data.tokenizer import load_tokenizer, ordinary_ids
from hf.pretrained import open_pretrained
from model import GPT
from model.nll import windows_read
from storage.atomic import write_json
from storage.checkpoint import load_weights
from training.budget import TimeBudget
from training.checkpoints import (drop_snapshots_after, recover, rng_state, save_checkpoint, save_snapshot, set_rng_state,
                                  snapshot_due, snapshots_taken)  # fmt: skip
from training.config import RunConfig, TrainConfig, load_config
from training.distributed import Distributed
from training.evaluation import copy_loss, evaluate, final_report, final_scores, sample_text, score_heads
from training.early_stop import planned_patience, stop_line, stops_early
from training.hardware import check_memory, peak_flops, step_settings
from training.lock import RunLock
from training.metrics import RunLog, Speedometer
from training.recipe import resolve_auto, resolved_values
from training.run_dir import check_run_dir, check_same_best, check_same_model, clear_run, open_run_dir, run_identity
from training.stopping import StopSignals, check_finite


def get_lr(step: int, tc: TrainConfig) -> float:
    """Learning rate of step `step` (0-based): linear warmup to tc.lr, then cosine decay to tc.min_lr."""
    if step < tc.warmup_steps:
        return tc.lr * (step + 1) / tc.warmup_steps
    progress = min(1.0, (step - tc.warmup_steps) / max(1, tc.max_steps - tc.warmup_steps))
    return tc.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (tc.lr - tc.min_lr)


def train(cfg: RunConfig, out_dir, resume: bool = False, overwrite: bool = False, command: list[str] | None = None,
          started: float | None = None, after_step=None, during_save=None) -> dict:
    """Run (or resume, or with `overwrite` replace) the run in out_dir. Returns the final record, or
    {"exit_code": 130/143, ...} when a signal stopped it (after saving last/). `command`: the command line
    without --resume and --overwrite, for the advice after a signal. `started`: when the process began, so a
    time budget counts its start-up too. Test hooks: `after_step(step)` is called after each step,
    `during_save(step, name)` halfway through each save of a checkpoint."""
    out_dir, tc, started = Path(out_dir), cfg.train, started or time.perf_counter()
    if tc.threads:
        torch.set_num_threads(tc.threads)
    lock = RunLock(out_dir)  # one trainer per run dir, taken by rank 0 for the whole run
    with Distributed(tc.device) as ddp, StopSignals(out_dir, resume, overwrite, command) as signals, lock:
        device = ddp.device

        # the run directory (a run's or empty, checked before the lock touches it) and the data
        ddp.from_master(lambda: (check_run_dir(out_dir), lock.acquire(), recover(out_dir)))  # recover: a crashed save
        saved = open_run_dir(out_dir, resume, overwrite)  # last/'s train state when resuming
        prepared = ddp.master_first(lambda: prepare(cfg.data, verbose=ddp.master))
        check_splits(prepared.meta, cfg.model.block_size)
        start = open_pretrained(tc.init_from) if tc.init_from and not saved else None  # a resume reads last/
        if start:
            start.check_encodes(prepared.meta, cfg.data.tokenizer)
        elif not tc.init_from:  # from scratch the embedding has one row per token; a checkpoint's may have more
            cfg = replace(cfg, model=replace(cfg.model, vocab_size=prepared.meta["vocab_size"]))
        check_memory(cfg, device)  # before anything of that size is allocated
        precision, _, autocast = step_settings(device, tc)
        cfg = resolve_auto(cfg, prepared.meta, saved, device, autocast, ddp)  # the "auto" settings: training/recipe.py
        cfg = replace(cfg, run_id=run_identity(cfg.to_dict(), prepared.meta, saved))  # which its snapshots carry
        tc, use_compile = cfg.train, step_settings(device, cfg.train)[1]  # a CPU's compile "auto": decided by a trial

        # the model and the optimizer
        random.seed(tc.seed)
        np.random.seed(tc.seed % 2**32)  # numpy's seeds are 32-bit; nothing here draws from it
        torch.manual_seed(tc.seed)
        raw = GPT(cfg.model)  # the same seed on every rank, so the same initial weights
        torch.manual_seed((tc.seed + ddp.rank) % 2**64)  # but different dropout masks
        if saved:
            check_same_model(out_dir / "last", asdict(cfg.model), prepared.meta)
            check_same_best(saved, tc.best_by, out_dir / "last")
            load_weights(raw, out_dir / "last")
        elif start:
            start.copy_into(raw)
            print(f"starting from {start.origin} ({start.config.block_size} positions, {raw.config.block_size} kept)")
        raw.to(device)
        matrices = [p for p in raw.parameters() if p.dim() >= 2]  # weight decay on matrices, not biases or gains
        others = [p for p in raw.parameters() if p.dim() < 2]
        optimizer = torch.optim.AdamW([{"params": matrices, "weight_decay": tc.weight_decay},
                                       {"params": others, "weight_decay": 0.0}],
                                      lr=tc.lr, betas=(tc.beta1, tc.beta2), fused=device.type == "cuda")  # fmt: skip
        model = ddp.wrap(torch.compile(raw) if use_compile else raw)  # what the step calls; raw is saved
        scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        tokenizer = load_tokenizer(prepared.tokenizer_path)
        lessons = CopyLessons(tc.copy_lessons, ordinary_ids(tokenizer, cfg.model.vocab_size)) if tc.copy_lessons else None
        loader = BatchLoader(prepared.dir / "train.bin", cfg.model.block_size, tc.batch_size, tc.seed, device, ddp.rank,
                             lessons=lessons)  # fmt: skip
        tokens_per_step = tc.batch_size * cfg.model.block_size * tc.grad_accum * ddp.world

        # where the loop starts: step 0, or exactly where last/ left off
        step, best_val, best_step, evals_since_best, heads = 0, math.inf, 0, 0, None
        loss_sum, n_summed = torch.zeros((), device=device), 0  # train loss summed on the device since the last log
        if saved:
            step, best_val, best_step = saved["step"], saved["best_val_loss"], saved["best_step"]
            evals_since_best, n_summed, loss_sum = saved["evals_since_best"], saved["n_summed"], saved["loss_sum"].to(device)
            optimizer.load_state_dict(saved["optimizer"])
            if saved["scaler"]:
                scaler.load_state_dict(saved["scaler"])
            if len(saved["ranks"]) == ddp.world:
                set_rng_state(saved["ranks"][ddp.rank]["rng"])
                loader.load_state_dict(saved["ranks"][ddp.rank]["loader"])
            elif ddp.master:
                print(f"warning: {len(saved['ranks'])} processes saved this run, {ddp.world} resume it: the batches will differ")
        read = windows_read(prepared.meta["splits"]["val"]["tokens"], cfg.model.block_size) // ddp.world
        budget = TimeBudget(tc.time_budget, started, saved.get("budget_used_s", 0.0) if saved else 0.0, read)
        log = None
        if ddp.master:
            if overwrite:
                clear_run(out_dir)  # only now that everything else checked out
            elif saved:
                drop_snapshots_after(out_dir, step, cfg)  # this run takes them again, the same
            write_json(out_dir / "config.json", cfg.to_dict())
            print(cfg.describe())
            print(f"{raw.num_params() / 1e6:.2f}M parameters on {device}, {precision}, compile {'on' if use_compile else 'off'}, "
                  f"{ddp.world} process(es), {tokens_per_step} tokens/step" + (f"; resuming at step {step}" if saved else ""))  # fmt: skip
            log = RunLog(out_dir, cfg.to_dict(), step if saved else None, cfg.log)

        def save(names: list[str]) -> None:  # every rank gives its RNG and loader states; rank 0 writes
            check_finite("the training loss", (loss_sum / max(1, n_summed)).item(), step, out_dir)
            biggest = torch.stack([p.detach().abs().max().float() for p in raw.parameters()]).max().item()
            check_finite("a weight", biggest, step, out_dir)
            state = {"step": step, "best_val_loss": best_val, "best_by": tc.best_by,  # the lowest best_by so far
                     "best_step": best_step, "evals_since_best": evals_since_best, "loss_sum": loss_sum.cpu(),
                     "n_summed": n_summed, "optimizer": optimizer.state_dict(),
                     "scaler": scaler.state_dict() if scaler.is_enabled() else {}, "world_size": ddp.world,
                     "ranks": ddp.gather({"rng": rng_state(), "loader": loader.state_dict()}),
                     "resolved": resolved_values(cfg), "budget_used_s": budget.used(), "run_id": cfg.run_id}  # fmt: skip
            for name in names if ddp.master else []:
                save_checkpoint(out_dir, name, raw, {**cfg.to_dict(), "step": step}, prepared.dir, state, during_save)

        # the loop: an optimisation step; a log line every log_interval; an evaluation and a save every eval_interval
        stop, replans = None, "train.max_steps" in cfg.auto
        speed = Speedometer(raw.flops_per_token(cfg.model.block_size), peak_flops(device, tc.peak_flops), ddp.world)
        budget.start_loop(step)
        signals.defer()  # from here a signal waits for the end of its step
        with tqdm(total=tc.max_steps, initial=step, disable=not ddp.master, dynamic_ncols=True) as bar:
            while step < tc.max_steps and not stop:
                lr = get_lr(step, tc)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                for micro in range(tc.grad_accum):  # teacher forcing: y is x shifted by one token
                    x, y = loader.next_batch()
                    with ddp.syncing(model, last_micro_step=micro == tc.grad_accum - 1):
                        with autocast:
                            loss = model(x, y)[1] / tc.grad_accum
                        scaler.scale(loss).backward()
                    loss_sum += loss.detach()
                if tc.grad_clip > 0:
                    scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(raw.parameters(), tc.grad_clip)
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                step, n_summed = step + 1, n_summed + 1
                speed.add(tokens_per_step)
                bar.update()
                if after_step is not None:
                    after_step(step)
                stop = signals.caught if ddp.world == 1 else None  # under DDP the ranks agree on it when they log
                last = step == tc.max_steps

                if step % tc.log_interval == 0 or last:
                    mean_loss, stop = ddp.mean_and_stop(loss_sum / n_summed, signals.caught)  # the one host-device sync
                    check_finite("the training loss", mean_loss, step, out_dir)
                    record = {"step": step, "loss": round(mean_loss, 6), "lr": lr, **speed.lap()}
                    if log:
                        log.write(record)
                        bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{record['tokens_per_s']:.0f}")
                    loss_sum.zero_()
                    n_summed = 0

                if step % tc.eval_interval == 0 or last:
                    t_eval = time.perf_counter()
                    losses = evaluate(raw, prepared.dir, tc, device, autocast, ddp.rank, ddp.world)
                    t_scored = time.perf_counter()
                    heads = score_heads(raw, prepared.dir, prepared.meta, tokenizer) if ddp.master else None  # --heads's roles
                    check_finite("the validation loss", losses["val"], step, out_dir)
                    score = losses["val"] if tc.best_by == "val_loss" else ddp.from_master(lambda: copy_loss(heads))
                    improved = score < best_val  # best/ keeps the lowest train.best_by
                    if improved:
                        best_val, best_step = score, step
                    evals_since_best = 0 if improved else evals_since_best + 1
                    if ddp.master and snapshot_due(step, tc.max_steps, len(snapshots_taken(out_dir, cfg)), tc.snapshots):
                        save_snapshot(out_dir, step, raw, cfg.to_dict(), prepared.dir)  # before last/: see drop_snapshots_after
                    save(["last", "best"] if improved else ["last"])
                    if log:
                        record = {"kind": "eval", "step": step, "train_loss": round(losses["train"], 6),
                                  "val_loss": round(losses["val"], 6), f"best_{tc.best_by}": round(best_val, 6), "heads": heads}  # fmt: skip
                        if tc.sample_tokens:
                            record["sample"] = sample_text(raw, tokenizer, prepared.meta["eot_id"], tc.sample_tokens, device)
                        log.write(record)
                        bar.write(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
                                  + (" (best)" if improved else "") + (f" | {record['sample'][:100]}" if tc.sample_tokens else ""))  # fmt: skip
                    budget.evaluated(time.perf_counter() - t_eval, t_scored - t_eval, losses["tokens"])
                    speed.pause(budget.seconds_per_eval)  # evaluation time is not training time
                    if stops_early(cfg, step, evals_since_best):  # train.patience (training/early_stop.py)
                        if log:
                            bar.write(stop_line(tc, step, best_step, evals_since_best, budget.seconds_per_step))
                        break
                    if replans and not last:  # a time budget plans max_steps again from the time per step lately
                        planned = max(step, ddp.from_master(lambda: budget.steps_that_fit(step)))
                        if log and abs(planned - tc.max_steps) > 0.02 * tc.max_steps:  # say so when it moves much
                            bar.write(f"plan: {planned:,} steps fit in train.time_budget = {tc.time_budget} "
                                      f"({budget.seconds_per_step:.3g} s a step lately, evaluations included)")
                        cfg = replace(cfg, train=replace(tc, max_steps=planned, **planned_patience(cfg, planned)))
                        tc, bar.total = cfg.train, planned
                        if ddp.master:
                            write_json(out_dir / "config.json", cfg.to_dict())
                elif stop:
                    save(["last"])

        stop = signals.stopped(stop)  # a signal during the last evaluation too; the final scores abort at once
        if stop:
            if log:
                log.close(plot=False)
                print(f"stopped at step {step}; saved {out_dir}/last; resume with: {signals.command('--resume')}",
                      file=sys.stderr)
            return {"step": step, "exit_code": 128 + stop}
        ddp.barrier()  # best/ is complete on disk before any rank reads it
        final, best_dir = final_scores(raw, prepared.dir, prepared.meta, tokenizer, out_dir, step, ddp.rank, ddp.world)
        final |= {"wall_s": round(time.perf_counter() - started, 1), "budget_used_s": round(budget.used(), 1),
                  **speed.overall()}  # budget_used_s: what train.time_budget counts (data, steps, scoring)
        if log:
            log.write(final)
            log.close()
            print(final_report(final, best_dir, out_dir, heads, lesson=tc.copy_lessons > 0))
        return final


def base_command(argv: list[str]) -> list[str]:
    """The command line of this run without --resume and --overwrite (the advice after a signal adds one)."""
    world = int(os.environ.get("WORLD_SIZE", 1))
    script = os.path.relpath(__file__) if not os.path.relpath(__file__).startswith("..") else __file__
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"]
    return launcher + [script] + [a for a in argv if a not in ("--resume", "--overwrite")]


def main(argv: list[str] | None = None, *, after_step=None, during_save=None) -> int:
    """The command line; `after_step` and `during_save` are train()'s test hooks."""
    started = STARTED if argv is None else None  # the process's start, unless called in-process (tests)
    argv = sys.argv[1:] if argv is None else argv
    parser = ArgumentParser(prog="python train.py", description=__doc__.split("\n")[0], allow_abbrev=False,
                            epilog="Overrides: --section.key=value, e.g. --train.lr=3e-4")
    parser.add_argument("--config", default="configs/small.toml", help="TOML run config (default: configs/small.toml)")
    parser.add_argument("--out", help="run directory (default: runs/<config file stem>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last/ checkpoint")
    parser.add_argument("--overwrite", action="store_true", help="replace the run in --out (its checkpoints and metrics)")

    def work() -> int:
        args, overrides = parser.parse_known_args(argv)
        cfg = load_config(args.config, overrides)
        out_dir = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
        result = train(cfg, out_dir, args.resume, args.overwrite, base_command(argv), started, after_step, during_save)
        return result.get("exit_code", 0)

    return run_command(work, interrupted="interrupted before training began; nothing was written (run the command again)")


if __name__ == "__main__":
    sys.exit(main())
