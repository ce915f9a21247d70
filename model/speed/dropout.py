"""Dropout as nn.Dropout computes it, with a mask that is cheaper to draw on a CPU: the speed layer's.

On a CPU, torch draws nn.Dropout's mask with `bernoulli_`, one call of its random generator per element, a
large share of a training step with dropout (docs/speed.md). Here the
mask comes from 64-bit random words, four 15-bit draws to a word, an element kept when its draw is at
least p x 32768: the same Bernoulli keep mask, p rounded to 1/32768, at about a quarter of the cost.
Kept values are scaled by 1 / (1 - p) with p as rounded, so the expectation stays exact. Elsewhere (a
GPU, whose random generator is fast, the speed layer leaves nn.Dropout in place); in eval mode and at
p = 0 it is nn.Dropout itself.
"""

import torch
from torch import nn

LEVELS = 1 << 15  # the draws are 15 bits: random_() leaves the top bit of an int64 at 0


def keep_mask(shape, p: float, device) -> tuple[torch.Tensor, float]:
    """(bool mask of `shape`, True with probability 1 - p', the p' = round(p x 32768) / 32768 it used)."""
    n = torch.Size(shape).numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_()  # uniform in [0, 2^63)
    draws = words.view(torch.int16)[:n] & (LEVELS - 1)  # 4 per word, each uniform in [0, 2^15)
    cut = round(p * LEVELS)
    return (draws >= cut).view(shape), cut / LEVELS


class CheapDropout(nn.Dropout):
    def forward(self, x):
        if not self.training or self.p == 0:
            return super().forward(x)
        keep, p = keep_mask(x.shape, self.p, x.device)
        return x * (keep.to(x.dtype) / (1 - p)) if p < 1 else x * 0
