"""Attention: a short reference to read and check by hand, and the causal self-attention layer.

`scaled_dot_product_attention(q, k, v)` is the textbook formula, returning the weights too; it is
built from `attention_scores` (q kᵀ / √d) and `masked_softmax` (masked keys -inf, then softmax).
`CausalSelfAttention` is the layer inside each block. By default it calls PyTorch's fused kernel
(`F.scaled_dot_product_attention`, flash/efficient kernels on GPU); with `need_attn=True` it takes the
explicit path through those two steps, returns the weights, and hands every intermediate tensor to
`self.probe`, a no-op module that forward hooks can read (inspection/trace.py does, to explain a head).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from model.dropout import Dropout


def causal_mask(Tq: int, Tk: int, device=None) -> torch.Tensor:
    """Bool (Tq, Tk), True where a query may attend: the queries are the LAST Tq of the Tk positions.

    Aligned bottom-right, so query i sits at position Tk - Tq + i and sees keys 0..Tk-Tq+i
    (`is_causal=True` in PyTorch aligns top-left, which is only right when Tq == Tk).
    """
    return torch.ones(Tq, Tk, dtype=torch.bool, device=device).tril(diagonal=Tk - Tq)


def attention_scores(q, k) -> torch.Tensor:
    """q (..., Tq, d), k (..., Tk, d) -> q kᵀ / √d (..., Tq, Tk): the scores before any mask."""
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def masked_softmax(scores, allowed) -> torch.Tensor:
    """Scores where `allowed` (bool, broadcasting) is False become -inf, then each row is softmaxed."""
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)


def scaled_dot_product_attention(q, k, v, causal=False, mask=None):
    """Reference attention: returns `(y, att)` with att = softmax(q kᵀ / sqrt(d)) and y = att v.

    q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv); any leading batch/head axes.
    `mask` is a bool "may attend" tensor broadcasting to (..., Tq, Tk); `causal=True` adds
    `causal_mask(Tq, Tk)`. Masked scores become -inf BEFORE the softmax, so the allowed weights of
    each row sum to 1 (a row with nothing allowed would be NaN).
    """
    scores = attention_scores(q, k)  # (..., Tq, Tk)
    allowed = torch.ones((), dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed & causal_mask(q.size(-2), k.size(-2), q.device)
    if mask is not None:
        allowed = allowed & mask
    att = masked_softmax(scores, allowed)  # (..., Tq, Tk)
    y = att @ v  # (..., Tq, dv)
    return y, att


class Probe(nn.Module):
    """Does nothing. The explicit path calls it with its tensors as keyword arguments, so a forward hook
    (`register_forward_hook(hook, with_kwargs=True)`) reads the model's own q, k, v, scores, ... ."""

    def forward(self, **tensors) -> None:
        return None


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with one fused Q·K·V projection and an optional KV cache."""

    def __init__(self, config, layer: int = 0):
        super().__init__()
        self.layer = layer  # which slot of a KVCache this layer writes
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # W_Q, W_K, W_V
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)  # W_O
        self.attn_dropout = Dropout(config.dropout)
        self.resid_dropout = Dropout(config.dropout)
        self.probe = Probe()  # no parameters: checkpoints are unchanged

    def forward(self, x, kv_cache=None, need_attn: bool = False):
        """x: (B, T, C) -> `(y, att)`; att (B, nh, Tq, Tk) on the explicit path, else None.

        With a KVCache, k and v are written at `kv_cache.pos` and the queries attend over the whole
        cached prefix, so Tk = pos + T (the model advances the cache after its last layer).
        """
        B, T, C = x.shape
        qkv = self.c_attn(x).view(B, T, 3, self.n_head, C // self.n_head)  # (B, T, 3, nh, hs)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, nh, T, hs), views: no copy
        if kv_cache is not None:
            k, v = kv_cache.update(self.layer, k, v)  # (B, nh, Tk, hs)
        Tq, Tk = T, k.size(2)

        # explicit path, for inspection: the textbook steps, one by one; and for training with dropout on a
        # CPU, where the fused kernel would draw its mask with bernoulli_ (model/dropout.py says why not)
        if need_attn or (self.training and self.dropout > 0 and x.device.type == "cpu"):
            scores = attention_scores(q, k)  # (B, nh, Tq, Tk), before the mask
            att = masked_softmax(scores, causal_mask(Tq, Tk, x.device))  # (B, nh, Tq, Tk)
            heads = self.attn_dropout(att) @ v  # (B, nh, Tq, hs); dropout acts on the weights
            out = self.resid_dropout(self.c_proj(heads.transpose(1, 2).reshape(B, T, C)))  # (B, T, C)
            self.probe(x=x, q=q, k=k, v=v, scores=scores, att=att, y=heads, out=out)
            return out, att if need_attn else None
        # fast path; a single query may see every cached key, so it needs no mask
        mask = None if Tq in (1, Tk) else causal_mask(Tq, Tk, x.device)
        p = self.dropout if self.training else 0.0
        if q.dtype == torch.bfloat16 and q.device.type == "cpu":
            # PyTorch's CPU kernel is up to 2.5x slower in bf16 than in fp32 at these shapes (forward and
            # backward; docs/speed.md), and fp32 is the more exact; CPU autocast would cast it back to bf16
            with torch.autocast("cpu", enabled=False):
                y = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask, dropout_p=p,
                                                   is_causal=(Tq == Tk)).to(q.dtype)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p, is_causal=(Tq == Tk))
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, nh * hs)
        return self.resid_dropout(self.c_proj(y)), None
