"""How the weights are doing during training: fixed-batch loss estimates and a short sample.

    losses = evaluate(model, data_dir, cfg.train, "cpu")                     # {"train": .., "val": ..}
    text = sample_text(model, tokenizer, eot_id, 48, "cpu")

The exact loss of a whole split (the run's final `val_bpc`) is `model.nll.stream_nll`, the same function
as `generate.py --score`.

Evaluation never draws from the training RNGs (its batches and samples use their own seeded
generators), so evaluating does not change what an exactly resumed run computes.
"""

import contextlib
from pathlib import Path

import torch
import torch.distributed as dist

from data.loader import BatchLoader
from model.sampling import generate

EVAL_SEED = 1234  # fixed: every evaluation sees the same batches, so evaluations compare like with like


@torch.no_grad()
def evaluate(model, data_dir: Path, tc, device, autocast=None, rank: int = 0, world: int = 1) -> dict:
    """Mean loss over tc.eval_iters batches (of tc.batch_size) of each split, the same batches every time."""
    was_training, out = model.training, {}
    model.eval()
    for split in ("train", "val"):
        loader = BatchLoader(data_dir / f"{split}.bin", model.config.block_size, tc.batch_size, EVAL_SEED, device, rank)
        losses = torch.zeros(tc.eval_iters, device=device)
        for i in range(tc.eval_iters):
            x, y = loader.next_batch()
            with autocast or contextlib.nullcontext():
                losses[i] = model(x, y)[1]
        mean = losses.mean()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        out[split] = mean.item()
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
