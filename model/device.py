"""The one device resolver: a name from a config or the command line -> a `torch.device` usable here.

    resolve_device("auto")            # cuda, then mps, then cpu
    resolve_device("cuda", local_rank=1)   # under torchrun: this process's GPU
    resolve_device("cpu", option="--device")  # `option` names the setting in the error message
    check_device_name("cuda:1", "train.device")   # the name alone, when a config is read
    sum_dtype(device)                 # float64 for sums, where the device has it (not MPS)
"""

import re

import torch

from cli.errors import UserError

# What this project computes on; torch takes more names ("meta" allocates nothing and computes nothing).
DEVICE_NAME = re.compile(r"auto|cpu|mps|cuda(:[0-9]{1,4})?", re.ASCII)


def check_device_name(name: str, option: str = "train.device") -> None:
    """UserError unless `name` is auto, cpu, cuda, cuda:N or mps."""
    if not (isinstance(name, str) and DEVICE_NAME.fullmatch(name)):
        raise UserError(f'{option} = "{name}" is not one of "auto", "cpu", "cuda", "cuda:N", "mps"')


def resolve_device(name: str, local_rank: int = 0, option: str = "train.device") -> torch.device:
    """"auto" -> cuda, then mps, then cpu; "cuda" -> cuda:<local_rank>; any other name must compute here. On CUDA
    it turns TF32 on (the one place: training's evaluation and generate.py --score compute alike)."""
    check_device_name(name, option)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f'{option} = "{name}" but CUDA is not available here; use auto or cpu')
    if name == "mps" and not torch.backends.mps.is_available():
        raise UserError(f'{option} = "mps" but MPS is not available here; use auto or cpu')
    try:
        device = torch.device(f"cuda:{local_rank}" if name == "cuda" else name)
        # a device index that does not exist, or a GPU too old for this torch, fails here, not mid-run
        (torch.ones(2, device=device) * 2).sum().item()
    except (RuntimeError, AssertionError) as e:
        raise UserError(f"{option} = {name!r} is not usable here ({str(e).splitlines()[0]}); use auto or cpu") from None
    if device.type == "cuda":  # TF32 matmuls for fp32 on Ampere and later, in training and every command alike,
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True  # so their numbers agree
    return device


def sum_dtype(device: torch.device) -> torch.dtype:
    """The dtype to add up many small numbers in on `device`: float64, but float32 on MPS, which has no float64."""
    return torch.float32 if device.type == "mps" else torch.float64
