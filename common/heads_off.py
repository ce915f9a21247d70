"""Switching heads off: one mechanism for every command that does it, and one way to name a head ("L.H").

    heads = read_heads("1.0,1.2", "--ablate", model.config)    # [(1, 0), (1, 2)], checked against the model
    with HeadsOff(model, heads, "mean", head_means(model, windows)):   # each outputs its mean on held-out text
        logits, _ = model(idx)                                  # any forward, cached decoding included
    with HeadsOff(model, heads, "zero"): ...                    # each outputs zeros
    kept = HeadsOff(model, heads)                               # train.heads_off: off from step 0, kept (remove())
    kept.measure(model, windows)                                # its means for evaluation, a layer at a time

A head's output is y, its slice of the attention's output before W_O (the input of the layer's `c_proj`,
heads side by side: head h holds dims h·hs .. (h+1)·hs). Switching a head off replaces that slice, for
every token, by zeros or by its mean. Zeros are the textbook "remove it", but they push the residual stream off
the range the later layers were trained on; the mean keeps what the head always adds and removes only what
depends on the text, so the change measures what the head does with the text.

One forward pre-hook per layer on `c_proj` does it, while the `HeadsOff` is on: the training step, and every
forward outside it, run no extra code. What a head gives instead, in mode "mean": the `means` given (its mean over
held-out text, `head_means`), or while the module trains its mean over the forward's own batch, every token of
it, with no gradient through it, the way batch norm's batch statistics follow a model as it changes
(train.heads_off). Several `HeadsOff` at once compose: a later one's hook runs last, so where two name the same
head the later one's mode counts. The speed layer's one-token step calls no module, so a decoding that begins with
a hook on runs the modules (model/speed/fast_gpt.py): cached and uncached decoding switch off the same heads.
"""

import re

import torch

from cli.errors import ModelInputError
from model.device import sum_dtype

MODES = ("mean", "zero")
NAME = re.compile(r"([0-9]+)(?:\.([0-9]+))?")  # ASCII digits only: "１.０" or "²" name no head


def head_name(layer: int, head: int) -> str:
    """(1, 0) -> "1.0": how every text and record names a head."""
    return f"{layer}.{head}"


def read_heads(value, what: str, config=None, layers: bool = False, hint: str = "") -> list[tuple[int, int]]:
    """The heads `value` names, sorted: "1.0,1.2", ["1.0", "1.2"], (1, 0) or [(1, 0), (1, 2)]; with `layers`, "1"
    names every head of layer 1 too (train.heads_off). Checked against `config` (a GPTConfig) when given: a head the
    model lacks, one named twice, or (with `layers`) every head is refused. ModelInputError naming `what` (and
    saying `hint`, another form the option takes)."""
    if isinstance(value, str):
        names = [part.strip() for part in value.split(",")] if value.strip(" ,") else []
    elif isinstance(value, (list, tuple)):
        names = [value] if len(value) == 2 and all(is_index(x) for x in value) else list(value)
    else:
        raise ModelInputError(f"{what} must name heads as LAYER.HEAD (e.g. {what} 1.0,1.2) or (layer, head) pairs, "
                              f"got {type(value).__name__}")
    if not names:
        raise ModelInputError(f"{what} needs at least one head, e.g. {what} 1.0 or {what} 1.0,1.2")
    heads = [head for name in names for head in parse_one(name, what, config, layers, hint)]
    if config is not None:
        check_heads(config, heads, what)
        if layers and len(heads) == config.n_layer * config.n_head:
            raise ModelInputError(f"{what} names every head of the model; keep at least one on")
    return sorted(heads)


def read_head(value, what: str, config=None, hint: str = "") -> tuple[int, int]:
    """The one head `value` names ("1.0" or (1, 0)), as read_heads reads it."""
    heads = read_heads(value, what, config, hint=hint)
    if len(heads) != 1:
        raise ModelInputError(f"{what} names one head, as LAYER.HEAD (e.g. {what} 0.1), not {len(heads)}")
    return heads[0]


def is_index(x) -> bool:
    """A whole number that is no bool (numpy's integers too)."""
    return not isinstance(x, bool) and (isinstance(x, int) or (hasattr(x, "__index__") and hasattr(x, "dtype")))


def parse_one(name, what: str, config, layers: bool, hint: str) -> list[tuple[int, int]]:
    """One element of read_heads's value: "1.0", "1" (with `layers`) or a (layer, head) pair."""
    if isinstance(name, (list, tuple)) and len(name) == 2 and all(is_index(x) for x in name):
        return [(int(name[0]), int(name[1]))]
    found = NAME.fullmatch(name) if isinstance(name, str) else None
    if found is None or (found.group(2) is None and not layers):
        got = repr(name)
        if layers:  # a config's value, quoted as TOML quotes it
            got = f'"{name}"' if isinstance(name, str) else got
            raise ModelInputError(f'{what} names {got}; name a head as "LAYER.HEAD" (e.g. "0.2") or a whole layer '
                                  'as "LAYER" (e.g. "0")')
        raise ModelInputError(f"{what} {got} must be LAYER.HEAD with two numbers, e.g. {what} 0.1{hint}")
    layer = int(found.group(1))
    if found.group(2) is not None:
        return [(layer, int(found.group(2)))]
    if config is not None and not 0 <= layer < config.n_layer:
        raise ModelInputError(f"{what} names layer {layer}; this model has layers 0..{config.n_layer - 1}")
    return [(layer, h) for h in range(config.n_head if config is not None else 0)]


