"""Every intermediate tensor of every attention layer, read from the model's own forward pass.

    trace = trace_ids(run.model, ids)    # .q .k .v (L, H, T, d_head), .scores .weights (L, H, T, T), ...
    save_trace(trace, "out/explain.npz"); trace = load_trace("out/explain.npz")

Nothing here computes attention: forward hooks read what `CausalSelfAttention`'s explicit path hands to
its `probe` (model/attention.py), and what each block receives, during one `forward_with_attention`.
explain.npz (float32, loadable with allow_pickle=False) holds, per layer l, head h and token t:

    resid    (L, T, n_embd)    the residual stream entering block l
    x        (L, T, n_embd)    ln_1(resid): the normalised input that W_Q, W_K and W_V multiply
    q, k, v  (L, H, T, d_head) x W_Q + b_Q, x W_K + b_K, x W_V + b_V, split into heads
    scores   (L, H, T, T)      q kᵀ / √d_head, before the causal mask (future keys still finite)
    weights  (L, H, T, T)      softmax of the masked scores: attention.npz's maps
    y        (L, H, T, d_head) weights @ v: each head's output
    out      (L, T, n_embd)    the heads concatenated, times W_O, plus b_O: what the sublayer adds to resid
    ids      (T,)              the token ids (int64)
"""

import os
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from storage.atomic import write_npz


@dataclass
class Trace:
    ids: np.ndarray
    resid: np.ndarray
    x: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    weights: np.ndarray
    y: np.ndarray
    out: np.ndarray

    @property
    def d_head(self) -> int:
        return self.q.shape[-1]


@torch.inference_mode()
def trace_ids(model, ids) -> Trace:
    """One forward over `ids` (at most block_size of them) with hooks on every block and probe."""
    records = [{} for _ in model.blocks]
    hooks = []
    for layer, block in enumerate(model.blocks):
        def block_input(module, args, record=records[layer]):
            record["resid"] = args[0]

        def probe(module, args, kwargs, output, record=records[layer]):
            record.update(kwargs)

        hooks.append(block.register_forward_pre_hook(block_input))
        hooks.append(block.attn.probe.register_forward_hook(probe, with_kwargs=True))
    try:
        idx = torch.tensor([list(ids)], dtype=torch.long, device=model.tok_emb.weight.device)  # (1, T)
        model.forward_with_attention(idx)
    finally:
        for hook in hooks:
            hook.remove()

    def stack(name):  # batch row 0 of every layer -> (L, ...)
        return torch.stack([r[name][0] for r in records]).float().cpu().numpy()

    return Trace(ids=np.asarray(ids, dtype=np.int64), resid=stack("resid"), x=stack("x"), q=stack("q"),
                 k=stack("k"), v=stack("v"), scores=stack("scores"), weights=stack("att"), y=stack("y"),
                 out=stack("out"))


def save_trace(trace: Trace, path: str | os.PathLike) -> Path:
    """Write explain.npz atomically (arrays as in the module docstring)."""
    arrays = {f.name: getattr(trace, f.name) for f in fields(trace)}
    return write_npz(Path(path), {k: (a if k == "ids" else a.astype(np.float32)) for k, a in arrays.items()})


def load_trace(path: str | os.PathLike) -> Trace:
    """Read an explain.npz back (no pickles)."""
    with np.load(path, allow_pickle=False) as f:
        return Trace(**{field.name: f[field.name] for field in fields(Trace)})
