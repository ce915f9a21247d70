"""KVCache: keys and values of every layer, allocated once and filled in place while decoding.

    cache = model.new_kv_cache(batch_size=1)      # or KVCache(n_layer, B, n_head, max_len, head_dim, ...)
    logits, _ = model(prompt, kv_cache=cache)     # prefill: writes positions [0, T)
    logits, _ = model(next_token, kv_cache=cache) # one step: writes position T, attends over [0, T]

The model holds no cache state: each attention layer calls `update(layer, k, v)`, which writes
`[pos:pos+T]` and returns the filled prefix `[:pos+T]`; `GPT.forward` calls `advance(T)` once,
after its last layer. Nothing is concatenated or reallocated per step.
"""

import torch


class KVCache:
    def __init__(self, n_layer, batch_size, n_head, max_len, head_dim, dtype=torch.float32, device="cpu"):
        shape = (n_layer, batch_size, n_head, max_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, nh, max_len, hs)
        self.v = torch.zeros(shape, dtype=dtype, device=device)  # (L, B, nh, max_len, hs)
        self.pos = 0  # positions [0, pos) hold keys and values
        # per-layer views made once, so update() does no indexing of the 5-d tensors each step
        self._k_layers = [self.k[layer] for layer in range(n_layer)]  # L x (B, nh, max_len, hs)
        self._v_layers = [self.v[layer] for layer in range(n_layer)]

    @property
    def batch_size(self) -> int:
        return self.k.size(1)

    @property
    def max_len(self) -> int:
        return self.k.size(3)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v (B, nh, T, hs) at [pos:pos+T] of `layer`; return that layer's keys and values [:pos+T]."""
        T = k.size(2)
        end = self.pos + T
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {self.pos} + {T} positions > max_len {self.max_len}; reset() first")
        if k.size(0) != self.batch_size:
            raise ValueError(f"KV cache was made for batch size {self.batch_size}, got {k.size(0)}")
        k_all, v_all = self._k_layers[layer], self._v_layers[layer]  # (B, nh, max_len, hs)
        k_all.narrow(2, self.pos, T).copy_(k)
        v_all.narrow(2, self.pos, T).copy_(v)
        return k_all.narrow(2, 0, end), v_all.narrow(2, 0, end)  # (B, nh, pos + T, hs)

    def advance(self, T: int) -> None:
        """Mark T more positions as filled (called once per forward, after the last layer)."""
        self.pos += T

    def reset(self) -> None:
        """Forget everything; the buffers are kept and simply overwritten."""
        self.pos = 0
