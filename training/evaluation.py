"""How the weights are doing during training: loss estimates, a short sample and every head's role scores.

    losses = evaluate(model, data_dir, cfg.train, "cpu")    # {"train": .., "val": .., "tokens": ..}
    text = sample_text(model, tokenizer, eot_id, 48, "cpu")
    final, best_dir = final_scores(model, prepared, tokenizer, run_dir, step)   # the run's end: best/ and last/
    print(final_report(final, best_dir, run_dir, last_heads, lesson=True))   # bits/char, best/'s copying circuit
    heads = score_heads(model, data_dir, meta, tokenizer)       # every head's role scores, for metrics.jsonl
                                                                # (heads kept off: "off", their scores null)

Each split's estimate is the mean loss of the same eval_iters batches every time. A validation split small
enough that reading it whole costs no more than those batches is scored exactly instead, with
`model.nll.stream_nll`: the run's final `val_bpc` and `generate.py --score` use the same function. Then
best/ is chosen by the very number the run is billed by, not an estimate of it. That is the case of the
built-in corpus (4,904 validation tokens, 9,728 read against 20,480 for the batches).

The head scores are `generate.py --heads`'s (inspection/views/roles.py) on the validation split, computed in
float32 outside autocast, so a checkpoint of the same weights gives the same numbers with `--heads`.

Evaluation never draws from the training RNGs (its batches and samples use their own seeded
generators), so evaluating does not change what an exactly resumed run computes.
"""

import contextlib
import math
import shlex
import time
from pathlib import Path

import torch
import torch.distributed as dist

from cli.messages import messages
from data.loader import BatchLoader, load_tokens
from data.token_bytes import token_bytes
from data.tokenizer import ordinary_ids
from model.nll import bits_per_char, stream_nll, windows_read
from common.heads_off import head_means
from inspection.heldout import WINDOW, WINDOWS, held_out_windows
from inspection.views.roles import (DROP_FORMED, FORMED, SEQUENCES, Circuit, copying_circuit, head_importance,
                                    marked_off, measure_heads, roles_from_record, roles_record)
from cli.errors import UserError
from inspection.views.words import word_start_ids
from model.sampling import generate
from model.speed import is_sped_up, speed_up
from storage.checkpoint import checkpoint_step, load_kept_off, load_model

EVAL_SEED = 1234  # fixed: every evaluation sees the same batches, so evaluations compare like with like


