"""One recording forward: every step of the model's forward pass over a text, read from the pass itself.

    trace = trace_ids(run.model, ids, off)   # .tok .pos .resid .x .q .k .v .scores .att .y .out ... .logits
    save_trace(trace, "out/explain.npz"); trace = load_trace("out/explain.npz")

Nothing here computes the network: forward hooks read what the modules of model/gpt.py return, and what
`CausalSelfAttention`'s explicit path hands to its `probe` (model/attention.py), during one
`forward_with_attention`. The maps, the walkthroughs (inspection/views/walkthrough.py, inspection/views/path.py), the logit
lens and the live page's next token all read this one record. explain.npz (float32, loadable with
allow_pickle=False) holds, for layer l, head h and token t (C = n_embd, d = C / H, V = vocab_size):

    ids      (T,)              the token ids (int64)
    tok      (T, C)            tok_emb's row of each id
    pos      (T, C)            pos_emb's row of each position
    resid    (L, T, C)         the residual stream entering block l (resid[0] = tok + pos)
    x        (L, T, C)         ln_1(resid): the normalised input that W_Q, W_K and W_V multiply
    q, k, v  (L, H, T, d)      x W_Q + b_Q, x W_K + b_K, x W_V + b_V, split into heads
    scores   (L, H, T, T)      q kᵀ / √d, before the causal mask (future keys still finite)
    att      (L, H, T, T)      softmax of the masked scores: attention.npz's maps
    y        (L, H, T, d)      each head's output as W_O receives it: att @ v, or for a switched-off head what
                               the ablation put in its place (its mean, or zeros)
    out      (L, T, C)         the heads concatenated, times W_O, plus b_O: what attention adds to resid
    mid      (L, T, C)         resid + out: the residual stream between attention and the MLP
    x2       (L, T, C)         ln_2(mid), the MLP's input (L, T, 0 without MLPs)
    hidden   (L, T, 4C)        GELU(x2 W_1 + b_1), the MLP's hidden layer (L, T, 0 without MLPs)
    mlp      (L, T, C)         the MLP's output, what it adds to mid (zeros without MLPs)
    block    (L, T, C)         what block l hands on: mid + mlp, the next block's resid
    final    (T, C)            ln_f(the last block's output)
    logits   (T, V)            final times the tied head: the next-token logits after each token
    w_o      (L, C, C)         each layer's W_O as in out = concat(y) W_O + b_O (c_proj.weight transposed)
    off      (L, H)            "" for a head that is on, "mean" or "zero" for one switched off (common/heads_off.py),
                               as the caller that switched them off says (`off` of trace_ids)

y is read where c_proj takes it, after the pre-hooks that switch heads off, not from the probe: a switched-off
head's att is still computed (its map is what it would look at), but what it hands W_O is the replacement, so the
shares y W_O of all heads (`shares`, the one place they are computed), plus b_O, make the recorded out.
"""

import os
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

from cli.errors import UserError
from storage.atomic import write_npz


@dataclass
class Trace:
    ids: np.ndarray
    tok: np.ndarray
    pos: np.ndarray
    resid: np.ndarray
    x: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    scores: np.ndarray
    att: np.ndarray
    y: np.ndarray
    out: np.ndarray
    mid: np.ndarray
    x2: np.ndarray
    hidden: np.ndarray
    mlp: np.ndarray
    block: np.ndarray
    final: np.ndarray
    logits: np.ndarray
    w_o: np.ndarray
    off: np.ndarray

    def switched_off(self) -> dict[tuple[int, int], str]:
        """The heads switched off in the recorded forward: {(layer, head): "mean" or "zero"}."""
        return {(int(l), int(h)): str(self.off[l, h]) for l, h in zip(*np.nonzero(self.off != ""))}

    @property
    def d_head(self) -> int:
        return self.q.shape[-1]

    def shares(self, tokens=slice(None)) -> np.ndarray:
        """Each head's own part of the attention's output at `tokens`, y_h times its d rows of W_O: (L, H, T', C)
        float64. They add up, with b_O, to `out`."""
        L, H, _, d = self.y.shape
        w_o = self.w_o.astype(np.float64).reshape(L, 1, H, d, -1).transpose(0, 2, 1, 3, 4)  # (L, H, 1, d, C)
        return (self.y[:, :, tokens, None, :].astype(np.float64) @ w_o)[..., 0, :]  # (L, H, T', C)

    def streams(self) -> np.ndarray:
        """The residual stream after the embeddings and after each block: (L + 1, T, C), the logit lens's stages."""
        return np.concatenate([self.resid[:1], self.block])


def resolve_query(query: int, T: int) -> int:
    """A token index (negative counts from the end) -> 0..T-1, or a UserError naming the range."""
    if not -T <= query < T:
        raise UserError(f"--query {query} is outside the {T} tokens of the text; give 0..{T - 1} "
                        f"or -1..-{T} (from the end)")
    return query % T


