"""The negative log-likelihood of a token stream and its bits per character: the one rule behind training's
final evaluation (`val_bpc`) and `generate.py --score`.

    nll, count = stream_nll(model, ids)        # nats summed over ids[1:], and how many were predicted
    bits_per_char(nll, n_chars)

A stream longer than the context is read in windows of T = min(block_size, n - 1) tokens that start every
`stride` tokens (default T // 2); the last window ends at the last token. Each window predicts only the
targets no earlier window predicted, so every token but the first is predicted exactly once, and every
prediction after the first window sees at least T - stride tokens of context. Under DDP each rank takes
every world-th window and the totals are summed.
"""

import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from cli.errors import ModelInputError
from model.memory import available_bytes

# Logits (W x T x V numbers) per forward pass. On a CPU a batch whose logits stay in cache is the fastest, and
# about as fast as a training evaluation's batches, so the reserve a time budget keeps for the final scoring
# (timed on those) holds (docs/speed.md). An accelerator wants large batches: on CUDA as many windows as a share
# of its free memory holds, each costing its logits three times in fp32 (the logits, their fp32 copy, the
# log-softmax); on MPS, whose free memory torch does not say, 2**26 fp32 logits (256 MiB).
CPU_LOGITS_PER_BATCH, ACCELERATOR_LOGITS_PER_BATCH = 2**22, 2**26
LOGIT_COPIES, FREE_SHARE = 3, 0.5  # the rest of the free memory for the forward's own activations


def windows_per_batch(T: int, vocab_size: int, device: torch.device) -> int:
    """How many windows of T tokens one forward pass scores on `device` (at least 1), bounded by their logits."""
    if device.type == "cuda":
        return max(1, int(FREE_SHARE * available_bytes(device)) // (LOGIT_COPIES * 4 * T * vocab_size))
    logits = CPU_LOGITS_PER_BATCH if device.type == "cpu" else ACCELERATOR_LOGITS_PER_BATCH
    return max(1, logits // (T * vocab_size))


def windows(n_tokens: int, block_size: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Start of each window over n_tokens tokens, and the first target position it predicts.

    Window s reads tokens [s, s + T) and predicts positions [s + 1, s + T], T = min(block_size, n_tokens - 1),
    counting only positions from `first[i]` on.
    """
    T = min(block_size, n_tokens - 1)
    starts = torch.tensor(list(range(0, n_tokens - 1 - T, stride)) + [n_tokens - 1 - T])
    first = torch.cat([torch.tensor([1]), starts[:-1] + T + 1])  # one past the previous window's last target
    return starts, first


def windows_read(n_tokens: int, block_size: int) -> int:
    """Tokens the model reads to score a stream of n_tokens at the default stride (about twice n_tokens)."""
    T = min(block_size, n_tokens - 1)
    return len(windows(n_tokens, block_size, default_stride(block_size, n_tokens))[0]) * T


def default_stride(block_size: int, n_tokens: int) -> int:
    return max(1, min(block_size, n_tokens - 1) // 2)


@torch.no_grad()
def stream_nll(model, ids, stride: int | None = None, rank: int = 0, world: int = 1, progress=None) -> tuple[float, int]:
    """Summed NLL (nats) of ids[1:], each given the tokens before it (module docstring), and the count.

    `ids`: a list, numpy array or tensor of token ids. `progress(n)` is called with the targets of each batch.
    """
    was_training, device = model.training, model.tok_emb.weight.device
    model.eval()
    seq = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=device)
    n, block_size = len(seq), model.config.block_size
    T = min(block_size, n - 1)
    stride = default_stride(block_size, n) if stride is None else stride
    if not 1 <= stride <= T:
        raise ModelInputError(f"stride {stride} must be between 1 and {T} (the window length)")
    starts, first = windows(n, block_size, stride)
    starts, first = starts[rank::world].to(device), first[rank::world].to(device)
    offsets = torch.arange(T, device=device)
    dtype = torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64
    total = torch.zeros(2, dtype=dtype, device=device)  # nll, count
    per_batch = windows_per_batch(T, model.config.vocab_size, device)
    for i in range(0, len(starts), per_batch):
        pos = starts[i : i + per_batch, None] + offsets                       # (W, T) input positions
        x, y = seq[pos], seq[pos + 1]                                          # (W, T)
        y = y.masked_fill(pos + 1 < first[i : i + per_batch, None], -1)       # an earlier window predicted it
        logits, _ = model(x, all_logits=True)                                  # (W, T, V)
        losses = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=-1, reduction="none")
        total[0] += losses.to(dtype).sum()  # summed in float64, so the batching does not change the result
        total[1] += (y >= 0).sum()
        if progress is not None:
            progress(int((y >= 0).sum()))
    if world > 1:
        dist.all_reduce(total)
    model.train(was_training)
    return total[0].item(), int(total[1].item())


def bits_per_char(nll: float, chars: int) -> float:
    """Nats summed over a text -> bits per character of that text (comparable across tokenizers)."""
    return nll / math.log(2) / chars
