"""The one device resolver: a name from a config or the command line -> a `torch.device` usable here.

    resolve_device("auto")            # cuda, then mps, then cpu
    resolve_device("cuda", local_rank=1)   # under torchrun: this process's GPU
    resolve_device("cpu", option="--device")  # `option` names the setting in the error message
"""

import torch

from model.errors import UserError


def resolve_device(name: str, local_rank: int = 0, option: str = "train.device") -> torch.device:
    """"auto" -> cuda, then mps, then cpu; "cuda" -> cuda:<local_rank>; any other name must work here."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f'{option} = "{name}" but CUDA is not available here; use auto or cpu')
    if name == "mps" and not torch.backends.mps.is_available():
        raise UserError(f'{option} = "mps" but MPS is not available here; use auto or cpu')
    try:
        device = torch.device(f"cuda:{local_rank}" if name == "cuda" else name)
        torch.empty(0, device=device)  # a device index that does not exist fails here, not mid-run
    except (RuntimeError, AssertionError) as e:
        raise UserError(f"{option} = {name!r} is not usable here ({str(e).splitlines()[0]}); use auto or cpu") from None
    return device