@torch.no_grad()
def evaluate(model, data_dir: Path, tc, device, autocast=None, rank: int = 0, world: int = 1) -> dict:
    """Mean loss over tc.eval_iters batches (of tc.batch_size) of each split, the same batches every time,
    or the exact loss of a small validation split; "tokens": how many tokens this rank ran through the model."""
    was_training, block_size, out = model.training, model.config.block_size, {"tokens": 0}
    batches = tc.eval_iters * tc.batch_size * block_size
    model.eval()
    for split in ("train", "val"):
        loader = BatchLoader(data_dir / f"{split}.bin", block_size, tc.batch_size, EVAL_SEED, device, rank)
        # the validation split read whole: this rank's share of a scoring, counted only for that split
        if split == "val" and (read := windows_read(len(loader.tokens), block_size) // world) <= batches:
            nll, count = stream_nll(model, loader.tokens, rank=rank, world=world)  # summed over the ranks
            out[split], out["tokens"] = nll / count, out["tokens"] + read
            continue
        losses = torch.zeros(tc.eval_iters, device=device)
        for i in range(tc.eval_iters):
            x, y = loader.next_batch()
            with autocast or contextlib.nullcontext():
                losses[i] = model(x, y)[1]
        mean = losses.mean()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        out[split], out["tokens"] = mean.item(), out["tokens"] + batches
    model.train(was_training)
    return out


def score_heads(model, data_dir: Path, meta: dict, tokenizer, importance: bool = False, kept=None) -> dict | None:
    """Every head's role scores on the validation split (`inspection.views.roles.roles_record`) and the "seconds"
    they took, or None for a model whose context is too short to measure them. `importance`: what switching
    each head off alone costs too (inspection/views/roles.py: L x H forwards more: `head_costs_due` says when)."""
    started, was_training = time.perf_counter(), model.training
    model.eval()
    val, usable = load_tokens(data_dir / "val.bin", meta["dtype"]), ordinary_ids(tokenizer, model.config.vocab_size)
    try:
        starts = word_start_ids(token_bytes(tokenizer, model.config.vocab_size))
        roles = measure_heads(model, val, usable, meta["eot_id"], word_starts=starts)
        if importance:
            means = head_means(model, held_out_windows(model, val))
            roles.importance = head_importance(model, val, usable, meta["eot_id"], "mean", means)
    except UserError:  # fewer than 5 positions: no two copies of 2 random tokens fit
        return None
    finally:
        model.train(was_training)
    off = kept.off if kept is not None else {}  # train.heads_off: marked off, with no role or cost of their own
    return marked_off(roles_record(roles), off) | {"seconds": round(time.perf_counter() - started, 3)}


COSTS_SHARE = 0.1  # train.head_costs = "auto": at every evaluation while they cost at most this share of training


def cost_share(tc, c) -> float:
    """What the head costs take at an evaluation, against the training between two: the tokens of their forwards
    (each head off in turn, and none: the held-out windows and the repeated random tokens) over three times the
    tokens trained (a forward and a backward). The lesson run: 0.03; configs/small.toml's default run: 0.33 or more."""
    T = min(WINDOW, c.block_size)
    return (c.n_layer * c.n_head + 1) * (WINDOWS + SEQUENCES) * T / (3 * tc.eval_interval * tc.batch_size
                                                                     * tc.grad_accum * c.block_size)


def head_costs_due(tc, c, snapshot: bool) -> bool:
    """Whether this evaluation records what switching each head off costs (train.head_costs): always, never, or
    ("auto") when they are cheap (`cost_share`), else at the evaluations that take a snapshot (`snapshot`)."""
    if tc.head_costs != "auto":
        return bool(tc.head_costs)
    return snapshot or cost_share(tc, c) <= COSTS_SHARE


def measure_kept_off(kept, model, data_dir: Path, meta: dict) -> None:
    """train.heads_off = ... in "mean" mode (`kept`, a HeadsOff, or None): each kept-off head's mean output over
    the validation split's windows (the ones --heads and --ablate read), which the evaluation and every checkpoint
    saved until the next use."""
    if kept is not None:
        kept.measure(model, held_out_windows(model, load_tokens(data_dir / "val.bin", meta["dtype"])))


def copy_loss(heads: dict | None) -> float:
    """train.best_by = "copy_loss": the loss on the second copy of the head scores' repeated random tokens (a
    `score_heads` record), which only copying from the context lowers; inf when they could not be measured."""
    return math.inf if heads is None or heads["loss_second_copy"] is None else heads["loss_second_copy"]


def sample_text(model, tokenizer, eot_id: int, n_tokens: int, device) -> str:
    """A short seeded sample starting from <|endoftext|>, the way every document starts."""
    was_training = model.training
    model.eval()
    idx = torch.full((1, 1), eot_id, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(EVAL_SEED)
    out = generate(model, idx, n_tokens, temperature=0.8, top_k=50, generator=generator)
    model.train(was_training)
    return tokenizer.decode(out[0, 1:].tolist()).replace("\n", " ⏎ ")


def final_scores(model, prepared, tokenizer, run_dir: Path, step: int, rank: int = 0, world: int = 1,
                 kept=None) -> tuple[dict, Path]:
    """The exact loss and bits per character of the whole validation split, for the weights in last/ (`model`,
    at `step`) and in best/ (the step its own config.json names, whatever the run's counters say), with best/'s
    head scores and what switching each head off costs ("best_heads", `score_heads`, on rank 0); and the
    directory of the best weights. `prepared`: the run's data (data/prepare.py); `kept`: the heads `model` keeps off
    (train.heads_off)."""
    data_dir, meta = prepared.dir, prepared.meta
    val_tokens, chars = load_tokens(data_dir / "val.bin", meta["dtype"]), meta["splits"]["val"]["chars"]
    nll, count = stream_nll(model, val_tokens, rank=rank, world=world)
    best_dir = run_dir / "best"
    best_step = checkpoint_step(best_dir)
    if best_step is None:  # no best/ to score: last/ is the best there is
        best_dir, best_step = run_dir / "last", step
    best = model if best_step == step else load_model(best_dir, model.tok_emb.weight.device)  # same step, same weights
    if best is not model:
        kept = load_kept_off(best, best_dir)  # best/'s kept-off heads, giving what its evaluation measured
    if is_sped_up(model) and not is_sped_up(best):  # scored by the code the run trained with
        speed_up(best)
    best_nll = nll if best is model else stream_nll(best, val_tokens, rank=rank, world=world)[0]
    final = {"kind": "final", "step": step, "val_loss": nll / count, "val_bpc": bits_per_char(nll, chars),
             "best_step": best_step, "best_val_loss": best_nll / count, "best_val_bpc": bits_per_char(best_nll, chars),
             "val_tokens_predicted": count, "val_chars": chars,
             "best_heads": score_heads(best, data_dir, meta, tokenizer, True, kept) if rank == 0 else None}  # fmt: skip
    return final, best_dir


def final_report(final: dict, best_dir: Path, run_dir: Path, last_heads: dict | None, lesson: bool) -> str:
    """What a run prints at its end: the bits per character of best/ and last/, then `heads_line`."""
    say = messages()
    speed = say("train.final_speed", tokens_per_s=f"{final['tokens_per_s']:.0f}") if final.get("tokens_per_s") else ""
    lines = [say("train.final", tokens=final["val_tokens_predicted"], chars=final["val_chars"], best_dir=best_dir,
                 best_step=final["best_step"], best_bpc=f"{final['best_val_bpc']:.4f}", last_dir=run_dir / "last",
                 step=final["step"], bpc=f"{final['val_bpc']:.4f}", speed=speed)
             + (f", MFU {final['mfu']:.1%}" if "mfu" in final else ""),
             heads_line(final, run_dir, last_heads, lesson)]  # fmt: skip
    return "\n".join(line for line in lines if line)


def heads_line(final: dict, run_dir: Path, last_heads: dict | None, lesson: bool) -> str | None:
    """One line on the copying circuit of best/, the checkpoint every inspection command opens
    (`inspection.views.roles.copying_circuit`): formed; formed in last/ only; or not formed, with what to try
    when the run is a `lesson` (copy lessons). `last_heads`: the last evaluation's scores. None: no scores."""
    if not final.get("best_heads"):
        return None
    say = messages()
    circuit = copying_circuit(roles_from_record(final["best_heads"]))
    where, run = say("train.where_best", step=f"{final['best_step']:,}"), shlex.quote(str(run_dir))
    if circuit.formed:
        return say("train.heads_formed", where=where, circuit=describe_circuit(circuit), run=run)
    if last_heads and final["best_step"] != final["step"] and copying_circuit(roles_from_record(last_heads)).formed:
        return say("train.heads_last", where=where, step=f"{final['step']:,}",
                   last=shlex.quote(str(run_dir / "last")))
    return say("train.heads_none", where=where, circuit=describe_circuit(circuit), bar=FORMED,
               drop=f"{DROP_FORMED:g}", advice=say("train.heads_advice") if lesson else "")


def describe_circuit(circuit: Circuit) -> str:
    """"previous-token 0.69 at layer 0 head 2, induction 0.91 at layer 1 head 3, in-context loss drop 8.02 nats"."""
    say = messages()
    previous = say("train.circuit_no_layer") if circuit.previous is None else say(
        "train.circuit_previous", score=f"{circuit.previous[2]:.2f}", layer=circuit.previous[0], head=circuit.previous[1])
    return say("train.circuit", previous=previous, induction=f"{circuit.induction[2]:.2f}", ilayer=circuit.induction[0],
               ihead=circuit.induction[1], drop=f"{circuit.drop:.2f}")
