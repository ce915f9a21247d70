"""The patch view: which residual streams and which heads carry the difference between two texts' predictions.

    records = compute(run, clean, ["patch"], Settings(corrupt=corrupted))   # the grid and every head
    records = compute(run, clean, ["patch"], Settings(corrupt=corrupted, patch_heads=((1, 0), (1, 2))))  # and those
    print(text(records["patch"], "ko"))

Two texts of the same number of tokens: the clean one, whose next token is A, and a corrupted one that differs in
a few tokens, whose next token is B (if both predict A, B is the corrupted run's runner-up). The measure is the
logit difference logit(A) − logit(B) at the last token: `clean_diff` on the clean text, `corrupt_diff` on the
corrupted one. Then the corrupted text is run again with one piece of the clean run put in its place, and the
recovered fraction is (patched − corrupt_diff) / (clean_diff − corrupt_diff): 1 where that piece alone carries
the whole difference, 0 where it carries none.

- `grid[s][t]`: the residual stream at stage s and token t (stage 0: tok + pos, entering block 0; stage s: the
  output of block s − 1, entering block s or, for the last, ln_f), taken from the clean run. A stream changed at
  token t and stage s can only change later stages at tokens from t on (attention looks back, never ahead): the
  causal cone. So the cells left of the first changed token are 0, and the last stage's cells are 0 but at the
  last token, whose stream is the prediction itself (1).
- `heads["L.H"]`: the head's output y, before W_O, at every token, taken from the clean run.
- `together`: the heads named in `heads=`, all patched at once.

Each patch is a forward of the corrupted text with a forward pre-hook (as common/heads_off.py switches heads off);
the rows of a batch patch different cells, so one forward covers a stage's every token, and one covers every head.
"""

import numpy as np
import torch

from cli.arguments import need_token_ids, need_type
from cli.errors import UserError
from cli.messages import messages
from common.heads_off import head_name, read_head, read_heads
from inspection.labels import display_width, off_mark, off_names, pad
from inspection.views.why import choice_and_runner_up
from model import GPT

MIN_GAP = 0.1  # logits: the least gap between the two texts' logit differences that patching measures


def logit_diff(logits: torch.Tensor, token: int, versus: int) -> torch.Tensor:
    """logits (..., V) at the last token -> logit(token) − logit(versus), (...)."""
    return logits[..., token] - logits[..., versus]


@torch.inference_mode()
def inputs_of(model, idx: torch.Tensor, modules) -> torch.Tensor:
    """What each of `modules` takes in during one forward over idx (1, T), stacked: (len(modules), T, C)."""
    found = []
    hooks = [m.register_forward_pre_hook(lambda m, args: found.append(args[0][0])) for m in modules]
    try:
        model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(found)


def streams_of(model, idx: torch.Tensor) -> torch.Tensor:
    """The residual stream at every stage (the module docstring), (L + 1, T, C): each block's input, then ln_f's."""
    return inputs_of(model, idx, [*model.blocks, model.ln_f])


def head_inputs(model, idx: torch.Tensor) -> torch.Tensor:
    """Every layer's heads side by side before W_O (the input of c_proj), (L, T, C), of one forward over idx (1, T)."""
    return inputs_of(model, idx, [b.attn.c_proj for b in model.blocks])


def last_logits(model, idx: torch.Tensor) -> torch.Tensor:
    """(B, V): the logits after the last token of each row."""
    return model(idx)[0][:, -1].double()


@torch.inference_mode()
def patch_stage(model, corrupt: torch.Tensor, clean_stream: torch.Tensor, stage: int) -> torch.Tensor:
    """(T, V): the corrupted text run T times, row t with the clean stream of `stage` at token t."""
    T = corrupt.size(1)
    rows = torch.arange(T, device=corrupt.device)

    def put(module, args):
        x = args[0].clone()  # (T, T, C)
        x[rows, rows] = clean_stream[rows].to(x.dtype)
        return (x, *args[1:])

    module = model.blocks[stage] if stage < len(model.blocks) else model.ln_f
    hook = module.register_forward_pre_hook(put)
    try:
        return last_logits(model, corrupt.expand(T, -1))
    finally:
        hook.remove()


@torch.inference_mode()
def patch_heads(model, corrupt: torch.Tensor, clean_heads: torch.Tensor, groups: list[list[tuple[int, int]]]) -> torch.Tensor:
    """(G, V): the corrupted text run once per group of heads, row g with those heads' output y (every token)
    taken from the clean run (`clean_heads`, head_inputs's (L, T, C))."""
    d = model.config.n_embd // model.config.n_head
    hooks = []
    for layer, block in enumerate(model.blocks):
        mask = torch.zeros(len(groups), clean_heads.size(-1), dtype=torch.bool, device=corrupt.device)  # (G, C)
        for g, heads in enumerate(groups):
            for h in (h for l, h in heads if l == layer):
                mask[g, h * d : (h + 1) * d] = True
        if not mask.any():
            continue

        def put(module, args, mask=mask, clean=clean_heads[layer]):
            return (torch.where(mask[:, None, :], clean.to(args[0].dtype), args[0]),)  # (G, T, C)

        hooks.append(block.attn.c_proj.register_forward_pre_hook(put))
    try:
        return last_logits(model, corrupt.expand(len(groups), -1))
    finally:
        for hook in hooks:
            hook.remove()


