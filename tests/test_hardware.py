"""What a device offers a run (training/hardware.py) and the device resolver (model/device.py)."""

import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cli.errors import UserError
from model.device import resolve_device
from training import hardware


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12),
    ("NVIDIA H100 PCIe", 756e12),
    ("NVIDIA H100 NVL", 835e12),
    ("NVIDIA H200", 989e12),
    ("NVIDIA A100-SXM4-80GB", 312e12),
    ("NVIDIA A100 80GB PCIe", 312e12),
    ("NVIDIA L40S", 362e12),
    ("NVIDIA L40", 181e12),  # not L4's figure
    ("NVIDIA L4", 121e12),
    ("NVIDIA A10", 125e12),
    ("NVIDIA A10G", 0.0),  # not A10's: unknown, so MFU is left out unless train.peak_flops is set
    ("Tesla T4", 65e12),  # fp16: a T4 has no bf16
    ("Tesla V100-SXM2-16GB", 125e12),
    ("Tesla V100-PCIE-32GB", 112e12),
])  # fmt: skip
def test_peak_table_matches_whole_words(name, peak):
    assert hardware.table_peak(name) == peak


def test_configured_peak_wins_and_cpu_has_none():
    assert hardware.peak_flops(torch.device("cpu"), configured=1e12) == 1e12
    assert hardware.peak_flops(torch.device("cpu")) == 0.0


@pytest.mark.parametrize("capability, precision", [((7, 5), "fp16"), ((7, 0), "fp16"), ((8, 0), "bf16"), ((9, 0), "bf16")])
def test_precision_on_cuda_asks_the_run_s_own_gpu_for_native_bf16(capability, precision, monkeypatch):
    asked = []

    def get_device_capability(device=None):
        asked.append(device)
        return capability  # (7, 5): a T4, which only emulates bf16; (7, 0): a V100; (8, 0): an A100

    monkeypatch.setattr(torch.cuda, "get_device_capability", get_device_capability)
    monkeypatch.setattr(torch.version, "hip", None)
    assert hardware.default_precision(torch.device("cuda", 1)) == precision
    assert asked == [torch.device("cuda", 1)]  # not the current device, which is GPU 0


def test_precision_on_cpu_follows_the_cpu_flags(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    assert hardware.default_precision(torch.device("cpu")) == "bf16"
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    assert hardware.default_precision(torch.device("cpu")) == "fp32"
    assert hardware.default_precision(torch.device("mps")) == "fp32"


def test_compile_defaults_on_for_cuda_only():
    assert hardware.default_compile(torch.device("cuda", 0)) is True
    assert hardware.default_compile(torch.device("cpu")) is False


def test_the_runs_adamw_is_fused_on_a_cpu_and_updates_as_the_reference_does():
    """training/setup.py's optimizer on a CPU is AdamW's fused kernel (faster than the loop there), and
    after three steps its weights, both groups (decayed matrices, undecayed biases and gains), equal those of
    torch's one-tensor-at-a-time AdamW from the same start and gradients."""
    from types import SimpleNamespace

    from model import GPT, GPTConfig
    from training.setup import make_optimizer

    tc = SimpleNamespace(lr=1e-2, weight_decay=0.1, beta1=0.9, beta2=0.95)
    models = [GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=16)) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())
    start = {name: p.detach().clone() for name, p in models[0].named_parameters()}
    fused = make_optimizer(models[0], tc, torch.device("cpu"))
    assert fused.defaults["fused"] is True and hardware.fused_adamw(torch.device("mps")) is False
    reference = torch.optim.AdamW([{"params": [p for p in models[1].parameters() if p.dim() >= 2], "weight_decay": 0.1},
                                   {"params": [p for p in models[1].parameters() if p.dim() < 2], "weight_decay": 0.0}],
                                  lr=1e-2, betas=(0.9, 0.95), foreach=False)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        idx = torch.randint(64, (2, 17), generator=generator)
        for model, optimizer in zip(models, (fused, reference)):
            model(idx[:, :-1], idx[:, 1:])[1].backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    # each step moves a weight by about lr = 1e-2; 1e-4 leaves room for the key biases alone, whose gradient
    # is rounding noise (softmax ignores a shift shared by every key), which Adam divides by its own size
    for (name, a), b in zip(models[0].named_parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4, msg=name)
    # every weight moved, so the equality above compares updates, not two untouched copies
    assert all((p - start[name]).abs().max() > 1e-3 for name, p in models[0].named_parameters())


def test_resolver():
    if not torch.backends.mps.is_available():
        assert resolve_device("auto") == torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(UserError, match=r'--device = "tpu0" is not one of'):
        resolve_device("tpu0", option="--device")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match=r'train.device = "cuda:1" but CUDA is not available here'):
            resolve_device("cuda:1")


STEP_FAULTS = """
import resource, sys, torch
from model import GPT, GPTConfig
from training.hardware import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=8192, block_size=128, n_layer=1, n_head=2, n_embd=32))
x = torch.randint(0, 8192, (16, 128))
def step():  # the logits alone are 64 MB, above any size glibc keeps by default
    model(x, x)[1].backward()
    model.zero_grad(set_to_none=True)
for _ in range(10):  # the heap settles in the first few steps
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 40)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")
def test_kept_memory_spares_a_cpu_step_its_page_faults():
    """A train step with 64 MB of logits faults in every page of them afresh each step under glibc's defaults
    (16,384 pages of 4 KiB, and more for their gradient); with keep_freed_memory the next step reuses them,
    but for a rare step whose blocks land elsewhere in the heap (1-2% of steps here: the average allows 10 in 40)."""
    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", STEP_FAULTS, mode], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
        return int(done.stdout.split()[-1])

    assert faults("default") > 16_000
    assert faults("keep") < 10 * 16_384 / 40
