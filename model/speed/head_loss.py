"""The training loss of the LM head, computed without ever holding the whole (N, V) logits: a speed choice.

    loss = sliced_loss(x, weight, targets)   # == F.cross_entropy(x @ weight.T, targets, ignore_index=-1)

The plain loss writes N x V logits (at 6 x 384, vocabulary 8,192, a batch of 2,048 tokens: 16.8 million numbers,
67 MB in fp32), then log-softmax writes a second copy, and backward a third and fourth: passes over main memory
that cost as much as a layer. On a CPU, `ChunkedHeadLoss` takes a slice of rows at a time instead, small enough
to stay in cache, and since the loss is one number, its gradient is known as soon as a slice's softmax is: the
gradient of the mean cross-entropy with respect to the logits is (softmax - one-hot(target)) / n, a standard
result. So each slice's two gradient products (with respect to x and to the weight) run right there, and
backward only multiplies them by the incoming gradient. Same three matrix products as the plain loss, same
numbers up to rounding (tests/test_head_loss.py checks loss and gradients against F.cross_entropy).

Elsewhere, the plain loss: on a GPU (not measured here) and without autograd (evaluation). Under torch.compile
the slices are traced like any code, and measured faster there too (docs/speed.md).
"""

import torch
import torch.nn.functional as F

from model.gpt import logits_loss

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
