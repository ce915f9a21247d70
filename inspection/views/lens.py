"""The logit lens view: what the model would predict next if it stopped after the embeddings, or after block l.

    records = compute(run, text, ["lens"], Settings(query=-1))
    print(text(records["lens"], "ko"))      # at the query token: each stage's top 5, the model's choice's rank

The residual stream after each stage, read by one recording forward (inspection/trace.py: the embeddings'
sum and each block's output), goes through the final LayerNorm and the tied head, as the last block's output
does: the output stage is the model's own next-token distribution. An early stage that already ranks the
final choice first has decided; a late rise shows which blocks did the work (nostalgebraist, 2020).
"""

import torch

from cli.messages import messages
from inspection.labels import off_names, pad

TOP = 5


def read_out(model, streams) -> torch.Tensor:
    """Residual streams (..., C) (a tensor or an array) through the final LayerNorm and the tied head:
    next-token probabilities."""
    w = model.ln_f.weight
    with torch.inference_mode():
        return model.lm_head(model.ln_f(torch.as_tensor(streams, dtype=w.dtype, device=w.device))).float().softmax(-1)


def record(look, settings) -> dict:
    """Every token's lens (`lens_table`), and the "query" token the terminal reads it at."""
    return {**lens_table(look.run.model, look.trace, look.label), "query": look.query}


def lens_table(model, trace, label, k: int = TOP) -> dict:
    """Every token's lens as the page shows it, from a recording forward (inspection/trace.py): for each stage
    and token the top `k` ids ("top") and their probabilities ("p"), the rank of the model's own choice
    ("rank"), a label for each id shown, and the heads switched off in that forward ("off": [layer, head, mode])."""
    streams = trace.streams()  # (S, T, C)
    top, p, rank = [], [], []
    choice = None
    for stage in reversed(range(len(streams))):  # the output first: its choice is ranked at every stage
        probs = read_out(model, streams[stage])  # (T, V), one stage at a time: a large vocabulary stays small
        values, indices = probs.topk(k)
        choice = indices[:, 0] if choice is None else choice
        rank.append(((probs > probs.gather(1, choice[:, None])).sum(1) + 1).tolist())
        top.append(indices.tolist())
        p.append(values.tolist())  # unrounded: the page rounds once, as format_lens does
    shown = sorted({i for stage in top for row in stage for i in row})
    return {"top": top[::-1], "p": p[::-1], "rank": rank[::-1], "labels": {i: label(i) for i in shown},
            "off": [[l, h, mode] for (l, h), mode in sorted(trace.switched_off().items())]}


def text(record: dict, lang: str) -> str:
    """One line per stage at the record's query: its top 5 tokens with probabilities, and the rank of the model's
    own choice; the heads switched off, and what a lens can and cannot say."""
    say, i = messages(lang), record["query"]
    stages = len(record["top"])
    choice = record["top"][-1][i][0]
    lines = [say("lens.title", query=i, choice=record["labels"][choice])]
    for stage in range(stages):
        name = say("lens.embeddings") if stage == 0 else say("lens.block", layer=stage - 1)
        if stage == stages - 1:
            name += say("lens.output")
        cells = "  ".join(f"{record['labels'][t]} {p:.3f}" for t, p in zip(record["top"][stage][i], record["p"][stage][i]))
        lines.append(pad(name, 30) + pad(say("lens.rank", rank=record["rank"][stage][i]), 12) + cells)
    off = {(l, h): mode for l, h, mode in record["off"]}
    return "\n".join(lines + ([say("lens.off", heads=off_names(off, say))] if off else []) + [say("lens.caveat")])
