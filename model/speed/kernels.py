"""The faster kernels of a training step, chosen once for the model's device: attention and dropout.

`FastCausalSelfAttention` is model/attention.py's layer, its parameters and steps unchanged, except that
its `combine` (what the layer calls when nobody asks for the attention) hands q, k, v to `self.kernel` instead
of taking the textbook steps one by one; `kernel_for` picks the kernel when the speed layer is put on
(model/speed/__init__.py). Every kernel returns the same numbers as the textbook steps, up to rounding; they
differ only in speed (docs/speed.md). With `need_attn=True` the layer's forward (model/attention.py) takes the
textbook steps and never calls `combine`, so inspection sees them and runs no code of this file.

`CheapDropout` is nn.Dropout as it computes, with a mask that is cheaper to draw on a CPU. There torch draws
nn.Dropout's mask with `bernoulli_`, one call of its random generator per element, a large share of a training
step with dropout (docs/speed.md). Here the mask comes from 64-bit random words, four 15-bit draws to a word, an
element kept when its draw is at least p x 32768: the same Bernoulli keep mask, p rounded to 1/32768, at about a
quarter of the cost, but not the same draws: a run with dropout takes other masks with the speed layer than
without it (the same distribution). Kept values are scaled by 1 / (1 - p) with p as rounded, so the expectation
stays exact. A GPU's random generator is fast, so there the speed layer leaves nn.Dropout in place; in eval mode
and at p = 0 it is nn.Dropout itself.
"""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from model.attention import CausalSelfAttention

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


def causal_fused(q, k, v, dropout_p: float, attend: Callable) -> torch.Tensor:
    """PyTorch's fused kernel (flash or memory-efficient on a GPU). (B, nh, Tq, hs) -> (B, nh, Tq, hs).

    The queries are the last Tq of the Tk positions. A full square is `is_causal`, and a single query may
    see every cached key, so neither needs a mask tensor; a chunk of queries after cached keys needs the
    bottom-right mask that `is_causal` (top-left) does not give: it takes the textbook steps."""
    Tq, Tk = q.size(2), k.size(2)
    if Tq not in (1, Tk):
        return attend(q, k, v)[0]
    return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=(Tq == Tk))


def gpu_attention(q, k, v, dropout_p: float, attend: Callable) -> torch.Tensor:
    """A GPU (or MPS): the fused kernel in the precision it is given; its dropout is cheap there."""
    return causal_fused(q, k, v, dropout_p, attend)


def causal_bias(Tq: int, Tk: int, dtype, device) -> torch.Tensor:
    """(Tq, Tk): 0 where a query may attend, -inf where it may not; `causal_mask` as a term to add to the
    scores (the same bottom-right alignment: query i sees keys 0..Tk-Tq+i)."""
    return torch.full((Tq, Tk), float("-inf"), dtype=dtype, device=device).triu_(Tk - Tq + 1)


# bf16 on a CPU without dropout: the few-pass steps up to this many keys, the fused kernel beyond (docs/speed.md)
FEW_PASS_MAX_KEYS = 512


def few_pass_attention(q, k, v, dropout_p: float) -> torch.Tensor:
    """The textbook steps, dropout on the weights included, in fewer passes over the (Tq, Tk) scores: the
    scale 1/√d and the mask ride in one `baddbmm` (no separate division and masked_fill, nor their backward),
    and dropout's 1/(1 - p) is applied after the product with v, to Tq x hs numbers instead of Tq x Tk. The
    mask is `keep_mask`'s, drawn for the same shape, so the numbers are the layer's own steps' up to
    rounding. (B, nh, Tq, hs) -> (B, nh, Tq, hs)."""
    B, nh, Tq, hs = q.shape
    Tk = k.size(2)
    scores = torch.baddbmm(causal_bias(Tq, Tk, q.dtype, q.device), q.reshape(B * nh, Tq, hs),
                           k.reshape(B * nh, Tk, hs).transpose(1, 2), alpha=1 / math.sqrt(hs))  # (B*nh, Tq, Tk)
    if dropout_p == 0:
        return torch.bmm(scores.softmax(dim=-1), v.reshape(B * nh, Tk, -1)).view(B, nh, Tq, -1)
    keep, p = keep_mask(scores.shape, dropout_p, q.device)
    if p >= 1:  # every weight dropped
        return q.new_zeros(B, nh, Tq, v.size(-1))
    dropped = scores.softmax(dim=-1) * keep.to(scores.dtype)  # the weights, 0 where dropped, not yet rescaled
    return (torch.bmm(dropped, v.reshape(B * nh, Tk, -1)) * (1 / (1 - p))).view(B, nh, Tq, -1)


def cpu_attention(q, k, v, dropout_p: float, attend: Callable) -> torch.Tensor:
    """A CPU, each choice the faster one in whole train steps (docs/speed.md). With dropout, the few-pass
    steps, whose dropout draws its mask the cheap way (the fused kernel would draw it with bernoulli_;
    `CheapDropout` says why not). Without, in fp32 the fused kernel; in bf16 the few-pass steps up to
    FEW_PASS_MAX_KEYS keys (PyTorch's kernel is slower in bf16 than they are at these lengths), the fused
    kernel in bf16 beyond (its blocks pay off on long rows)."""
    if dropout_p > 0 or (q.dtype == torch.bfloat16 and k.size(2) <= FEW_PASS_MAX_KEYS):
        return few_pass_attention(q, k, v, dropout_p)
    return causal_fused(q, k, v, 0.0, attend)


def kernel_for(device: torch.device) -> Callable:
    """The attention computation for a layer whose weights live on `device`."""
    return cpu_attention if device.type == "cpu" else gpu_attention


class FastCausalSelfAttention(CausalSelfAttention):
    """model/attention.py's layer with `self.kernel` (set by the speed layer) in place of the textbook steps."""

    kernel: Callable = staticmethod(cpu_attention)

    def combine(self, q, k, v):
        """y (B, nh, T, hs) by the kernel; the layer's forward with `need_attn=True` takes the textbook steps and
        never comes here."""
        return self.kernel(q, k, v, self.dropout if self.training else 0.0, self.attend)
