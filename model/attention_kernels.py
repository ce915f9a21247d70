"""Which attention computation runs outside inspection: the speed choices, made once per device.

`CausalSelfAttention` (model/attention.py) reads as the formula; when nobody asks for the weights it
hands q, k, v to `self.kernel`, which `kernel_for` picks when the layer's device becomes known (at
construction and at every `.to()`). Every kernel returns the same numbers as the textbook steps, up to
rounding; they differ only in speed, measured in docs/speed.md.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F


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


def cpu_attention(q, k, v, dropout_p: float, attend: Callable) -> torch.Tensor:
    """A CPU: with dropout, the layer's own textbook steps (`attend`), whose dropout on the weights draws its
    mask the cheap way (the fused kernel would draw it with bernoulli_; model/dropout.py says why not). In
    bf16, the fused kernel in fp32: PyTorch's CPU kernel is up to 2.5x slower in bf16 than in fp32 at these
    shapes (forward and backward; docs/speed.md), and fp32 is the more exact."""
    if dropout_p > 0:
        return attend(q, k, v)[0]
    if q.dtype == torch.bfloat16:
        with torch.autocast("cpu", enabled=False):  # CPU autocast would cast the fp32 inputs back to bf16
            return causal_fused(q.float(), k.float(), v.float(), 0.0, attend).to(q.dtype)
    return causal_fused(q, k, v, 0.0, attend)


def kernel_for(device: torch.device) -> Callable:
    """The attention computation for a layer whose weights live on `device`."""
    return cpu_attention if device.type == "cpu" else gpu_attention
