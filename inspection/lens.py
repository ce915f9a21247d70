"""The logit lens: what the model would predict next if it stopped after the embeddings, or after block l.

    lens = logit_lens(run.model, ids, query=-1)     # ids: a text's token ids; the query token's position
    print(format_lens(lens, labeller(run.tokenizer)))            # each stage's top 5, the model's choice's rank
    data = lens_table(run.model, trace_ids(run.model, ids), labeller(run.tokenizer))   # every token's, for the page

The residual stream after each stage, read by one recording forward (inspection/trace.py: the embeddings'
sum and each block's output), goes through the final LayerNorm and the tied head, as the last block's output
does: the output stage is the model's own next-token distribution. An early stage that already ranks the
final choice first has decided; a late rise shows which blocks did the work (nostalgebraist, 2020).
"""

from dataclasses import dataclass, field

import torch

from inspection.explain import off_names
from inspection.labels import pad, token_labels
from cli.messages import messages
from inspection.trace import Trace, trace_ids

TOP = 5


@dataclass
class Lens:
    query: int                  # the position read, 0-based
    probs: torch.Tensor         # (stages, V): stage 0 the embeddings, stage l + 1 after block l (the last: the output)
    off: dict = field(default_factory=dict)  # the heads switched off in the forward: {(layer, head): "mean"/"zero"}

    @property
    def choice(self) -> int:
        """The token the full model ranks first."""
        return int(self.probs[-1].argmax())

    def rank(self, stage: int) -> int:
        """1-based rank of `choice` at that stage."""
        p = self.probs[stage]
        return int((p > p[self.choice]).sum()) + 1


def read_out(model, streams) -> torch.Tensor:
    """Residual streams (..., C) (a tensor or an array) through the final LayerNorm and the tied head:
    next-token probabilities."""
    w = model.ln_f.weight
    with torch.inference_mode():
        return model.lm_head(model.ln_f(torch.as_tensor(streams, dtype=w.dtype, device=w.device))).float().softmax(-1)


def logit_lens(model, ids, query: int = -1) -> Lens:
    """Next-token probabilities at position `query` of ids (a list or (T,) tensor) after every stage."""
    query = query % len(ids)  # the whole text runs, as on the page: the causal mask keeps later tokens out
    trace = trace_ids(model, list(ids))
    return Lens(query, read_out(model, trace.streams()[:, query]).cpu(), trace.switched_off())


def lens_table(model, trace: Trace, label, k: int = TOP) -> dict:
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


def labeller(tokenizer):
    """`label(id)`: one token's readable label (inspection.labels.token_labels), as the functions here take it;
    `<id N>` for an id past the tokenizer's vocabulary (a model's rows padded to a round number)."""
    labels: dict[int, str] = {}  # every id's, made at the first call in one pass (a label alone re-reads the decoder)

    def label(token_id: int) -> str:
        if not labels:
            known = [i for i in range(tokenizer.get_vocab_size()) if tokenizer.id_to_token(i) is not None]
            labels.update(zip(known, token_labels(tokenizer, known)))
        return labels.get(token_id, f"<id {token_id}>")

    return label


def format_lens(lens: Lens, label, lang: str = "en") -> str:
    """One line per stage: its top 5 tokens with probabilities, and the rank of the model's own choice;
    `label(id)` is a token's readable label."""
    say = messages(lang)
    stages = len(lens.probs)
    lines = [say("lens.title", query=lens.query, choice=label(lens.choice))]
    for stage in range(stages):
        name = say("lens.embeddings") if stage == 0 else say("lens.block", layer=stage - 1)
        if stage == stages - 1:
            name += say("lens.output")
        p, top = lens.probs[stage].topk(TOP)
        cells = "  ".join(f"{label(i)} {q:.3f}" for q, i in zip(p.tolist(), top.tolist()))
        lines.append(pad(name, 30) + pad(say("lens.rank", rank=lens.rank(stage)), 12) + cells)
    off = [say("lens.off", heads=off_names(lens.off, say))] if lens.off else []
    return "\n".join(lines + off + [say("lens.caveat")])
