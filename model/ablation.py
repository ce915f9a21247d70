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

import torch

from model.config import ModelInputError


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


@torch.inference_mode()
def head_means(model, windows: torch.Tensor, batch: int = 16) -> torch.Tensor:
    """Each layer's attention output before W_O (every head's y) averaged over every token of `windows`
    (N, T): a (L, C) tensor, float32, on the model's device."""
    L, C = model.config.n_layer, model.config.n_embd
    sums = torch.zeros(L, C, dtype=torch.float64, device=model.tok_emb.weight.device)
    count = 0

    def add(layer):
        def hook(module, args):
            sums[layer] += args[0].double().sum((0, 1))  # (B, T, C) -> (C,)
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
