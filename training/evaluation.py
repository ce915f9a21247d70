"""How the weights are doing during training: loss estimates and a short sample.

    losses = evaluate(model, data_dir, cfg.train, "cpu")    # {"train": .., "val": .., "tokens": ..}
    text = sample_text(model, tokenizer, eot_id, 48, "cpu")

Each split's estimate is the mean loss of the same eval_iters batches every time. A validation split small
enough that reading it whole costs no more than those batches is scored exactly instead, with
`model.nll.stream_nll`: the run's final `val_bpc` and `generate.py --score` use the same function. Then
best/ is chosen by the very number the run is billed by, not an estimate of it. That is the case of the
built-in corpus (4,904 validation tokens, 9,728 read against 20,480 for the batches).

Evaluation never draws from the training RNGs (its batches and samples use their own seeded
generators), so evaluating does not change what an exactly resumed run computes.
"""

import contextlib
from pathlib import Path

import torch
import torch.distributed as dist

from data.loader import BatchLoader
from model.nll import stream_nll, windows_read
from model.sampling import generate

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


def sample_text(model, tokenizer, eot_id: int, n_tokens: int, device) -> str:
    """A short seeded sample starting from <|endoftext|>, the way every document starts."""
    was_training = model.training
    model.eval()
    idx = torch.full((1, 1), eot_id, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(EVAL_SEED)
    out = generate(model, idx, n_tokens, temperature=0.8, top_k=50, generator=generator)
    model.train(was_training)
    return tokenizer.decode(out[0, 1:].tolist()).replace("\n", " ⏎ ")
