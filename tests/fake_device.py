"""A stand-in for one CUDA GPU on a machine without one, so that device bugs fail on a CPU (tests/test_on_device.py).

    with stand_in_cuda():                       # torch.cuda says one GPU: "auto" and "cuda" resolve to cuda:0
        run = load_run("runs/tiny")             # load_model's model.to(cuda:0) puts the weights on the stand-in
        generate.main([...])                    # every tensor made "on the model's device" lands there too

A tensor on the stand-in (class OnDevice) keeps its numbers in CPU memory and computes with CPU kernels, but
behaves as a GPU's tensor does where device bugs show:
- its .device is cuda:0 (.is_cuda is True), so code that makes tensors where another one lives
  (`device=x.device`, `torch.Generator(device=x.device)`, `.to(x.device)`) makes them on the stand-in;
- .numpy() and np.asarray() refuse it with CUDA's own TypeError: `.cpu()` comes first, as on a GPU;
- an operation that mixes it with a CPU tensor raises CUDA's RuntimeError ("Expected all tensors to be on the
  same device"). As on CUDA, a 0-dim CPU tensor passes (a scalar), a CPU tensor may index it, and copies
  across (copy_, .to) pass;
- a random generator draws only for tensors on its own device;
- .cpu() and .to("cpu") give a plain CPU tensor (a copy), .cuda() and .to("cuda") a stand-in one.
While the context is open, any torch function asked for device="cuda" (torch.zeros, torch.tensor, torch.arange,
torch.randint, Tensor.to, Module.to, ...) makes its tensor on the stand-in: a TorchFunctionMode, in the thread
that opened the context (torch's modes are per thread; an OnDevice tensor refuses numpy and CPU company in any
thread). torch.cuda's queries answer as one GPU would (`capability`, `name`, free memory, its UUID; its RNG
state is the CPU generator's, which draws the stand-in's numbers); anything else of torch.cuda still fails as
it does on a CPU build, loudly. train.py runs on it too (pinned memory is host memory, torch.save writes its
tensors as plain ones).

What it does not stand for: the GPU's numbers (it computes in fp32 with CPU kernels: autocast, TF32, flash and
bf16 leave them as they are, so a bf16 tensor handed to numpy is not caught), torch.compile over its tensors,
streams and asynchronous copies, a second GPU, and real memory limits. docs/gpu.md says what stays for a GPU.
"""

import contextlib
from types import SimpleNamespace

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

CUDA = torch.device("cuda", 0)
Tensor = torch.Tensor
RealGenerator = torch.Generator
NUMPY_REFUSAL = ("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                 "memory first.")  # CUDA's own words
MIXED = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
# what moves a tensor between devices (or copies into one) or asks about its kind: these may take both
MOVES = (Tensor.to, Tensor.cpu, Tensor.cuda, Tensor.copy_, Tensor.type_as, torch._has_compatible_shallow_copy_type)


class OnDevice(torch.Tensor):
    """A tensor on the stand-in GPU (the module docstring)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func == Tensor.device.__get__:
            return CUDA
        if func == Tensor.is_cuda.__get__:
            return True
        if func == Tensor.is_cpu.__get__:
            return False
        if func in (Tensor.numpy, Tensor.__array__):
            raise TypeError(NUMPY_REFUSAL)
        if func == Tensor.__reduce_ex__:  # torch.save: saved as a plain tensor (torch.load gives CPU tensors)
            return plain(args[0]).__reduce_ex__(*args[1:])
        if func in MOVES[:3]:
            return moved(func, args, kwargs)
        if func == Tensor.data.__set__:
            return set_data(*args)
        check_devices(func, args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        return mark(out)


class OnDeviceParameter(OnDevice, torch.nn.Parameter):
    """A module's parameter on the stand-in (still an nn.Parameter: the same object, moved)."""


def set_data(t: Tensor, data: Tensor) -> None:
    """`t.data = data`, as Module.to does for each parameter: `t` moves to `data`'s device (the same object, so
    tied weights stay one)."""
    with torch._C.DisableTorchFunctionSubclass():
        Tensor.data.__set__(t, data)
    param = isinstance(t, torch.nn.Parameter)
    t.__class__ = ((OnDeviceParameter if param else OnDevice) if on(data) else
                   (torch.nn.Parameter if param else Tensor))  # fmt: skip


def on(t) -> bool:
    return isinstance(t, OnDevice)


def mark(out):
    """Every tensor of `out` on the stand-in (the same numbers, the same memory)."""
    return tree_map(lambda t: moved_over(t) if isinstance(t, Tensor) and not on(t) else t, out)


def moved_over(t: Tensor) -> OnDevice:
    """`t` as an OnDevice tensor: a view that stays in its autograd graph when it needs one; else a tensor of its
    own over the same memory, as torch's own tensors are (torch's matmul takes another kernel for a weight that
    is a view, and the numbers would differ from the CPU's in their last bits)."""
    return t.as_subclass(OnDevice) if t.requires_grad else Tensor._make_subclass(OnDevice, t)


def plain(t: Tensor) -> Tensor:
    return t.as_subclass(Tensor) if on(t) else t


def is_cuda(device) -> bool:
    """Whether a device argument (a str, a torch.device, an int: a GPU index) names the stand-in."""
    if device is None:
        return False
    return isinstance(device, int) or torch.device(device).type == "cuda"


def target(func, args, kwargs) -> tuple[bool | None, torch.dtype | None]:
    """(whether the tensor goes on the stand-in: None when its device stays, the dtype asked for) of a move."""
    if func == Tensor.cpu:
        return False, None
    if func == Tensor.cuda:
        return True, None
    rest = args[1:]
    if rest and isinstance(rest[0], Tensor):  # .to(other): other's device and dtype
        return on(rest[0]), rest[0].dtype
    if rest and isinstance(rest[0], int) and not isinstance(rest[0], bool):  # .to(0): GPU 0
        rest = (CUDA, *rest[1:])
    device, dtype, _, _ = torch._C._nn._parse_to(*rest, **{k: v for k, v in kwargs.items() if k != "copy"})
    return (None if device is None else device.type == "cuda"), dtype


def moved(func, args, kwargs):
    """Tensor.to / .cpu / .cuda with the stand-in: a copy when the tensor changes device, itself when nothing
    changes, as torch does."""
    self = args[0]
    to_stand_in, dtype = target(func, args, kwargs)
    goes_on = on(self) if to_stand_in is None else to_stand_in
    with torch._C.DisableTorchFunctionSubclass():
        out = self.to(dtype) if dtype is not None else self
        if goes_on != on(self) or kwargs.get("copy"):
            out = out.clone() if out is self else out
    if out is self:
        return self
    return mark(out) if goes_on else plain(out)


def check_devices(func, args, kwargs) -> None:
    """CUDA's RuntimeError for an operation that mixes the stand-in's tensors with CPU tensors, or draws with a
    generator of the other device."""
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, Tensor)]
    device_side = any(on(t) for t in tensors)
    generator = kwargs.get("generator")
    if generator is not None and tensors and getattr(generator, "stand_in", False) != device_side:
        raise RuntimeError(f"Expected a '{'cuda' if device_side else 'cpu'}' device type for generator but found "
                           f"'{'cuda' if getattr(generator, 'stand_in', False) else 'cpu'}'")
    if not device_side or func in MOVES:
        return
    if func in (Tensor.__getitem__, Tensor.__setitem__):  # CUDA takes CPU indices, not a CPU tensor indexed by its own
        if not on(args[0]):
            raise RuntimeError("indices should be either on cpu or on the same device as the indexed tensor (cpu)")
        return
    if any(not on(t) and t.dim() > 0 for t in tensors):
        raise RuntimeError(MIXED)


