"""The one-token decoding step, the hot loop of cached generation, written without module calls.

    step = DecodeStep(model)              # binds the weights once per generate call
    logits = step(column, cache)          # column (B, 1) -> logits (B, V); writes position cache.pos

A step pushes one token per row through every layer: a handful of matrix-vector products, so at batch 1
on a CPU the Python and dispatch cost of ~20 module calls per layer rivals the arithmetic (a tiny
model spent most of its step there). This runs the operations of `Block.forward` with a KV cache (the
same LayerNorm, linear maps, attention and GELU, in the same order and precision) on tensors bound
once, with fewer, cheaper calls. `model(column, kv_cache=cache)` stays the readable reference: tests
check that both give the same logits, and sampling uses this step only for single-token steps of a
model in eval mode (no dropout).
"""

import torch
import torch.nn.functional as F


def linear_args(layer) -> tuple:
    """(bias, weightᵀ) for `torch.addmm(bias, x, weightᵀ)`: `layer(x)` without the module call and the
    transpose it makes each time. A layer without bias gets zeros (adding 0.0 changes no value)."""
    w = layer.weight
    return (w.new_zeros(w.size(0)) if layer.bias is None else layer.bias), w.t()


class DecodeStep:
    def __init__(self, model):
        c = model.config
        self.n_head, self.head_dim, self.eps = c.n_head, c.head_dim, c.layer_norm_eps
        self.shape = (c.n_embd,)  # normalized_shape of every LayerNorm
        self.tok_emb, self.pos_emb = model.tok_emb.weight, model.pos_emb.weight
        self.layers = [
            (b.ln_1.weight, b.ln_1.bias, *linear_args(b.attn.c_attn), *linear_args(b.attn.c_proj),
             b.ln_2.weight, b.ln_2.bias, *linear_args(b.mlp.c_fc), b.mlp.gelu, *linear_args(b.mlp.c_proj))
            for b in model.blocks
        ]  # fmt: skip
        self.ln_f = (model.ln_f.weight, model.ln_f.bias)
        self.lm_head_t = model.lm_head.weight.t()  # (C, V)

    def __call__(self, column: torch.Tensor, cache) -> torch.Tensor:
        """column (B, 1): the newest token of each row -> logits (B, V) for the token after it."""
        B, pos, nh, hs, shape, eps = column.size(0), cache.pos, self.n_head, self.head_dim, self.shape, self.eps
        x = F.embedding(column[:, 0], self.tok_emb) + self.pos_emb[pos]  # (B, C)
        for layer, (w1, b1, b_qkv, w_qkv, b_o, w_o, w2, b2, b_fc, w_fc, gelu, b_p, w_p) in enumerate(self.layers):
            qkv = torch.addmm(b_qkv, F.layer_norm(x, shape, w1, b1, eps), w_qkv).view(B, 3, nh, 1, hs)
            q, k, v = qkv.unbind(1)  # 3 x (B, nh, 1, hs)
            k, v = cache.update(layer, k, v)  # (B, nh, pos + 1, hs)
            y = F.scaled_dot_product_attention(q, k, v)  # one query sees every cached key: no mask
            x = torch.addmm(b_o, y.view(B, nh * hs), w_o).add_(x)
            x = torch.addmm(b_p, gelu(torch.addmm(b_fc, F.layer_norm(x, shape, w2, b2, eps), w_fc)), w_p).add_(x)
        cache.advance(1)
        return torch.mm(F.layer_norm(x, shape, *self.ln_f, eps), self.lm_head_t)  # (B, V)
