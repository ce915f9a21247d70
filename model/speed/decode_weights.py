"""The decoding step's weights in a smaller format: bf16, or int8 with one scale per output row.

    check_format("int8", model)                  # ModelInputError when this model or device can't
    stored = pack(layer.weight, "int8")          # once per generate call
    y = apply(x, bias, stored)                   # x (in,) or (B, in) fp32 -> (out,) or (B, out) fp32

At batch 1 on a CPU a decoded token reads every weight once and does two FLOPs per weight read, so the
step waits on memory, not arithmetic: the matrix-vector products are most of it (docs/speed.md). Half
the bytes (bf16) or a quarter (int8) is the lever, as in gpt-fast:
- **bf16**: the weight rounded to bf16; bf16 inputs, fp32 sums. One row goes to PyTorch's own matrix-vector
  kernel (`torch.mv`), rows to oneDNN (`F.linear`), which for one row reorders the matrix on every call and
  runs on one thread (docs/speed.md: 1.09x the tokens a second at batch 1).
- **int8**: weight-only quantization, symmetric, one fp32 scale per output row: w ≈ q · scale with q in
  [-127, 127], scale = max |w| of the row / 127. `torch._weight_int8pack_mm` (the CPU kernel gpt-fast and
  torchao use) multiplies a bf16 row by q and scales the sums; it needs the input width to be a multiple
  of 16 (other widths gave wrong sums), which `check_format` asks of n_embd.
Everything else stays fp32: the activations between the maps, LayerNorm, GELU, the attention and its KV
cache (the CPU attention kernel is several times slower in bf16 for one query), and the bias, added to
the fp32 result. Only the matrices' inputs are rounded to bf16 on the way in. So the logits differ from
fp32's by the rounding of the weights and of those inputs; tests/test_decode_weights.py states how far.
"""

import torch
import torch.nn.functional as F

from cli.errors import ModelInputError

FORMATS = ("fp32", "bf16", "int8")
INT8_WIDTH = 16  # _weight_int8pack_mm's input width must be a multiple of this


def check_format(weights: str, model) -> None:
    """ModelInputError unless the cached CPU step of this model can use `weights`."""
    if weights not in FORMATS:
        raise ModelInputError(f"weights {weights!r} must be one of {', '.join(FORMATS)}")
    if weights == "fp32":
        return
    held = model.tok_emb.weight
    device = held.device
    if held.dtype != torch.float32:
        raise ModelInputError(f"weights {weights} makes smaller copies of an fp32 model's matrices, and this "
                              f"model is held in {str(held.dtype).removeprefix('torch.')}; leave weights at fp32")
    if device.type != "cpu":
        raise ModelInputError(f"weights {weights} is for decoding on a CPU, and the model is on {device}; "
                              "leave weights at fp32 there")
    if weights == "int8":
        if not hasattr(torch, "_weight_int8pack_mm"):
            raise ModelInputError(f"weights int8 needs torch 2.4 or later with its int8 CPU kernel "
                                  f"(this is {torch.__version__}); use bf16")
        if model.config.n_embd % INT8_WIDTH:
            raise ModelInputError(f"weights int8 needs n_embd to be a multiple of {INT8_WIDTH} "
                                  f"(this model's is {model.config.n_embd}); use bf16")


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight (out, in) fp32 -> (q (out, in) int8, scale (out,) fp32) with weight ≈ q * scale[:, None]."""
    scale = (weight.abs().amax(dim=1) / 127).clamp(min=torch.finfo(torch.float32).tiny)  # an all-zero row: q = 0
    return torch.round(weight / scale[:, None]).to(torch.int8), scale


def pack(weight: torch.Tensor, weights: str):
    """The stored form of one (out, in) matrix for `apply`."""
    if weights == "bf16":
        return weight.to(torch.bfloat16)
    q, scale = quantize_rows(weight)
    return q, scale.to(torch.bfloat16)  # the kernel takes the scales in the input's dtype


def apply(x: torch.Tensor, bias: torch.Tensor, stored) -> torch.Tensor:
    """x (in,) or (B, in) fp32 -> x @ W.T + bias in fp32, W as `pack` stored it."""
    rows = x.to(torch.bfloat16)
    if isinstance(stored, torch.Tensor):  # bf16
        y = torch.mv(stored, rows) if rows.dim() == 1 else F.linear(rows, stored)
    else:
        q, scale = stored
        y = torch._weight_int8pack_mm(rows.view(-1, rows.size(-1)), q, scale).view(*x.shape[:-1], q.size(0))
    return y.float().add_(bias)
