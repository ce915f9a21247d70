"""Train a GPT on Korean text: config -> prepared data -> one training loop -> checkpoints.

    python train.py                                              # configs/small.toml -> runs/small
    python train.py --config configs/tiny.toml --train.max_steps=20 --out runs/t1
    python train.py --config configs/tiny.toml --out runs/t1 --resume     # continue exactly
    torchrun --standalone --nproc_per_node=2 train.py --config configs/tiny.toml

The run directory gets config.json, metrics.jsonl, loss.png, last/ (every evaluation) and best/ (lowest
validation loss). The run ends with the exact loss over the whole validation split and its bits per
character, for the best and the last weights. Exit codes: 0 done; 2 bad input (config, data, checkpoint);
3 the loss became NaN/inf (last/ keeps the last good weights); 130 Ctrl-C and 143 SIGTERM, after
finishing the step and saving last/ (the printed command resumes; a second Ctrl-C aborts without saving).
Under torchrun only rank 0 logs and saves; for several nodes the run directory must be on a shared disk.
"""

import argparse
import contextlib
import json
import math
import os
import random
import shlex
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

from training.checkpoints import check_same_model, open_run_dir, recover, rng_state, save_checkpoint, set_rng_state
from data.loader import BatchLoader, load_tokens
from data.prepare import prepare
from data.tokenizer import load_tokenizer
from model.errors import UserError
from training.evaluation import evaluate, sample_text, split_nll
from training.hardware import default_compile, default_precision, peak_flops, resolve_device
from model import GPT
from training.config import RunConfig, TrainConfig, load_config
from training.metrics import RunLog

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


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


def prepare_data(cfg: RunConfig, master: bool, world: int):
    """Rank 0 prepares (or finds in the cache) the data; the other ranks then reuse it."""
    error = None
    if master:
        try:
            prepared = prepare(cfg.data, verbose=True)
        except UserError as e:
            error = e
    if world > 1:
        box = [None if error is None else str(error)]
        dist.broadcast_object_list(box, src=0)
        if box[0] is not None and not master:
            raise UserError(box[0])
    if error is not None:
        raise error
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


def train(cfg: RunConfig, out_dir, resume: bool = False, command: str | None = None) -> dict:
    """Run (or resume) training into out_dir. Returns the final record, or {"exit_code": 130/143, ...}
    when a signal stopped it (after saving last/)."""
    out_dir, tc = Path(out_dir), cfg.train
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))
    device = resolve_device(tc.device, int(os.environ.get("LOCAL_RANK", 0)))
    if tc.threads:
        torch.set_num_threads(tc.threads)
    if world > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    caught, previous_handlers = catch_signals()
    try:
        return run_training(cfg, out_dir, resume, command, device, rank, world, caught)
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        if world > 1:
            dist.destroy_process_group()


