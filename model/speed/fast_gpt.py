"""FastGPT: model/gpt.py's GPT with two faster paths, the training loss in slices and a one-token decoding step.

    model = speed_up(GPT(config))                    # model/speed/__init__.py swaps this class in
    _, loss = model(x, y, loss_only=True)            # training: the loss a slice of logits at a time (CPU)
    cache = model.new_kv_cache(1)                    # decoding: the cache binds the step once
    logits, _ = model(column, kv_cache=cache)        # one cached token: the module-free step, same numbers

**The loss.** The plain loss writes N x V logits (at 6 x 384, vocabulary 8,192, a batch of 2,048 tokens: 16.8
million numbers, 67 MB in fp32), then log-softmax writes a second copy, and backward a third and fourth: passes over
main memory that cost as much as a layer. On a CPU, `ChunkedHeadLoss` takes a slice of rows at a time instead,
small enough to stay in cache, and since the loss is one number, its gradient is known as soon as a slice's softmax
is: the gradient of the mean cross-entropy with respect to the logits is (softmax - one-hot(target)) / n, a standard
result. So each slice's two gradient products (with respect to x and to the weight) run right there, and backward
only multiplies them by the incoming gradient. Same three matrix products as the plain loss, same numbers up to
rounding (tests/test_fast_gpt.py checks loss and gradients against F.cross_entropy). Elsewhere, the plain loss: on
a GPU (not measured here) and without autograd (evaluation). Under torch.compile the slices are traced like any
code, and measured faster there too (docs/speed.md).

**The decoding step.** A cached step pushes one token per row through every layer: a handful of matrix-vector
products, so at batch 1 on a CPU the Python and dispatch cost of ~20 module calls per layer rivals the arithmetic.
`DecodeStep` runs the operations of `Block.forward` with a KV cache (the same LayerNorm, linear maps, attention and
GELU, in the same order and precision) on tensors bound once, with fewer, cheaper calls:
- at batch 1 the activations are vectors and every linear map is one `addmv` on the (out, in) weight (MKL's
  matrix-vector kernel streams the weights faster than a one-row `addmm`); larger batches use `addmm` on the
  transposed weight view;
- GELU is called directly (in the layer's own form), inside `native_cpu_kernels()` for the whole step: PyTorch hands
  float32 CPU GELU to oneDNN, whose fixed cost per call is several times the work on a vector of 4·n_embd values;
  its own native kernel is as exact.
The sampler only ever calls the model: `new_kv_cache` binds a step to the cache where it was measured faster than
the modules (fp32 weights on a CPU in eval mode; the figures are in docs/speed.md), and `forward` takes it for one
cached token. A step that calls no module would skip a hook (a head switched off, a recording): with any hook on
when the cache is made, the modules do the steps. With `speed_up(model, weights="bf16" or "int8")` the step
multiplies by smaller copies of the matrices instead (model/speed/decode_weights.py); the prefill keeps the
model's own. `model(column, kv_cache=cache)` on the textbook GPT stays the readable reference: tests check that
both give the same logits.

`native_cpu_kernels()` turns oneDNN off for a block. The switch (`torch.backends.mkldnn.enabled`) is process-wide,
so the blocks of all threads share one count: the first to enter turns oneDNN off, the last to leave restores the
setting found, however it is left. Other threads meanwhile compute the same values with the native kernels.
"""

import threading

import torch
import torch.nn.functional as F

from cli.errors import ModelInputError
from model.gpt import GPT, logits_loss
from model.kv_cache import KVCache
from model.speed import decode_weights


class StepCache(KVCache):
    """A KV cache with the decoding step bound to it for the whole decoding (`FastGPT.new_kv_cache`): `step` is a
    `DecodeStep`, or None when the modules do the steps."""

    step = None


class FastGPT(GPT):
    """model/gpt.py's GPT with the sliced training loss and the module-free one-token step (the module docstring).
    `weights`: the step's matrices, "fp32" (the model's own), "bf16" or "int8" (set by `speed_up`)."""

    weights = "fp32"

    def loss(self, x, targets):
        return sliced_loss(x, self.lm_head.weight, targets)

    def new_kv_cache(self, batch_size: int, max_len=None, dtype=None, device=None) -> StepCache:
        cache = super().new_kv_cache(batch_size, max_len, dtype, device)
        cache.__class__ = StepCache
        cache.step = decode_step(self, self.weights)
        return cache

    def forward(self, idx, targets=None, kv_cache=None, all_logits=False, loss_only=False):
        if type(kv_cache) is StepCache and kv_cache.step is not None and idx.size(1) == 1 and targets is None:
            return kv_cache.step(idx, kv_cache).unsqueeze(1), None  # (B, 1, V), as forward's last position
        return super().forward(idx, targets, kv_cache, all_logits, loss_only)