def record(records: dict, name: str, index: int | None = None):
    """A forward hook that keeps batch row 0 of a module's output (or of output[index]) under `name`."""
    def hook(module, args, output):
        records.setdefault(name, []).append((output if index is None else output[index])[0])
    return hook


@torch.inference_mode()
def trace_ids(model, ids, off: dict | None = None) -> Trace:
    """One forward over `ids` (at most block_size of them), every step kept (the module docstring's arrays);
    `off`: the heads switched off in `model` now, {(layer, head): "mean" or "zero"}, which the trace records."""
    records: dict[str, list] = {}
    hooks = [model.tok_emb.register_forward_hook(record(records, "tok")),
             model.ln_f.register_forward_hook(record(records, "final")),
             model.lm_head.register_forward_hook(record(records, "logits"))]

    def probe(module, args, kwargs, output):  # the explicit path's tensors, by name; y is c_proj's (below)
        for name, value in kwargs.items():
            if name != "y":
                records.setdefault(name, []).append(value[0])

    def proj_input(module, args, output):  # after every pre-hook: the y W_O multiplies, switched-off heads replaced
        records.setdefault("y", []).append(args[0][0])

    def block_input(module, args):
        records.setdefault("resid", []).append(args[0][0])

    def mlp_input(module, args, output):
        records.setdefault("mid", []).append(args[0][0])
        records.setdefault("x2", []).append(output[0])

    for block in model.blocks:
        hooks += [block.register_forward_pre_hook(block_input), block.register_forward_hook(record(records, "block", 0)),
                  block.attn.probe.register_forward_hook(probe, with_kwargs=True),
                  block.attn.c_proj.register_forward_hook(proj_input)]
        if block.mlp is not None:
            hooks += [block.ln_2.register_forward_hook(mlp_input), block.mlp.register_forward_hook(record(records, "mlp")),
                      block.mlp.gelu.register_forward_hook(record(records, "hidden"))]
    try:
        idx = torch.tensor([list(ids)], dtype=torch.long, device=model.tok_emb.weight.device)  # (1, T)
        model.forward_with_attention(idx)
    finally:
        for hook in hooks:
            hook.remove()

    def numpy(name):
        return torch.stack(records[name]).float().cpu().numpy()

    arrays = {name: numpy(name) for name in records}
    T, C = arrays["tok"].shape[-2:]
    L, H, _, d = arrays["q"].shape
    y = arrays["y"].reshape(L, T, H, d).transpose(0, 2, 1, 3)  # (L, T, C) -> (L, H, T, d): heads side by side
    modes = np.full((L, H), "", dtype="<U4")
    for (layer, head), mode in (off or {}).items():
        modes[layer, head] = mode
    if "mlp" not in arrays:  # attention-only blocks: the stream passes the MLP's place unchanged
        L = len(model.blocks)
        arrays.update(mid=arrays["block"], x2=np.zeros((L, T, 0), np.float32), hidden=np.zeros((L, T, 0), np.float32),
                      mlp=np.zeros((L, T, C), np.float32))
    return Trace(ids=np.asarray(ids, dtype=np.int64), tok=arrays["tok"][0], pos=numpy_rows(model.pos_emb.weight, T),
                 resid=arrays["resid"], x=arrays["x"], q=arrays["q"], k=arrays["k"], v=arrays["v"],
                 scores=arrays["scores"], att=arrays["att"], y=np.ascontiguousarray(y), out=arrays["out"], mid=arrays["mid"],
                 x2=arrays["x2"], hidden=arrays["hidden"], mlp=arrays["mlp"], block=arrays["block"],
                 final=arrays["final"][0], logits=arrays["logits"][0], off=modes,
                 w_o=torch.stack([b.attn.c_proj.weight.detach().T for b in model.blocks]).float().cpu().numpy())


def numpy_rows(table: torch.Tensor, T: int) -> np.ndarray:
    """The first T rows of an embedding table as float32: the positions' rows, which the model adds by slicing
    (no module call for a hook to read)."""
    return table[:T].detach().float().cpu().numpy()


def save_trace(trace: Trace, path: str | os.PathLike) -> Path:
    """Write explain.npz atomically (arrays as in the module docstring)."""
    arrays = {f.name: getattr(trace, f.name) for f in fields(trace)}
    return write_npz(Path(path), {k: (a if k in ("ids", "off") else a.astype(np.float32)) for k, a in arrays.items()})


def load_trace(path: str | os.PathLike) -> Trace:
    """Read an explain.npz back (no pickles)."""
    with np.load(path, allow_pickle=False) as f:
        missing = [field.name for field in fields(Trace) if field.name not in f.files]
        if missing:
            raise ValueError(f"{path} lacks {', '.join(missing)}: it is not an explain.npz of this version; "
                             "write it again with generate.py --attention")
        return Trace(**{field.name: f[field.name] for field in fields(Trace)})