def patch(model, clean_ids: list[int], corrupt_ids: list[int], heads: list[tuple[int, int]] | None = None) -> dict:
    """The patching record of the module docstring: {"token", "versus", "clean_diff", "corrupt_diff", "grid":
    [[recovered per token] per stage], "heads": {"L.H": recovered}, "together": recovered or None, "changed":
    [tokens where the texts differ]}."""
    need_type("model", model, GPT, "a GPT (run.model)")
    said = "a non-empty list of token ids (run.encode_prompt(text))"  # an array or a tensor comes back as a list
    clean_ids = need_token_ids("clean_ids", clean_ids, model.config.vocab_size, said)
    corrupt_ids = need_token_ids("corrupt_ids", corrupt_ids, model.config.vocab_size, said)
    if len(clean_ids) != len(corrupt_ids):
        raise UserError(f"the clean text has {len(clean_ids)} tokens and the corrupted one {len(corrupt_ids)}; "
                        "patching needs the same number of tokens in both (change words for words of the same length)")
    device = model.tok_emb.weight.device
    clean = torch.tensor([clean_ids], device=device)
    corrupt = torch.tensor([corrupt_ids], device=device)
    with torch.inference_mode():
        clean_logits, corrupt_logits = last_logits(model, clean)[0], last_logits(model, corrupt)[0]
    token = choice_and_runner_up(clean_logits.cpu().numpy())[0]
    first, second = choice_and_runner_up(corrupt_logits.cpu().numpy())
    versus = second if first == token else first
    clean_diff = float(logit_diff(clean_logits, token, versus))
    corrupt_diff = float(logit_diff(corrupt_logits, token, versus))
    if abs(clean_diff - corrupt_diff) < MIN_GAP:  # a fraction of almost nothing: noise, not a measure
        raise UserError(f"the two texts' logit differences are {clean_diff:.4f} and {corrupt_diff:.4f}, less than "
                        f"{MIN_GAP} apart, so nothing is left to recover; corrupt a token the prediction depends on")

    def recovered(logits):
        return ((logit_diff(logits, token, versus) - corrupt_diff) / (clean_diff - corrupt_diff)).cpu().numpy()

    streams = streams_of(model, clean)  # (L + 1, T, C)
    grid = [recovered(patch_stage(model, corrupt, streams[s], s)) for s in range(len(streams))]
    L, H = model.config.n_layer, model.config.n_head
    groups = [[(layer, head)] for layer in range(L) for head in range(H)]
    heads = read_heads(heads, "heads", model.config) if heads else []
    clean_heads = head_inputs(model, clean)
    fractions = recovered(patch_heads(model, corrupt, clean_heads, groups + ([heads] if heads else [])))
    return {"token": token, "versus": versus, "clean_diff": clean_diff, "corrupt_diff": corrupt_diff,
            "grid": np.round(np.stack(grid), 6).tolist(),
            "heads": {head_name(*g[0]): round(float(f), 6) for g, f in zip(groups, fractions)},
            "ranked_heads": sorted(([head_name(*g[0]), round(float(f), 6)] for g, f in zip(groups, fractions)),
                                   key=lambda hf: -hf[1]),
            "together": round(float(fractions[-1]), 6) if heads else None,
            "together_heads": [head_name(l, h) for l, h in heads],
            "changed": [t for t, (a, b) in enumerate(zip(clean_ids, corrupt_ids)) if a != b]}


def record(look, settings) -> dict:
    """The patching record of the text (clean) into settings.corrupt (corrupted), settings.patch_heads together,
    its tokens named, and "off": the heads switched off in both runs ("L.H": "mean" or "zero"), which recover
    nothing by construction."""
    corrupt = look.run.encode_prompt(settings.corrupt)
    found = patch(look.run.model, look.ids, corrupt, list(settings.patch_heads) or None)
    off = {head_name(l, h): mode for (l, h), mode in look.trace.switched_off().items()}
    return {**named_patch(found, look.label, look.ids, corrupt), "off": off}


def named_patch(record: dict, label, clean_ids: list[int], corrupt_ids: list[int]) -> dict:
    """A `patch` record with its tokens named by their labels, as patch.json and the page hold it."""
    return {**record, "token_id": record["token"], "versus_id": record["versus"], "token": label(record["token"]),
            "versus": label(record["versus"]), "labels": [label(i) for i in clean_ids],
            "corrupt_labels": [label(i) for i in corrupt_ids]}


def text(record: dict, lang: str) -> str:
    """The record as text in `lang`: the logit differences, the grid (a row per stage, a column per token), the
    heads that recover the most, and the causal cone's why."""
    say, labels = messages(lang), record["labels"]
    lines = [say("patch.title", token=repr(record["token"]), versus=repr(record["versus"]),
                 clean=f"{record['clean_diff']:.4f}", corrupt=f"{record['corrupt_diff']:.4f}"),
             say("patch.changed", tokens=", ".join(f"{t} {labels[t]!r}" for t in record["changed"]) or "-"), ""]
    names = [say("lens.embeddings")] + [say("lens.block", layer=s) for s in range(len(record["grid"]) - 1)]
    first, width = max(display_width(n) for n in names) + 2, 7
    lines.append(" " * first + "".join(f"{t:>{width}}" for t in range(len(labels))))
    for name, row in zip(names, record["grid"]):
        lines.append(pad(name, first) + "".join(f"{x:>{width}.2f}" for x in row))
    off = record.get("off", {})
    lines += ["", say("patch.heads", heads=", ".join(f"{h} {f:.2f}{off_mark(off.get(h), say)}"
                                                    for h, f in record["ranked_heads"][:5]))]
    if record["together"] is not None:
        together = ", ".join(h + off_mark(off.get(h), say) for h in record["together_heads"])
        lines.append(say("patch.together", heads=together, share=f"{record['together']:.2f}"))
    if off:
        named = {read_head(name, "off"): mode for name, mode in off.items()}
        lines.append(say("patch.off", heads=off_names(named, say)))
    lines += ["", say("patch.cone")]
    return "\n".join(lines)
