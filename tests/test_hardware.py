"""What a device offers a run (training/hardware.py) and the device resolver (model/device.py)."""

import pytest
import torch

from model.device import resolve_device
from model.errors import UserError
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
    ("Tesla T4", 0.0),
])  # fmt: skip
def test_peak_table_matches_whole_words(name, peak):
    assert hardware.table_peak(name) == peak


def test_configured_peak_wins_and_cpu_has_none():
    assert hardware.peak_flops(torch.device("cpu"), configured=1e12) == 1e12
    assert hardware.peak_flops(torch.device("cpu")) == 0.0


def test_precision_on_cuda_asks_for_native_bf16_only(monkeypatch):
    asked = {}

    def bf16_supported(including_emulation=True):
        asked["including_emulation"] = including_emulation
        return including_emulation  # a GPU that only emulates bf16 (a T4, a V100)

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", bf16_supported)
    assert hardware.default_precision(torch.device("cuda", 0)) == "fp16"
    assert asked == {"including_emulation": False}


def test_precision_on_cpu_follows_the_cpu_flags(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)
    assert hardware.default_precision(torch.device("cpu")) == "bf16"
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)
    assert hardware.default_precision(torch.device("cpu")) == "fp32"
    assert hardware.default_precision(torch.device("mps")) == "fp32"


def test_compile_defaults_on_for_cuda_only():
    assert hardware.default_compile(torch.device("cuda", 0)) is True
    assert hardware.default_compile(torch.device("cpu")) is False


def test_resolver():
    if not torch.backends.mps.is_available():
        assert resolve_device("auto") == torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(UserError, match=r'--device = "tpu0" is not one of'):
        resolve_device("tpu0", option="--device")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match=r'train.device = "cuda:1" but CUDA is not available here'):
            resolve_device("cuda:1")