SLICE_LOGITS = 1 << 20  # logits a slice aims at (4 MB in fp32), but never fewer rows than the width C: each
# slice adds a whole (V, C) product to the weight's gradient, which must stay small next to its (rows, V) logits


class ChunkedHeadLoss(torch.autograd.Function):
    """Mean cross-entropy of x @ weight.T against targets (-1: ignored), a slice of rows at a time; the
    gradients are made in the forward pass. x (N, C), weight (V, C), targets (N,); matrix products in
    `dtype` (bf16 under autocast), softmax in fp32."""

    @staticmethod
    def forward(ctx, x, weight, targets, dtype):
        (N, C), V = x.shape, weight.size(0)
        wrong = (targets < -1) | (targets >= V)  # refused as F.cross_entropy refuses it; on a CPU, where this runs
        if not torch.compiler.is_compiling() and bool(wrong.any()):  # eager, the check costs no sync (a compiled
            raise IndexError(f"Target {int(targets[wrong][0])} is out of bounds.")  # graph cannot branch on it)
        slices = max(1, -(-N // max(SLICE_LOGITS // V, C)))  # rounded up; then rows split evenly between them
        rows = max(1, -(-N // slices))  # an empty batch: no slice, and the loss 0 / 0 = nan, as F.cross_entropy's
        with torch.autocast(x.device.type, enabled=False):  # the dtypes are chosen here, explicitly
            xs, w = x.to(dtype), weight.to(dtype)
            kept = (targets != -1).float()[:, None]  # (N, 1): 0 for an ignored target
            index = targets.clamp(min=0)[:, None]  # (N, 1): a valid index even where ignored
            grad_x = torch.empty_like(xs)
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=x.device)
            nll_sum = torch.zeros((), device=x.device)
            for start in range(0, N, rows):
                rows_x, keep, target = xs[start : start + rows], kept[start : start + rows], index[start : start + rows]
                log_probs = torch.log_softmax((rows_x @ w.T).float(), dim=-1)  # (rows, V), in cache
                nll_sum -= (log_probs.gather(1, target) * keep).sum()
                # d(nll)/d(logits) = softmax - one-hot(target), made in place; ignored rows are zeros
                grad_logits = log_probs.exp_().mul_(keep).scatter_add_(1, target, -keep).to(dtype)
                torch.mm(grad_logits, w, out=grad_x[start : start + rows])  # (rows, C)
                grad_w += grad_logits.T @ rows_x  # (V, C), summed over the slices in fp32
        count = kept.sum()  # targets not ignored; the loss is their mean
        ctx.save_for_backward(grad_x, grad_w, count)
        ctx.dtypes = x.dtype, weight.dtype
        return nll_sum / count

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss):
        grad_x, grad_w, count = ctx.saved_tensors
        scale = grad_loss / count.clamp(min=1)  # every target ignored: zero gradients (as F.cross_entropy's), not 0/0
        return (grad_x * scale).to(ctx.dtypes[0]), (grad_w * scale).to(ctx.dtypes[1]), None, None


def sliced_loss(x, weight, targets) -> torch.Tensor:
    """Mean cross-entropy of the logits x @ weight.T (x (..., C), weight (V, C)) against targets (...), -1
    ignored: `ChunkedHeadLoss` on a CPU while autograd records; the plain loss otherwise."""
    if x.device.type != "cpu" or not torch.is_grad_enabled():
        return logits_loss(F.linear(x, weight), targets)
    device = x.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
    return ChunkedHeadLoss.apply(x.reshape(-1, x.size(-1)), weight, targets.reshape(-1), dtype)


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


def has_hooks(model) -> bool:
    """Whether any module of `model` has a forward hook (a head switched off, a recording): a step that calls no
    module would skip it."""
    return any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())


def decode_step(model, weights: str = "fp32") -> DecodeStep | None:
    """The module-free step where it was measured faster than the modules (fp32 weights on a CPU, eval
    mode); None elsewhere, and the modules do the step. `weights` other than fp32 exist only in this step, so
    there it is always made. With a hook on, the modules do the step (`has_hooks`)."""
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
