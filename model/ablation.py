"""Switching heads off: the model's own forward with some heads silenced, to test what a head does.

    means = head_means(model, windows)                # each head's mean output over a text: (L, C)
    with ablated(model, [(1, 0), (1, 2)], means):     # heads 1.0 and 1.2 give their mean output
        logits, loss = model(idx, targets)            # any forward, cached decoding included
    with ablated(model, [(1, 0)]):                    # no means: the head's output is zeros

A head's output is y, its slice of the attention's output before W_O (the input of the layer's `c_proj`,
heads side by side: head h holds dims h·hs .. (h+1)·hs). Switching a head off replaces that slice, for
every token, by zeros or by its mean over held-out text. Zeros are the textbook "remove it", but they push
the residual stream off the range the later layers were trained on; the mean keeps what the head always
adds and removes only what depends on the text, so the change measures what the head does with the text.

A forward pre-hook on `c_proj` does it, and only inside the `with` block: the training step, and every
forward outside the block, run no extra code. The speed layer's one-token decoding step without module calls
(model/speed/decode_step.py) cannot see a hook, so it leaves the step to the modules while any hook is on
(`fast_decode_step`): cached and uncached decoding switch off the same heads.
"""

import contextlib
from types import SimpleNamespace

import torch

from model.config import ModelInputError
from model.device import sum_dtype


def check_heads(model, heads) -> list[tuple[int, int]]:
    """`heads` as a sorted list of (layer, head); ModelInputError for one the model lacks or one given twice."""
    c = model.config
    heads = [tuple(h) for h in heads]
    for layer, head in heads:
        if not (0 <= layer < c.n_layer and 0 <= head < c.n_head):
            raise ModelInputError(f"head {layer}.{head} is not in this model: it has layers 0..{c.n_layer - 1} "
                                  f"and heads 0..{c.n_head - 1} in each")
    if len(set(heads)) != len(heads):
        twice = next(h for h in heads if heads.count(h) > 1)
        raise ModelInputError(f"head {twice[0]}.{twice[1]} is given twice; name each head once")
    return sorted(heads)


@contextlib.contextmanager
def ablated(model, heads, means: torch.Tensor | None = None):
    """Inside the block, the heads [(layer, head), ...] of `model` output `means[layer]`'s slice (a (L, C)
    tensor, `head_means`) instead of their own y, or zeros when `means` is None."""
    hs = model.config.head_dim
    hooks = []
    before = getattr(model, "ablated_heads", {})  # an `ablated` block around this one: its heads stay off too
    model.ablated_heads = before | {head: "zero" if means is None else "mean" for head in check_heads(model, heads)}
    try:
        for layer in sorted({layer for layer, _ in check_heads(model, heads)}):
            proj = model.blocks[layer].attn.c_proj
            off = torch.zeros(proj.in_features, dtype=torch.bool, device=proj.weight.device)  # (C,)
            for h in (h for l, h in heads if l == layer):
                off[h * hs : (h + 1) * hs] = True
            fill = torch.zeros(proj.in_features, device=proj.weight.device) if means is None else means[layer]

            def replace(module, args, off=off, fill=fill):
                return (torch.where(off, fill.to(args[0]), args[0]),)  # y: (B, T, C), the chosen heads' dims replaced

            hooks.append(proj.register_forward_pre_hook(replace))
        yield model
    finally:
        for hook in hooks:
            hook.remove()
        model.ablated_heads = before


def heads_off(model) -> dict[tuple[int, int], str]:
    """Every head of `model` switched off now, and how: {(layer, head): "mean" or "zero"}, the heads kept off for
    good (`KeptOff`, train.heads_off) and those of every `ablated` block open now. Where a head is in both, the
    block's hook runs last (a later pre-hook replaces what an earlier one gave), so its mode is the one that counts."""
    kept = getattr(model, "kept_off", None)
    return ({head: kept.mode for head in kept.heads} if kept is not None else {}) | getattr(model, "ablated_heads", {})


def parse_heads_off(names, n_layer: int, n_head: int) -> list[tuple[int, int]]:
    """train.heads_off ["1.0", "0"] -> [(0, 0), ..., (0, H-1), (1, 0)]: "L.H" one head, "L" every head of layer L;
    ModelInputError for a name that is neither, a head the model lacks, one named twice, or every head."""
    heads = []
    for name in names:
        layer, dot, head = str(name).partition(".")
        if not (layer.isascii() and layer.isdigit()) or (dot and not (head.isascii() and head.isdigit())):  # not "１"
            raise ModelInputError(f'train.heads_off names "{name}"; name a head as "LAYER.HEAD" (e.g. "0.2") or a '
                                  'whole layer as "LAYER" (e.g. "0")')
        if not 0 <= int(layer) < n_layer:
            raise ModelInputError(f'train.heads_off names layer {layer}; this model has layers 0..{n_layer - 1}')
        heads += [(int(layer), int(head))] if dot else [(int(layer), h) for h in range(n_head)]
    try:
        checked = check_heads(SimpleNamespace(config=SimpleNamespace(n_layer=n_layer, n_head=n_head)), heads)
    except ModelInputError as e:
        raise ModelInputError(f"train.heads_off: {e}") from None
    if len(checked) == n_layer * n_head:
        raise ModelInputError("train.heads_off names every head of the model; keep at least one on")
    return checked


