"""How the weights are doing during training: loss estimates, a short sample and every head's role scores.

    losses = evaluate(model, data_dir, cfg.train, "cpu")    # {"train": .., "val": .., "tokens": ..}
    text = sample_text(model, tokenizer, eot_id, 48, "cpu")
    final, best_dir = final_scores(model, data_dir, meta, run_dir, step)   # the run's end: best/ and last/
    heads = score_heads(model, data_dir, meta, tokenizer)       # every head's role scores, for metrics.jsonl

Each split's estimate is the mean loss of the same eval_iters batches every time. A validation split small
enough that reading it whole costs no more than those batches is scored exactly instead, with
`model.nll.stream_nll`: the run's final `val_bpc` and `generate.py --score` use the same function. Then
best/ is chosen by the very number the run is billed by, not an estimate of it. That is the case of the
built-in corpus (4,904 validation tokens, 9,728 read against 20,480 for the batches).

The head scores are `generate.py --heads`'s (inspection/heads.py) on the validation split, computed in
float32 outside autocast, so a checkpoint of the same weights gives the same numbers with `--heads`.

Evaluation never draws from the training RNGs (its batches and samples use their own seeded
generators), so evaluating does not change what an exactly resumed run computes.
"""

import contextlib
import time
from pathlib import Path

import torch
import torch.distributed as dist

from data.loader import BatchLoader, load_tokens
from data.tokenizer import ordinary_ids
from model.nll import bits_per_char, stream_nll, windows_read
from inspection.heads import measure_heads, roles_record
from model.errors import UserError
from model.sampling import generate
from storage.checkpoint import checkpoint_step, load_model

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


def score_heads(model, data_dir: Path, meta: dict, tokenizer) -> dict | None:
    """Every head's role scores on the validation split (`inspection.heads.roles_record`) and the "seconds"
    they took, or None for a model whose context is too short to measure them."""
    started, was_training = time.perf_counter(), model.training
    model.eval()
    try:
        roles = measure_heads(model, load_tokens(data_dir / "val.bin", meta["dtype"]),
                              ordinary_ids(tokenizer, model.config.vocab_size), meta["eot_id"])
    except UserError:  # fewer than 5 positions: no two copies of 2 random tokens fit
        return None
    finally:
        model.train(was_training)
    return roles_record(roles) | {"seconds": round(time.perf_counter() - started, 3)}


def sample_text(model, tokenizer, eot_id: int, n_tokens: int, device) -> str:
    """A short seeded sample starting from <|endoftext|>, the way every document starts."""
    was_training = model.training
    model.eval()
    idx = torch.full((1, 1), eot_id, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(EVAL_SEED)
    out = generate(model, idx, n_tokens, temperature=0.8, top_k=50, generator=generator)
    model.train(was_training)
    return tokenizer.decode(out[0, 1:].tolist()).replace("\n", " ⏎ ")


def final_scores(model, data_dir: Path, meta: dict, run_dir: Path, step: int, rank: int = 0,
                 world: int = 1) -> tuple[dict, Path]:
    """The exact loss and bits per character of the whole validation split, for the weights in last/ (`model`,
    at `step`) and in best/ (the step its own config.json names, whatever the run's counters say); and the
    directory of the best weights."""
    val_tokens, chars = load_tokens(data_dir / "val.bin", meta["dtype"]), meta["splits"]["val"]["chars"]
    nll, count = stream_nll(model, val_tokens, rank=rank, world=world)
    best_dir = run_dir / "best"
    best_step = checkpoint_step(best_dir)
    if best_step is None:  # no best/ to score: last/ is the best there is
        best_dir, best_step = run_dir / "last", step
    if best_step == step:  # last/ and best/ of the same step hold the same weights
        best_nll = nll
    else:
        best_nll = stream_nll(load_model(best_dir, model.tok_emb.weight.device), val_tokens, rank=rank, world=world)[0]
    final = {"kind": "final", "step": step, "val_loss": nll / count, "val_bpc": bits_per_char(nll, chars),
             "best_step": best_step, "best_val_loss": best_nll / count, "best_val_bpc": bits_per_char(best_nll, chars),
             "val_tokens_predicted": count, "val_chars": chars}  # fmt: skip
    return final, best_dir