def check_heads(config, heads, what: str = "the heads") -> None:
    """ModelInputError for a head a model of `config`'s sizes lacks, or one named twice: the one check."""
    for layer, head in heads:
        if not (0 <= layer < config.n_layer and 0 <= head < config.n_head):
            raise ModelInputError(f"{what}: head {head_name(layer, head)} is not in this model: it has layers "
                                  f"0..{config.n_layer - 1} and heads 0..{config.n_head - 1} in each")
    twice = next((h for h in heads if list(heads).count(h) > 1), None)
    if twice is not None:
        raise ModelInputError(f"{what}: head {head_name(*twice)} is given twice; name each head once")


class HeadsOff:
    """`heads` [(layer, head), ...] of `model` switched off from now until `remove()` (or the end of a `with`
    block), each giving zeros (mode "zero") or its mean (mode "mean": `means`, a (L, C) tensor such as
    `head_means` returns, zeros until measured; the batch's own mean while the model trains). `.off`:
    {(layer, head): mode}."""

    def __init__(self, model, heads, mode: str = "mean", means: torch.Tensor | None = None):
        if mode not in MODES:
            raise ModelInputError(f'the mode of switched-off heads is "{mode}", not one of "mean", "zero"')
        c = model.config
        check_heads(c, heads)
        self.heads, self.mode, self.head_dim = sorted(tuple(h) for h in heads), mode, c.head_dim
        device = model.tok_emb.weight.device
        self.means = (torch.zeros(c.n_layer, c.n_embd, device=device) if means is None
                      else means.to(device=device, dtype=torch.float32))  # (L, C)
        self.hooks = []
        for layer in sorted({layer for layer, _ in self.heads}):
            off = torch.zeros(c.n_embd, dtype=torch.bool, device=device)  # (C,): the dims of this layer's heads
            for head in (h for l, h in self.heads if l == layer):
                off[head * self.head_dim : (head + 1) * self.head_dim] = True
            self.hooks.append(model.blocks[layer].attn.c_proj.register_forward_pre_hook(self.hook(layer, off)))

    @property
    def off(self) -> dict[tuple[int, int], str]:
        return {head: self.mode for head in self.heads}

    def hook(self, layer: int, off: torch.Tensor):
        def replace(module, args):
            y = args[0]  # (B, T, C): the heads side by side
            if self.mode == "zero":
                fill = torch.zeros((), dtype=y.dtype, device=y.device)
            elif module.training:
                fill = y.detach().mean((0, 1))  # this batch's mean output of every head
            else:
                fill = self.means[layer].to(y.dtype)
            return (torch.where(off, fill, y),)

        return replace

    def measure(self, model, windows: torch.Tensor) -> None:
        """Mode "mean": each head's mean over every token of `windows` (N, T), a layer at a time in order, so that a
        later layer's mean is taken with the earlier layers' new means in place."""
        if self.mode != "mean":
            return
        for layer in sorted({layer for layer, _ in self.heads}):
            self.means[layer] = head_means(model, windows)[layer]

    def record(self) -> dict:
        """What a checkpoint's config.json keeps of it ("kept_off"): the heads, the mode, each head's mean."""
        hs = self.head_dim
        return {"heads": [head_name(l, h) for l, h in self.heads], "mode": self.mode,
                "means": {head_name(l, h): self.means[l, h * hs : (h + 1) * hs].tolist() for l, h in self.heads}}

    @classmethod
    def from_record(cls, model, record: dict) -> "HeadsOff":
        """The `record()` of a checkpoint put on `model`: the same heads giving the same outputs."""
        heads = read_heads(record["heads"], "kept_off", model.config)
        hs, means = model.config.head_dim, torch.zeros(model.config.n_layer, model.config.n_embd)
        for name, values in record.get("means", {}).items():
            (layer, head), = read_heads(name, "kept_off")
            means[layer, head * hs : (head + 1) * hs] = torch.tensor(values, dtype=torch.float32)
        return cls(model, heads, record["mode"], means)

    def remove(self) -> None:
        for hook in self.hooks:
            hook.remove()
        self.hooks = []

    @torch.no_grad()
    def fold(self, model) -> None:
        """Write the heads into the weights and drop the hooks, for a format with no hooks (a Hugging Face export): a
        head's W_O columns become zeros and what its fill adds through them, W_O·fill, goes into c_proj's bias. The
        same function of the input, evaluation's, up to float rounding."""
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

    def __enter__(self) -> "HeadsOff":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


@torch.inference_mode()
def head_means(model, windows: torch.Tensor, batch: int = 16) -> torch.Tensor:
    """Each layer's attention output before W_O (every head's y, as computed: ahead of any head switched off)
    averaged over every token of `windows` (N, T), in eval mode: a (L, C) tensor, float32, on the model's device."""
    L, C = model.config.n_layer, model.config.n_embd
    device = model.tok_emb.weight.device
    sums = torch.zeros(L, C, dtype=sum_dtype(device), device=device)  # float64 where the device has it
    count, was_training = 0, model.training

    def add(layer):
        def hook(module, args):
            sums[layer] += args[0].to(sums.dtype).sum((0, 1))  # (B, T, C) -> (C,)
        return hook

    hooks = [block.attn.c_proj.register_forward_pre_hook(add(i), prepend=True) for i, block in enumerate(model.blocks)]
    model.eval()
    try:
        for chunk in windows.split(batch):
            model(chunk.to(device))
            count += chunk.numel()
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return (sums / count).float()