class StandInGenerator(RealGenerator):
    """torch.Generator while the stand-in is open: device="cuda" makes a generator of the stand-in (a CPU one
    that says cuda:0 and draws only for its tensors)."""

    def __new__(cls, device="cpu"):
        generator = super().__new__(cls, "cpu")
        generator.stand_in = is_cuda(device)
        return generator

    def __init__(self, device="cpu"):
        pass

    @property
    def device(self) -> torch.device:
        return CUDA if self.stand_in else torch.device("cpu")


class StandInMode(TorchFunctionMode):
    """Torch functions asked for a CUDA device make their tensors on the stand-in; a generator of the stand-in
    refuses CPU tensors."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in MOVES[:3] and isinstance(args[0], Tensor):
            return moved(func, args, kwargs)
        if func == Tensor.data.__set__:
            return set_data(*args)
        if func == Tensor.pin_memory:  # page-locked host memory, for a copy to the GPU: a copy in host memory here
            return args[0].clone()
        check_devices(func, args, kwargs)
        if is_cuda(kwargs.get("device")):  # a factory (torch.zeros, torch.tensor, ..., x.new_zeros(device=...))
            return mark(func(*args, **{**kwargs, "device": "cpu"}))
        return func(*args, **kwargs)


def memory_figures(free: int, total: int, allocated: int = 0, reserved: int = 0) -> dict:
    """torch.cuda's memory queries answering these figures (bytes)."""
    return {"mem_get_info": lambda device=None: (free, total),
            "memory_allocated": lambda device=None: allocated, "memory_reserved": lambda device=None: reserved,
            "max_memory_allocated": lambda device=None: allocated, "max_memory_reserved": lambda device=None: reserved,
            "reset_peak_memory_stats": lambda device=None: None}


def cuda_queries(monkeypatch, capability=(9, 0), name="NVIDIA H100 80GB HBM3", count=1, free=70 * 2**30,
                 total=80 * 2**30, allocated=0, reserved=0, uuid="GPU-stand-in-0") -> None:  # fmt: skip
    """torch.cuda answering as `count` GPUs of `name` and compute `capability` would, with these memory figures;
    synchronize, set_device and empty_cache do nothing (no tensor is computed on a GPU)."""
    props = SimpleNamespace(name=name, major=capability[0], minor=capability[1], total_memory=total,
                            multi_processor_count=132, uuid=uuid)  # fmt: skip
    answers = {"is_available": lambda: True, "device_count": lambda: count, "current_device": lambda: 0,
               "get_device_capability": lambda device=None: capability, "get_device_name": lambda device=None: name,
               "get_device_properties": lambda device=None: props,
               "is_bf16_supported": lambda including_emulation=True: including_emulation or capability >= (8, 0),
               "synchronize": lambda device=None: None, "set_device": lambda device: None, "empty_cache": lambda: None,
               # the stand-in's random draws are the CPU generator's: its state is the GPU's
               "get_rng_state": lambda device=None: torch.get_rng_state(),
               "set_rng_state": lambda state, device=None: torch.set_rng_state(state),
               **memory_figures(free, total, allocated, reserved)}  # fmt: skip
    for key, value in answers.items():
        monkeypatch.setattr(torch.cuda, key, value)
    monkeypatch.setattr(torch.version, "hip", None)


@contextlib.contextmanager
def stand_in_cuda(**queries):
    """One stand-in GPU from here to the end of the block (the module docstring); `queries`: cuda_queries's."""
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32  # resolve_device turns TF32 on
    with pytest.MonkeyPatch.context() as patched:
        cuda_queries(patched, **queries)
        patched.setattr(torch, "Generator", StandInGenerator)
        try:
            with StandInMode():
                yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