class KeptOff:
    """Heads kept off for good (train.heads_off): the heads' output y is replaced for every forward of `model`
    from the moment this is made, by forward pre-hooks on the layers' c_proj (as `ablated` does).

    mode "zero": zeros. mode "mean": while the model trains (c_proj.training), each head's mean output over the
    forward's batch, every token of it, with no gradient through it: the mean follows the model as it changes,
    the way batch norm's batch statistics do; in evaluation, `means`, its mean over held-out text, measured by
    `measure` (the training loop does it at every evaluation) and saved with each checkpoint, so every command
    that opens one computes what that evaluation did. `model.kept_off` is this object."""

    def __init__(self, model, heads, mode: str = "mean", means: dict | None = None):
        if mode not in ("mean", "zero"):
            raise ModelInputError(f'train.heads_off_mode = "{mode}" is not one of "mean", "zero"')
        self.heads, self.mode, self.head_dim = check_heads(model, heads), mode, model.config.head_dim
        hs = self.head_dim
        device = model.tok_emb.weight.device
        self.means = torch.zeros(model.config.n_layer, model.config.n_embd, device=device)  # (L, C)
        for name, values in (means or {}).items():  # "L.H" -> the head's hs values
            layer, head = (int(x) for x in name.split("."))
            self.means[layer, head * hs : (head + 1) * hs] = torch.tensor(values, dtype=torch.float32)
        self.sums, self.count = None, 0  # while `measure` runs: each layer's summed raw y, and the tokens
        self.hooks = []
        for layer in sorted({layer for layer, _ in self.heads}):
            off = torch.zeros(model.config.n_embd, dtype=torch.bool, device=device)
            for head in (h for l, h in self.heads if l == layer):
                off[head * hs : (head + 1) * hs] = True
            self.hooks.append(model.blocks[layer].attn.c_proj.register_forward_pre_hook(self.hook(layer, off)))
        model.kept_off = self

    def hook(self, layer: int, off: torch.Tensor):
        def replace(module, args):
            y = args[0]  # (B, T, C): the heads side by side
            if self.sums is not None:
                self.sums[layer] += y.detach().to(self.sums.dtype).sum((0, 1))
            if self.mode == "zero":
                fill = torch.zeros((), dtype=y.dtype, device=y.device)
            elif module.training:
                fill = y.detach().mean((0, 1))  # this batch's mean output of every head
            else:
                fill = self.means[layer].to(y.dtype)
            return (torch.where(off, fill, y),)

        return replace

    @torch.inference_mode()
    def measure(self, model, windows: torch.Tensor, batch: int = 16) -> None:
        """`means` of mode "mean": each kept-off head's mean raw output over every token of `windows` (N, T), a
        layer at a time in order, so that a later layer's mean is taken with the earlier layers' new means."""
        if self.mode != "mean":
            return
        was_training = model.training
        model.eval()
        try:
            for layer in sorted({layer for layer, _ in self.heads}):
                self.sums, self.count = torch.zeros_like(self.means, dtype=sum_dtype(self.means.device)), 0
                for chunk in windows.split(batch):
                    model(chunk.to(self.means.device))
                    self.count += chunk.numel()
                self.means[layer] = (self.sums[layer] / self.count).float()
        finally:
            self.sums = None
            model.train(was_training)

    def record(self) -> dict:
        """What a checkpoint's config.json keeps of it ("kept_off"): the heads, the mode, each head's mean."""
        return {"heads": [f"{l}.{h}" for l, h in self.heads], "mode": self.mode,
                "means": {f"{l}.{h}": self.means[l, h * self.head_dim : (h + 1) * self.head_dim].tolist()
                          for l, h in self.heads}}

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()

    @torch.no_grad()
    def fold(self, model) -> None:
        """Write the kept-off heads into the weights and drop the hooks, for a format with no hooks (a Hugging Face
        export): a head's W_O columns become zeros and what its fill adds through them, W_O·fill, goes into
        c_proj's bias. The same function of the input, evaluation's, up to float rounding."""
        hs = self.head_dim
        for layer, head in self.heads:
            proj = model.blocks[layer].attn.c_proj
            cols = slice(head * hs, (head + 1) * hs)
            if self.mode == "mean":
                if proj.bias is None:
                    raise ModelInputError("a head kept off by its mean needs c_proj's bias to fold into; this model "
                                          "has none (model.bias = false)")
                proj.bias += proj.weight[:, cols] @ self.means[layer, cols]
            proj.weight[:, cols] = 0
        self.remove()
        del model.kept_off


@torch.inference_mode()
def head_means(model, windows: torch.Tensor, batch: int = 16) -> torch.Tensor:
    """Each layer's attention output before W_O (every head's y) averaged over every token of `windows`
    (N, T): a (L, C) tensor, float32, on the model's device."""
    L, C = model.config.n_layer, model.config.n_embd
    device = model.tok_emb.weight.device
    sums = torch.zeros(L, C, dtype=sum_dtype(device), device=device)  # float64 where the device has it
    count = 0

    def add(layer):
        def hook(module, args):
            sums[layer] += args[0].to(sums.dtype).sum((0, 1))  # (B, T, C) -> (C,)
        return hook

    hooks = [block.attn.c_proj.register_forward_pre_hook(add(i)) for i, block in enumerate(model.blocks)]
    try:
        for chunk in windows.split(batch):
            model(chunk.to(sums.device))
            count += chunk.numel()
    finally:
        for hook in hooks:
            hook.remove()
    return (sums / count).float()


def has_hooks(model) -> bool:
    """Whether any module of `model` has a forward hook (an ablation, a trace): a step that calls no module
    would skip it."""
    return any(m._forward_pre_hooks or m._forward_hooks for m in model.modules())