def run_training(cfg: RunConfig, out_dir: Path, resume, command, device, rank: int, world: int, caught: dict) -> dict:
    """`train` once the device, the process group and the signal handlers are set up."""
    tc, master = cfg.train, rank == 0
    if master:
        recover(out_dir)  # finish or undo a save that a crash interrupted
    if world > 1:
        dist.barrier()
    state = open_run_dir(out_dir, resume)
    prepared = prepare_data(cfg, master, world)
    meta, data_dir = prepared.meta, prepared.dir
    model_cfg, config = cfg.model_config(meta["vocab_size"]), cfg.to_dict(meta["vocab_size"])
    precision = default_precision(device) if tc.dtype == "auto" else tc.dtype
    use_compile = default_compile(device) if tc.compile == "auto" else tc.compile in (True, "on")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    autocast = torch.autocast(device.type, dtype=PRECISIONS[precision], enabled=precision != "fp32")

    random.seed(tc.seed)
    np.random.seed(tc.seed)
    torch.manual_seed(tc.seed)
    raw = GPT(model_cfg)  # the same seed on every rank, so the same initial weights
    torch.manual_seed(tc.seed + rank)  # but different dropout masks
    if state:
        check_same_model(out_dir / "last", config["model"], meta)
        raw.load_state_dict(GPT.load(out_dir / "last").state_dict())
    raw.to(device)
    params = list(raw.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": tc.weight_decay},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=tc.lr, betas=(tc.beta1, tc.beta2), fused=device.type == "cuda",
    )  # fmt: skip
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    loader = BatchLoader(data_dir / "train.bin", model_cfg.block_size, tc.batch_size, tc.seed, device, rank)
    step, best_val, best_step, evals_since_best = 0, math.inf, 0, 0
    loss_sum, n_summed = torch.zeros((), device=device), 0  # train loss summed since the last log
    if state:
        step, best_val, best_step = state["step"], state["best_val_loss"], state["best_step"]
        evals_since_best, n_summed, loss_sum = state["evals_since_best"], state["n_summed"], state["loss_sum"].to(device)
        optimizer.load_state_dict(state["optimizer"])
        if state["scaler"]:
            scaler.load_state_dict(state["scaler"])
        if len(state["ranks"]) == world:
            set_rng_state(state["ranks"][rank]["rng"])
            loader.load_state_dict(state["ranks"][rank]["loader"])
        elif master:
            print(f"warning: {len(state['ranks'])} processes saved this run, {world} resume it: the batches will differ")
    model = torch.compile(raw) if use_compile else raw
    if world > 1:
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    tokenizer = load_tokenizer(prepared.tokenizer_path)
    flops_per_token, peak = raw.flops_per_token(model_cfg.block_size), peak_flops(device, tc.peak_flops)
    tokens_per_step = tc.batch_size * model_cfg.block_size * tc.grad_accum * world
    if master:
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / "config.json.tmp"
        tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, out_dir / "config.json")
        for section, values in config.items():
            print(f"[{section}] " + " ".join(f"{k}={v!r}" for k, v in values.items()))
        print(f"{raw.num_params() / 1e6:.2f}M parameters on {device}, {precision}, compile {'on' if use_compile else 'off'}, "
              f"{world} process(es), {tokens_per_step} tokens/step" + (f"; resuming at step {step}" if state else ""))  # fmt: skip
    log = RunLog(out_dir, config, step if state else None, cfg.log) if master else None

    def save(names: list[str]) -> None:
        """Every rank contributes its RNG and loader states; rank 0 writes the checkpoints."""
        check_finite("the training loss", (loss_sum / max(1, n_summed)).item(), step, out_dir)
        check_finite("a weight", torch.stack([p.detach().abs().max().float() for p in params]).max().item(), step, out_dir)
        ranks = [{"rng": rng_state(), "loader": loader.state_dict()}]
        if world > 1:
            ranks = [None] * world
            dist.all_gather_object(ranks, {"rng": rng_state(), "loader": loader.state_dict()})
        train_state = {
            "step": step, "best_val_loss": best_val, "best_step": best_step, "evals_since_best": evals_since_best,
            "loss_sum": loss_sum.cpu(), "n_summed": n_summed, "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler.is_enabled() else {}, "ranks": ranks, "world_size": world,
        }  # fmt: skip
        for name in names if master else []:
            save_checkpoint(out_dir, name, raw, {**config, "step": step}, data_dir, train_state)

    start_time = t_log = time.perf_counter()
    train_time, trained_tokens, tokens_since_log, stop = 0.0, 0, 0, None
    with tqdm(total=tc.max_steps, initial=step, disable=not master, dynamic_ncols=True) as bar:
        while step < tc.max_steps and not stop:
            lr = get_lr(step, tc)
            for group in optimizer.param_groups:
                group["lr"] = lr
            for micro in range(tc.grad_accum):
                x, y = loader.next_batch()
                # DDP averages the gradients across ranks in the backward of the last micro-step only
                last_micro = world == 1 or micro == tc.grad_accum - 1
                with contextlib.nullcontext() if last_micro else model.no_sync():
                    with autocast:
                        loss = model(x, y)[1] / tc.grad_accum
                    scaler.scale(loss).backward()
                loss_sum += loss.detach()
            if tc.grad_clip > 0:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_(params, tc.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            step, n_summed, tokens_since_log = step + 1, n_summed + 1, tokens_since_log + tokens_per_step
            bar.update()
            signal_for_tests(step)
            stop = caught.get("signum") if world == 1 else None  # DDP ranks agree on it when they log

            if step % tc.log_interval == 0 or step == tc.max_steps:
                mean_loss = loss_sum / n_summed
                if world > 1:
                    signum = torch.tensor(caught.get("signum", 0), device=device)
                    dist.all_reduce(signum, op=dist.ReduceOp.MAX)
                    dist.all_reduce(mean_loss)
                    mean_loss, stop = mean_loss / world, signum.item() or None
                mean_loss = mean_loss.item()  # the loop's one host-device sync
                check_finite("the training loss", mean_loss, step, out_dir)
                elapsed = time.perf_counter() - t_log
                train_time, trained_tokens = train_time + elapsed, trained_tokens + tokens_since_log
                record = {"step": step, "loss": round(mean_loss, 6), "lr": lr, "tokens_per_s": round(tokens_since_log / elapsed, 1)}
                if peak:
                    record["mfu"] = round(flops_per_token * record["tokens_per_s"] / world / peak, 4)
                if master:
                    log.write(record)
                    bar.set_postfix(loss=f"{mean_loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{record['tokens_per_s']:.0f}")
                loss_sum.zero_()
                n_summed, tokens_since_log, t_log = 0, 0, time.perf_counter()

            if step % tc.eval_interval == 0 or step == tc.max_steps:
                t_eval = time.perf_counter()
                losses = evaluate(raw, data_dir, tc, device, autocast, rank, world)
                check_finite("the validation loss", losses["val"], step, out_dir)
                improved = losses["val"] < best_val
                best_val, best_step = (losses["val"], step) if improved else (best_val, best_step)
                evals_since_best = 0 if improved else evals_since_best + 1
                save(["last", "best"] if improved else ["last"])
                if master:
                    record = {"kind": "eval", "step": step, "train_loss": round(losses["train"], 6),
                              "val_loss": round(losses["val"], 6), "best_val_loss": round(best_val, 6)}  # fmt: skip
                    if tc.sample_tokens:
                        record["sample"] = sample_text(raw, tokenizer, meta["eot_id"], tc.sample_tokens, device)
                    log.write(record)
                    bar.write(f"step {step}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}"
                              + (" (best)" if improved else "") + (f" | {record['sample'][:100]}" if tc.sample_tokens else ""))  # fmt: skip
                t_log += time.perf_counter() - t_eval  # evaluation time is not training time
                if tc.patience and evals_since_best >= tc.patience:
                    if master:
                        bar.write(f"early stop: no better val loss in {tc.patience} evaluations")
                    break
            elif stop:
                save(["last"])
    if stop:
        if master:
            log.close(plot=False)
            print(f"stopped at step {step}; saved {out_dir}/last. Resume with:\n  {command or '(the same command) --resume'}", file=sys.stderr)
        return {"step": step, "exit_code": 128 + stop}

    if world > 1:
        dist.barrier()  # best/ is complete on disk before any rank reads it
    val_tokens, chars = load_tokens(data_dir / "val.bin", meta["dtype"]), meta["splits"]["val"]["chars"]
    nll, count = split_nll(raw, val_tokens, tc.batch_size, device, rank, world)
    best_is_last = best_step == step or not (out_dir / "best").exists()
    best_model = raw if best_is_last else GPT.load(out_dir / "best", device)
    best_nll = nll if best_is_last else split_nll(best_model, val_tokens, tc.batch_size, device, rank, world)[0]
    final = {
        "kind": "final", "step": step, "val_loss": nll / count, "val_bpc": nll / math.log(2) / chars,
        "best_step": best_step, "best_val_loss": best_nll / count, "best_val_bpc": best_nll / math.log(2) / chars,
        "val_tokens_predicted": count, "val_chars": chars, "wall_s": round(time.perf_counter() - start_time, 1),
        "tokens_per_s": round(trained_tokens / train_time, 1) if train_time else None,
    }  # fmt: skip
    if peak and final["tokens_per_s"]:
        final["mfu"] = round(flops_per_token * final["tokens_per_s"] / world / peak, 4)
    if master:
        log.write(final)
        log.close()
        speed = f"; {final['tokens_per_s']:.0f} tokens/s" if final["tokens_per_s"] else ""
        print(f"whole validation split ({count} tokens, {chars} characters): best weights (step {best_step}) "
              f"{final['best_val_bpc']:.4f} bits/char, last (step {step}) {final['val_bpc']:.4f} bits/char"
              + speed + (f", MFU {final['mfu']:.1%}" if "mfu" in final else ""))  # fmt: skip
    return final


def resume_command(argv: list[str]) -> str:
    """The command line that continues this run."""
    world = int(os.environ.get("WORLD_SIZE", 1))
    script = os.path.relpath(__file__) if not os.path.relpath(__file__).startswith("..") else __file__
    launcher = ["torchrun", "--standalone", f"--nproc_per_node={world}"] if world > 1 else ["python"]
    return shlex.join(launcher + [script] + [a for a in argv if a != "--resume"] + ["--resume"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], epilog="Overrides: --section.key=value, e.g. --train.lr=3e-4", allow_abbrev=False
    )
    parser.add_argument("--config", default="configs/small.toml", help="TOML run config (default: configs/small.toml)")
    parser.add_argument("--out", help="run directory (default: runs/<config file stem>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --out from its last/ checkpoint")
    args, overrides = parser.parse_known_args(argv)
    try:
        cfg = load_config(args.config, overrides)
        out_dir = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
        result = train(cfg, out_dir, args.resume, command=resume_command(argv))
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except TrainingDiverged as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("error: aborted by a second Ctrl-C without saving; --resume continues from the last checkpoint", file=sys.stderr)
        return 130
    return result.get("exit_code", 0)


if __name__ == "__main__":
    sys.exit(main())
