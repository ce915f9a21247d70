"""`native_cpu_kernels()`: run a block with PyTorch's own CPU kernels instead of oneDNN's.

    with native_cpu_kernels():
        y = F.gelu(h)          # the native kernel, not oneDNN's

PyTorch hands some float32 CPU ops (GELU among them) to oneDNN, whose fixed cost per call (~10-30 µs)
dwarfs the work on the small tensors of a decoding step; the native kernels are as exact there. The
switch (`torch.backends.mkldnn.enabled`) is process-wide, so the blocks of all threads share one count:
the first to enter turns oneDNN off, the last to leave restores the setting found, however it is left.
Other threads meanwhile compute the same values with the native kernels.
"""

import threading

import torch

_lock = threading.Lock()
_inside = 0  # blocks currently open, in any thread
_saved = True  # the setting to restore when the last one closes


class native_cpu_kernels:  # lower case: it reads like a function, `with native_cpu_kernels():`
    """A plain class rather than @contextlib.contextmanager: it runs once per decoded token, and the
    generator-based form cost the tiny model's step ~1.5% in A/B runs."""

    def __enter__(self):
        global _inside, _saved
        with _lock:
            if _inside == 0:
                _saved = torch.backends.mkldnn.enabled
                torch.backends.mkldnn.enabled = False
            _inside += 1

    def __exit__(self, *exc):
        global _inside
        with _lock:
            _inside -= 1
            if _inside == 0:
                torch.backends.mkldnn.enabled = _saved
