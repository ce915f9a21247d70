"""What the device offers a training run: the default precision and compile, the FLOP peak, room in memory.

    precision, autocast, warning = step_settings(device, cfg.train)   # train.dtype, "auto" resolved
    compiles(device, cfg.train.compile)       # whether the run compiles: True, False, or None (a timed trial decides)
    default_precision(device)                 # what train.dtype = "auto" means
    default_compile(device)                   # what train.compile = "auto" means where no trial decides
    peak_flops(device, configured=0.0)        # the denominator of MFU (0 = unknown)
    mfu(flops_per_token, tokens_per_s, peak)  # model FLOPs utilisation of one device
    check_memory(cfg, device)                 # the model and a batch fit, refused before they are allocated
    fused_adamw(device)                       # whether AdamW updates every parameter in one fused kernel
    keep_freed_memory()                       # a CPU run reuses each step's memory instead of faulting in new pages

The CPU defaults come from bench/train_speed.py (tokens/s at equal validation loss); change them here.
"""

import ctypes
import platform
import re
from pathlib import Path

import torch

from model.memory import check_fits, decoding_bytes, param_count, training_bytes

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}  # train.dtype -> autocast
# Dense bf16 tensor-core peaks (FLOP/s, the vendors' data sheets), by the words of torch.cuda.get_device_name:
# every word of a key must be a whole word of the name, and the first key that matches wins, so the
# variants come before their family ("H100 PCIe" before "H100", and "L40" never matches "L40S" or "L4").
GPU_PEAK_FLOPS = {
    "H200 NVL": 835e12, "H200": 989e12,
    "H100 PCIe": 756e12, "H100 NVL": 835e12, "H100": 989e12,
    "A100": 312e12, "L40S": 362e12, "L40": 181e12, "L4": 121e12, "A10": 125e12,
    # no bf16 there: their fp16 tensor-core peaks, which their runs use (Colab's T4, older lab GPUs)
    "T4": 65e12, "V100 PCIe": 112e12, "V100": 125e12,
}  # fmt: skip


def default_precision(device: torch.device) -> str:
    """What dtype = "auto" means: bf16 autocast where the hardware computes in bf16, else fp32."""
    if device.type == "cuda":
        return "bf16" if gpu_has_native_bf16(device) else "fp16"
    if device.type == "cpu" and cpu_has_native_bf16():
        return "bf16"
    return "fp32"


def gpu_has_native_bf16(device: torch.device) -> bool:
    """Whether CUDA `device` computes in bf16. Pre-Ampere GPUs (a T4, a V100) emulate it: slow, and without a fused
    attention kernel in bf16, so those get fp16 with a GradScaler. Asked of the run's GPU, not the current one (a
    machine may mix GPU kinds); ROCm's GPUs all compute bf16."""
    return bool(torch.version.hip) or torch.cuda.get_device_capability(device) >= (8, 0)


def default_compile(device: torch.device) -> bool:
    """What compile = "auto" means where no trial decides: on for CUDA; off elsewhere, where compile time
    outweighs the gain."""
    return device.type == "cuda"


def compiles(device: torch.device, setting: str | bool) -> bool | None:
    """Whether the run compiles: the one place train.compile is decided. "on"/"off" (true/false) as given;
    "auto" as default_compile says, except on a CPU: None there, where a timed trial decides
    (training/recipe.py, when a time budget can pay for a compile: it sets "on" or "off"). A CPU run
    that still says "auto" after the "auto" settings are resolved had no trial, and stays eager."""
    if setting != "auto":
        return setting in (True, "on")
    return None if device.type == "cpu" else default_compile(device)


