"""`native_cpu_kernels()`: run a block with PyTorch's own CPU kernels instead of oneDNN's.

    with native_cpu_kernels():
        y = F.gelu(h)          # the native kernel, not oneDNN's

PyTorch hands some float32 CPU ops (GELU among them) to oneDNN, whose fixed cost per call (~10-30 µs)
dwarfs the work on the small tensors of a decoding step; the native kernels are as exact there. The
switch (`torch.backends.mkldnn.enabled`) is global, so it is restored however the block is left.
"""

import torch


class native_cpu_kernels:  # lower case: it reads like a function, `with native_cpu_kernels():`
    """A plain class rather than @contextlib.contextmanager: it runs once per decoded token, and the
    generator-based form cost the tiny model's step ~1.5% in A/B runs."""

    def __enter__(self):
        self.enabled = torch.backends.mkldnn.enabled
        torch.backends.mkldnn.enabled = False

    def __exit__(self, *exc):
        torch.backends.mkldnn.enabled = self.enabled
