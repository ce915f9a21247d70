"""What a model, a training batch or a decoding needs in memory, estimated before any of it is allocated.

    check_fits(training_bytes(config, batch_size=16), device, "training", "lower train.batch_size")
    check_fits(decoding_bytes(config, batch=3, length=220), device, "3 samples", "ask for fewer")

A failed allocation is worse than a refusal: torch raises it only after it has tried (gigabytes and
seconds later), and the operating system may kill the process first. The figures are lower bounds
(weights, gradients and AdamW's two moments, the largest activations, the decoding buffers), so a refusal
never stops what would have fitted; what is available is the device's free memory and the blocks torch's
allocator keeps cached there (CUDA), else the smallest of the system's available memory, the cgroup's limit
and the process's address-space limit.
"""

import os
import resource

import torch

from cli.errors import ModelInputError
from model.config import GPTConfig

GB = 1e9


def param_count(c: GPTConfig) -> int:
    """The parameters of a GPT of config `c` (the tied head counted once), without building it."""
    per_block = 12 * c.n_embd**2 + (13 if c.bias else 2) * c.n_embd  # attention 4C², MLP 8C², LayerNorms, biases
    if not c.mlp:  # attention-only: no MLP (8C² and its 5C biases) and no ln_2
        per_block -= 8 * c.n_embd**2 + (7 if c.bias else 1) * c.n_embd
    return (c.vocab_size + c.block_size) * c.n_embd + c.n_layer * per_block + (2 if c.bias else 1) * c.n_embd


def training_bytes(c: GPTConfig, batch_size: int, fused_attention: bool = False) -> int:
    """fp32 weights, gradients and AdamW's two moments, plus the activations a step keeps for its backward:
    per layer at least the block's input, q, k, v, the attention output and the MLP's 4C (B, T, 10C), the
    attention weights (B, nh, T, T) unless a fused kernel computes them (`fused_attention`: it keeps only a
    row's log-sum-exp), and the logits with their gradient (B, T, V, twice). tests/test_memory.py holds it
    under what a fused step keeps, measured."""
    tokens = batch_size * c.block_size
    per_token = 10 * c.n_embd + (0 if fused_attention else c.n_head * c.block_size)
    activations = c.n_layer * tokens * per_token + 2 * tokens * c.vocab_size
    return 16 * param_count(c) + 4 * activations


def decoding_bytes(c: GPTConfig, batch: int, length: int, recording: bool = False, weights: bool = False) -> int:
    """The buffers of decoding `batch` rows to `length` tokens: the int64 token buffer, the KV cache (fp32,
    block_size positions), a step's logits and their sorted copy, and with `recording` one attention row
    of every head for every step; `weights`: the model's own too (when it is not loaded yet)."""
    cache = 2 * c.n_layer * batch * c.block_size * c.n_embd * 4
    recorded = length * batch * c.n_layer * c.n_head * c.block_size * 4 if recording else 0
    return 8 * batch * length + cache + 12 * batch * c.vocab_size + recorded + (4 * param_count(c) if weights else 0)


def available_bytes(device: torch.device) -> int | None:
    """Free memory on `device` (None if unknown): on CUDA the device's free memory and what torch's allocator holds
    unused (its cached blocks, which it hands out before it asks the device for more: a run that has filled the GPU
    once keeps them); on a CPU (or MPS, which shares it) the smallest of MemAvailable, the cgroup's limit less its
    usage and the address-space limit less what is mapped."""
    if device.type == "cuda":
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return torch.cuda.mem_get_info(device)[0] + cached
    figures = [read_meminfo("MemAvailable"), cgroup_room()]
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        figures.append(limit - mapped_bytes())
    if not any(f is not None for f in figures):
        try:
            figures.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError):  # macOS has no SC_AVPHYS_PAGES
            return None
    return max(0, min(f for f in figures if f is not None))


def read_meminfo(key: str) -> int | None:
    """A figure of /proc/meminfo in bytes (Linux only), None elsewhere."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == key:
                    return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def cgroup_room() -> int | None:
    """What the process's cgroup (v2) may still use, None without a limit."""
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else int(limit) - used


def mapped_bytes() -> int:
    """The process's virtual size (what RLIMIT_AS counts); 0 where /proc is missing."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def check_fits(needed: int, device: torch.device, what: str, fix: str) -> None:
    """ModelInputError naming both figures when `needed` bytes exceed what `device` has free; `what` says what
    needs them, `fix` what to do."""
    free = available_bytes(device)
    if free is not None and needed > free:
        raise ModelInputError(f"{what} needs at least {needed / GB:,.1f} GB but {device} has {free / GB:,.1f} GB "
                              f"available; {fix}")