def step_settings(device: torch.device, tc, resumed: str | None = None) -> tuple[str, torch.autocast, str | None]:
    """The precision of the training step, its autocast context (TF32 matmuls on CUDA are model/device.py's, for
    every command) and what to warn of (a message key of cli/messages.py, or None). train.dtype "auto" is resolved
    here: by `resumed`, the precision the run was trained in, when it resumes, so that a run moved to another kind
    of GPU keeps it; but bf16 resumed on a GPU that only emulates it goes on in fp16 ("train.bf16_resumed_as_fp16").
    A bf16 asked for by name is kept there ("train.bf16_emulated")."""
    precision, warning = (resumed or default_precision(device)) if tc.dtype == "auto" else tc.dtype, None
    if precision == "bf16" and device.type == "cuda" and not gpu_has_native_bf16(device):
        auto = tc.dtype == "auto"
        precision, warning = ("fp16", "train.bf16_resumed_as_fp16") if auto else ("bf16", "train.bf16_emulated")
    autocast = torch.autocast(device.type, dtype=PRECISIONS[precision], enabled=precision != "fp32")
    return precision, autocast, warning


def fused_adamw(device: torch.device) -> bool:
    """AdamW's fused kernel where PyTorch has one that pays: on a GPU, and on a CPU, where it beats the
    multi-tensor loop (docs/speed.md). Elsewhere (MPS) the loop, PyTorch's default."""
    return device.type in ("cuda", "cpu")


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def keep_freed_memory() -> bool:
    """Have glibc's malloc keep the memory a train step frees, for the next step to reuse.

    A CPU step allocates and frees the same large tensors every step (activations, logits, their
    gradients). By default glibc maps blocks above a threshold (32 MB at most) afresh and trims the free
    top of its heap back to the kernel, so each step touches new pages that the kernel must fault in and
    zero: thousands of page faults a step, up to a tenth of the step's time (docs/speed.md). With both
    thresholds raised the memory stays in the heap; the process's memory stays at its peak, which a
    training step reaches every step anyway. Linux with glibc only; elsewhere nothing changes. Returns
    whether the setting took."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    # a glibc that refuses a threshold this high (older ones cap it at 32 MB) keeps blocks up to 32 MB
    mapped = libc.mallopt(M_MMAP_THRESHOLD, 1 << 30) or libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
    return bool(mapped and libc.mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1))


def cpu_has_native_bf16() -> bool:
    """AVX-512 BF16 or AMX: bf16 matmuls run faster than fp32 (without them they are emulated, slower)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def peak_flops(device: torch.device, configured: float = 0.0) -> float:
    """Per-device peak FLOP/s for MFU: train.peak_flops if set, else the GPU table, else 0 (unknown)."""
    if configured > 0:
        return configured
    if device.type == "cuda":
        return table_peak(torch.cuda.get_device_name(device))
    return 0.0


def mfu(flops_per_token: float, tokens_per_s: float, peak: float) -> float | None:
    """The share of one device's peak FLOP/s that `tokens_per_s` (per device) uses; None when the peak is unknown."""
    return round(flops_per_token * tokens_per_s / peak, 4) if peak else None


def table_peak(device_name: str) -> float:
    """The GPU_PEAK_FLOPS entry whose words all occur as whole words in `device_name`; 0 if none."""
    words = set(re.split(r"[\s\-_/]+", device_name.upper()))
    return next((flops for key, flops in GPU_PEAK_FLOPS.items() if set(key.upper().split()) <= words), 0.0)


def check_memory(cfg, device: torch.device) -> None:
    """Refuse, before any of it is allocated, a run whose model, batch and evaluation buffers (the losses of
    eval_iters batches, the sample of sample_tokens) need more memory than `device` has free."""
    c, tc = cfg.model, cfg.train
    fused = tc.speed_up and device.type != "cpu"  # a GPU's speed layer never stores the attention weights
    needed = training_bytes(c, tc.batch_size, fused) + decoding_bytes(c, 1, 1 + tc.sample_tokens) + 4 * tc.eval_iters
    check_fits(needed, device, f"a model of {param_count(c) / 1e6:,.1f}M parameters trained on {tc.batch_size} x "
               f"{c.block_size} tokens a step", "lower train.batch_size, the [model] sizes or train.sample_tokens")
