"""Attention: a short reference to read and check by hand, and the causal self-attention layer.

`reference_attention(q, k, v)` is the textbook formula, returning the attention too; it is built from
`attention_scores` (q kᵀ / √d) and `masked_softmax` (masked keys -inf, then softmax).
`CausalSelfAttention` is the layer inside each block, and it takes those steps one by one (`attend`), in
training, in decoding and in inspection alike. With `need_attn=True` it also returns the attention and
hands every intermediate tensor to `self.probe`, a no-op module that forward hooks can read
(inspection/trace.py does, to explain a head). The speed layer (model/speed/) can put a faster computation
of the same numbers in place of `combine`, for the whole model at once; `need_attn=True` never calls it.
"""

import math

import torch
from torch import nn


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


def reference_attention(q, k, v, causal=False, mask=None):
    """Reference attention: returns `(y, att)` with att = softmax(q kᵀ / sqrt(d)) and y = att v.

    q: (..., Tq, d), k: (..., Tk, d), v: (..., Tk, dv); any leading batch/head axes.
    `mask` is a bool "may attend" tensor broadcasting to (..., Tq, Tk); `causal=True` adds
    `causal_mask(Tq, Tk)`. Masked scores become -inf BEFORE the softmax, so each row's attention
    over its allowed keys sums to 1 (a row with nothing allowed would be NaN).
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
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.probe = Probe()  # no parameters: checkpoints are unchanged

    def split_heads(self, x, kv_cache=None):
        """x (B, T, C) -> q, k, v: q (B, nh, T, hs); k, v (B, nh, Tk, hs), every key so far with a cache."""
        B, T, C = x.shape
        qkv = self.c_attn(x).view(B, T, 3, self.n_head, C // self.n_head)  # (B, T, 3, nh, hs)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, nh, T, hs), views: no copy
        if kv_cache is not None:
            k, v = kv_cache.update(self.layer, k, v)  # (B, nh, Tk, hs), Tk = pos + T
        return q, k, v

    def attend(self, q, k, v):
        """The textbook steps, one by one: (B, nh, Tq, hs) -> `(y, scores, att)`, y (B, nh, Tq, hs)."""
        scores = attention_scores(q, k)  # (B, nh, Tq, Tk), before the mask
        att = masked_softmax(scores, causal_mask(q.size(2), k.size(2), q.device))  # (B, nh, Tq, Tk)
        y = self.attn_dropout(att) @ v  # (B, nh, Tq, hs); in training dropout zeroes some of the attention
        return y, scores, att

    def combine(self, q, k, v):
        """y alone, when nobody asks for the attention: the textbook steps. This is the one method the speed layer
        replaces (a faster kernel of the same numbers), so a forward that asks for the attention runs this file."""
        return self.attend(q, k, v)[0]

    def merge_heads(self, y):
        """y (B, nh, T, hs) -> out (B, T, C): the heads side by side, then W_O."""
        B, nh, T, hs = y.shape
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, nh * hs)))  # (B, T, C)

    def forward(self, x, kv_cache=None, need_attn: bool = False):
        """x: (B, T, C) -> `(out, att)`; att (B, nh, Tq, Tk) when `need_attn`, else None.

        With a KVCache, k and v are written at `kv_cache.pos` and the queries attend over the whole
        cached prefix, so Tk = pos + T (the model advances the cache after its last layer).
        """
        q, k, v = self.split_heads(x, kv_cache)
        if not need_attn:
            return self.merge_heads(self.combine(q, k, v)), None
        y, scores, att = self.attend(q, k, v)
        out = self.merge_heads(y)
        self.probe(x=x, q=q, k=k, v=v, scores=scores, att=att, y=y, out=out)  # inspection: hooks read these
        return out, att
