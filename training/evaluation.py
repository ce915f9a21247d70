"""How good the weights are: fixed-batch loss estimates, the exact loss of a whole split, a sample.

    losses = evaluate(model, data_dir, cfg.train, "cpu")                     # {"train": .., "val": ..}
    nll, count = split_nll(model, load_tokens(data_dir / "val.bin", "uint16"), batch_size=16, device="cpu")
    bits_per_char = nll / math.log(2) / meta["splits"]["val"]["chars"]

Evaluation never draws from the training RNGs (its batches and samples use their own seeded
generators), so evaluating does not change what an exactly resumed run computes.
"""

import contextlib
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

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


@torch.no_grad()
def split_nll(model, tokens: np.ndarray, batch_size: int, device, rank=0, world=1, stride=0) -> tuple[float, int]:
    """Total NLL (nats) of every token of `tokens` but the first, each predicted exactly once.

    Windows of block_size tokens start every `stride` tokens (default block_size); each counts only the
    targets no earlier window counted, so every prediction after the first window has block_size - stride
    or more tokens of context. The last window ends at the last token.
    """
    was_training, n = model.training, len(tokens)
    model.eval()
    T = min(model.config.block_size, n - 1)
    starts = list(range(0, n - T, min(stride or T, T)))  # window at s: inputs tokens[s : s+T], targets [s+1 : s+T+1]
    starts += [n - 1 - T] if starts[-1] != n - 1 - T else []
    windows, done = [], 0  # done: the last target index counted so far
    for s in starts:
        windows.append((s, done - s))  # skip the targets s+1 .. done, already counted
        done = s + T
    dtype = torch.float32 if torch.device(device).type == "mps" else torch.float64  # MPS has no float64
    total = torch.zeros(2, dtype=dtype, device=device)  # nll, count
    mine = windows[rank::world]
    for i in range(0, len(mine), batch_size):
        batch = mine[i : i + batch_size]
        chunk = torch.from_numpy(np.stack([tokens[s : s + T + 1] for s, _ in batch]).astype(np.int64))  # (b, T+1)
        x, y = chunk[:, :-1].to(device), chunk[:, 1:].clone()
        for row, (_, skip) in enumerate(batch):
            y[row, :skip] = -1
        y = y.to(device)
        logits = model(x, all_logits=True)[0]  # (b, T, V)
        total[0] += F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=-1, reduction="sum")
        total[1] += (y >= 0).sum()
    if world > 1:
        dist.all_reduce(total)
    model.train(was_training)
    return total[0].item(), int(total[1].item())


def sample_text(model, tokenizer, eot_id: int, n_tokens: int, device) -> str:
    """A short seeded sample starting from <|endoftext|>, the way every document starts."""
    was_training = model.training
    model.eval()
    idx = torch.full((1, 1), eot_id, dtype=torch.long, device=device)
    generator = torch.Generator(device=device).manual_seed(EVAL_SEED)
    out = generate(model, idx, n_tokens, temperature=0.8, top_k=50, generator=generator)
    model.train(was_training)
    return tokenizer.decode(out[0, 1:].tolist()).replace("\n", " ⏎ ")
