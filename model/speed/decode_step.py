"""The one-token decoding step, the hot loop of cached generation, written without module calls.

    step = DecodeStep(model)              # binds the weights once per generate call
    logits = step(column, cache)          # column (B, 1) -> logits (B, V); writes position cache.pos

A step pushes one token per row through every layer: a handful of matrix-vector products, so at batch 1
on a CPU the Python and dispatch cost of ~20 module calls per layer rivals the arithmetic. This runs the
operations of `Block.forward` with a KV cache (the same LayerNorm, linear maps, attention and GELU, in the
same order and precision) on tensors bound once, with fewer, cheaper calls:
- at batch 1 the activations are vectors and every linear map is one `addmv` on the (out, in) weight
  (MKL's matrix-vector kernel streams the weights faster than a one-row `addmm`); larger batches use
  `addmm` on the transposed weight view;
- GELU is called directly (in the layer's own form), inside `native_cpu_kernels()` for the whole step:
  PyTorch hands float32 CPU GELU to oneDNN, whose fixed cost per call is several times the work on a
  vector of 4·n_embd values; its own native kernel is as exact.
`model(column, kv_cache=cache)` stays the readable reference: tests check that both give the same logits.
The speed layer uses this step where it was measured faster than the modules (`fast_decode_step`; the
figures are in docs/speed.md): fp32 weights on a CPU in eval mode. `DecodeStep(model, "bf16" or "int8")`
multiplies by smaller copies of the fp32 model's matrices instead (model/speed/decode_weights.py).

`native_cpu_kernels()` turns oneDNN off for a block. The switch (`torch.backends.mkldnn.enabled`) is
process-wide, so the blocks of all threads share one count: the first to enter turns oneDNN off, the last
to leave restores the setting found, however it is left. Other threads meanwhile compute the same values
with the native kernels.
"""

import threading

import torch
import torch.nn.functional as F

from model.ablation import has_hooks
from model.config import ModelInputError
from model.speed import decode_weights

_lock = threading.Lock()
_inside = 0  # blocks currently open, in any thread
_saved = True  # the setting to restore when the last one closes


class native_cpu_kernels:  # lower case: it reads like a function, `with native_cpu_kernels():`
    """A plain class rather than @contextlib.contextmanager: it runs once per decoded token, and the
    generator-based form is measurably slower there."""

    def __enter__(self):
        global _inside, _saved
        with _lock:
            if _inside == 0:
                _saved = torch.backends.mkldnn.enabled
                torch.backends.mkldnn.enabled = False
            _inside += 1

    def __exit__(self, *exc):
        global _inside
        with _lock:
            _inside -= 1
            if _inside == 0:
                torch.backends.mkldnn.enabled = _saved


def linear_args(layer, weights: str = "fp32") -> tuple:
    """(bias, weight (out, in)) of a linear layer, the weight in the stored form of `weights`
    (model/speed/decode_weights.py); a layer without bias gets zeros (adding 0.0 changes no value), so every
    map is one fused multiply-add call."""
    w = layer.weight
    bias = w.new_zeros(w.size(0)) if layer.bias is None else layer.bias
    return bias, (w if weights == "fp32" else decode_weights.pack(w, weights))


def linear_vector(x, bias, weight):
    """x (in,) -> (out,): `layer(x)` for one row."""
    return torch.addmv(bias, weight, x)


def linear_rows(x, bias, weight):
    """x (B, in) -> (B, out): `layer(x)` for a batch of rows."""
    return torch.addmm(bias, x, weight.t())


class DecodeStep:
    def __init__(self, model, weights: str = "fp32"):
        """weights: "fp32" binds the model's own tensors; "bf16" or "int8" makes smaller copies of the
        matrices (model/speed/decode_weights.py), once per generate call."""
        c = model.config
        self.n_head, self.head_dim, self.eps = c.n_head, c.head_dim, c.layer_norm_eps
        self.shape = (c.n_embd,)  # normalized_shape of every LayerNorm
        self.tok_emb, self.pos_emb = model.tok_emb.weight, model.pos_emb.weight
        self.layers = [  # per block: (attention's tensors, the MLP's or None in an attention-only block)
            ((b.ln_1.weight, b.ln_1.bias, *linear_args(b.attn.c_attn, weights), *linear_args(b.attn.c_proj, weights)),
             None if b.mlp is None else (b.ln_2.weight, b.ln_2.bias, *linear_args(b.mlp.c_fc, weights),
                                         b.mlp.gelu.approximate, *linear_args(b.mlp.c_proj, weights)))
            for b in model.blocks
        ]  # fmt: skip
        self.ln_f = (model.ln_f.weight, model.ln_f.bias)
        self.packed = weights != "fp32"
        self.lm_head = linear_args(model.lm_head, weights)  # (zeros (V,), weight (V, C) tied to tok_emb)

    def __call__(self, column: torch.Tensor, cache) -> torch.Tensor:
        """column (B, 1): the newest token of each row -> logits (B, V) for the token after it."""
        B, pos, nh, hs, shape, eps = column.size(0), cache.pos, self.n_head, self.head_dim, self.shape, self.eps
        one_row = B == 1
        linear = decode_weights.apply if self.packed else linear_vector if one_row else linear_rows
        row = (nh * hs,) if one_row else (B, nh * hs)  # x's shape, as ints (a view by torch.Size is slower)
        ids = column[0, 0] if one_row else column[:, 0]
        x = torch.embedding(self.tok_emb, ids) + self.pos_emb[pos]  # torch.* forms skip F.*'s Python checks
        with native_cpu_kernels():  # GELU's native kernel
            for layer, ((w1, b1, b_qkv, w_qkv, b_o, w_o), mlp) in enumerate(self.layers):
                qkv = linear(torch.layer_norm(x, shape, w1, b1, eps), b_qkv, w_qkv).view(B, 3, nh, 1, hs)
                q, k, v = qkv.unbind(1)  # 3 x (B, nh, 1, hs)
                k, v = cache.update(layer, k, v)  # (B, nh, pos + 1, hs)
                y = F.scaled_dot_product_attention(q, k, v)  # one query sees every cached key: no mask
                x = linear(y.view(*row), b_o, w_o).add_(x)
                if mlp is not None:
                    w2, b2, b_fc, w_fc, approx, b_p, w_p = mlp
                    h = F.gelu(linear(torch.layer_norm(x, shape, w2, b2, eps), b_fc, w_fc), approximate=approx)
                    x = linear(h, b_p, w_p).add_(x)
        cache.advance(1)
        x = torch.layer_norm(x, shape, *self.ln_f, eps)
        if self.packed:
            return decode_weights.apply(x, *self.lm_head).view(B, -1)  # (B, V)
        w = self.lm_head[1]
        return torch.mv(w, x).unsqueeze(0) if one_row else torch.mm(x, w.t())  # (B, V)


def fast_decode_step(model, weights: str = "fp32") -> DecodeStep | None:
    """The module-free step where it was measured faster than the modules (fp32 weights on a CPU, eval
    mode); None elsewhere, and the modules do the step. `weights` other than fp32 exist only in this step, so
    there it is always made. A step that calls no module would skip a hook (an ablation, model/ablation.py):
    then the modules do the step."""
    decode_weights.check_format(weights, model)
    w = model.tok_emb.weight
    if has_hooks(model):
        if weights != "fp32":
            raise ModelInputError(f"weights {weights} decode without the model's modules, so they cannot switch "
                                  "heads off; drop one of the two")
        return None
    if weights == "fp32" and (model.training or w.device.type != "cpu" or w.dtype != torch.float32):
        return None
    with torch.no_grad():  # int8/bf16 copies and zero biases: made once, never part of a graph
        return DecodeStep(model, weights)
