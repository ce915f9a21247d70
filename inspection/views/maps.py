"""The maps view: every layer and head's attention over a text, and per-head statistics of it.

    records = compute(run, "대한민국은 서울", ["maps"])     # inspection/views/__init__.py
    record = records["maps"]    # ids, tokens (labels), pieces, att (L, H, T, T), prefill, stats, off, trace
    print(text(record, "ko"))   # the statistics table; with settings.head, where each query of that head looks

For one head, `att[q, k]` is the attention query token q gives key token k (each row sums to 1, zero
for k > q). entropy and distance are means over the query positions q = 1 .. T-1 (query 0 can only attend
to itself, so it would add the same trivial value to every head); NaN when T = 1.

- entropy:  mean of -sum_k att[q, k] * ln att[q, k], in nats. 0 = one key only; ln(q+1) = uniform.
- distance: mean of sum_k att[q, k] * (q - k), in tokens: how far back the head looks on average.

prev, first and self are the previous-token, first-token and self role scores of inspection/views/roles.py, one
definition for both (`text_role_sums`, here, which the roles read): means over the queries q = 2 .. T-1 (at q = 1 the previous token is the first) of
att[q, q-1], att[q, 0] (often an "attention sink") and att[q, q]; NaN when T < 3.

Each token's surprise is what teacher forcing trains: -log2 p of the token given the tokens before it (bits; the
cross-entropy terms that model/nll.py's `stream_nll` sums for --score), beside the model's EXPECTED most likely
tokens there.

`att` comes from the text's recording forward, or, for text a decoding generated, from the decoding's own
forwards: rows 0..prefill-1 from its prefill, each later row from one cached step (the KV cache's keys).
"""


import math

import numpy as np
import torch
import torch.nn.functional as F

from cli.arguments import ArgumentValueError, need_maps, need_type
from cli.messages import messages
from inspection.labels import display_width, format_top_attended, pad, token_pieces

STAT_NAMES = ("entropy", "distance", "prev", "first", "self")
EXPECTED = 5  # the most likely next tokens kept beside each token's surprise


def text_role_sums(maps: torch.Tensor, ids: torch.Tensor) -> dict[str, tuple[torch.Tensor, int]]:
    """maps (B, L, H, T, T) on the CPU of windows ids (B, T) -> role: (summed score (L, H), number of queries)."""
    B, T = ids.shape
    q = torch.arange(2, T)
    maps = maps.double()  # summed in float64: the maps come here on the CPU, which has it
    sums = {
        "previous-token": (maps[..., q, q - 1].sum((0, 3)), B * len(q)),
        "first-token": (maps[..., q, 0].sum((0, 3)), B * len(q)),
        "self": (maps[..., q, q].sum((0, 3)), B * len(q)),
    }
    same = ids[:, :, None] == ids[:, None, :]  # (B, T, T): [b, query, key] hold the same token
    keys = torch.ones(T, T, dtype=torch.bool).tril(diagonal=-2)
    keys[:, 0] = False  # keys 1..q-2
    dup = (same & keys)[:, 2:]  # (B, T-2, T)
    has = dup.any(-1)  # (B, T-2): queries whose token occurs earlier
    mass = (maps[..., 2:, :] * dup[:, None, None]).sum(-1)  # (B, L, H, T-2)
    sums["duplicate-token"] = ((mass * has[:, None, None]).sum((0, 3)), int(has.sum()))
    return sums


def head_stats(att: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of `att` (L, H, T, T) -> {name: (L, H)}, as defined in the module docstring; a map holding NaN
    gives NaN, never a number."""
    w = need_maps("att", att)                                       # (L, H, T, T) float64, or one line naming att
    T = w.shape[-1]
    q = np.arange(T)
    rows = w[..., 1:, :]                                            # (L, H, T-1, T): queries 1..T-1
    # 0 ln 0 = 0; `rows * 0.0` is that 0, and NaN for a NaN (a plain 0.0 would give a map of NaN entropy 0)
    plogp = np.where(rows > 0, rows * np.log(np.where(rows > 0, rows, 1.0)), rows * 0.0)
    offsets = (q[:, None] - q[None, :]).clip(min=0)[1:]             # (T-1, T): q - k, zero above diagonal
    if T < 2:
        return {name: np.full(w.shape[:2], np.nan) for name in STAT_NAMES}
    stats = {"entropy": (-plogp.sum(-1)).mean(-1), "distance": (rows * offsets).sum(-1).mean(-1)}
    roles = text_role_sums(torch.from_numpy(w)[None], torch.arange(T)[None])  # the roles' own definition
    for name, role in (("prev", "previous-token"), ("first", "first-token"), ("self", "self")):
        total, count = roles[role]
        stats[name] = total.numpy() / count if count else np.full(w.shape[:2], np.nan)
    return stats


def format_stats_table(stats: dict[str, np.ndarray], lang: str = "en") -> str:
    """One row per head: `layer head entropy distance prev first self` (the header in `lang`, "en" or "ko")."""
    names = messages(lang)("stats.columns").split("|")  # first: it checks lang
    n_layer, n_head = need_stats(stats)
    widths = [max(w, display_width(name)) for name, w in zip(names, (5, 4, 8, 8, 6, 6, 6))]  # 한글: two columns
    # two spaces between columns: the Korean names are two words ("이전 토큰 첫 토큰" would run together)
    lines = ["  ".join(pad(name, width, right=True) for name, width in zip(names, widths))]
    for layer in range(n_layer):
        for head in range(n_head):
            values = (float(stats[name][layer, head]) for name in STAT_NAMES)  # NaN: a text too short to measure on
            cells = [str(layer), str(head)] + ["-" if np.isnan(v) else f"{v:.4f}" for v in values]
            lines.append("  ".join(cell.rjust(width) for cell, width in zip(cells, widths)))
    return "\n".join(lines)


def need_stats(stats) -> tuple[int, int]:
    """(layers, heads) of `stats` if it is what head_stats returns, else one line naming the argument."""
    said = f"head_stats(att)'s dict of {', '.join(STAT_NAMES)}, each (layers, heads)"
    need_type("stats", stats, dict, said)
    missing = [name for name in STAT_NAMES if name not in stats]
    shapes = {np.shape(stats[name]) for name in STAT_NAMES if name not in missing}
    if missing or len(shapes) != 1 or len(next(iter(shapes))) != 2:
        got = f"no {', '.join(missing)}" if missing else f"shapes {', '.join(map(str, sorted(shapes)))}"
        raise ArgumentValueError(f"stats must be {said}, got {got}")
    return next(iter(shapes))


def record(look, settings) -> dict:
    """The text's maps and their statistics, and the recording forward they came with ("trace", explain.npz's
    arrays); `settings.head` (layer, head): the one head whose queries the text lists."""
    # the window may start inside a character: its leftover bytes are left out of the text
    text = b"".join(look.run.token_bytes[i] for i in look.ids).decode("utf-8", errors="ignore")
    return {"ids": list(look.ids), "tokens": list(look.labels), "pieces": token_pieces(look.run.tokenizer, look.ids),
            "text": text,
            "att": look.att, "prefill": len(look.ids) if look.prefill is None else look.prefill,
            "stats": head_stats(look.att), "off": look.trace.off.tolist(),
            "head": None if settings.head is None else list(settings.head), "trace": look.trace,
            **surprise(look.trace.logits, look.ids, look.label)}


def surprise(logits: np.ndarray, ids: list[int], label) -> dict:
    """Tokens 1..T-1's surprise in bits (T - 1,), and at each the EXPECTED most likely tokens with their
    probabilities (T - 1, EXPECTED), ids and `label`s: what the page's token strip draws; "uniform": log2(V), the
    surprise of a guess spread evenly over the vocabulary (the strip's darkest colour)."""
    logits = torch.as_tensor(np.asarray(logits), dtype=torch.float32)[:-1]  # after tokens 0..T-2: of tokens 1..T-1
    nats = F.cross_entropy(logits, torch.as_tensor(np.asarray(ids[1:], dtype=np.int64)), reduction="none")
    bits = nats.double().numpy() / math.log(2)
    p, top = torch.softmax(logits, -1).topk(min(EXPECTED, logits.shape[-1]))
    return {"surprise": np.round(bits, 6).tolist(), "expected": top.tolist(), "expected_p": np.round(p.double().numpy(), 6).tolist(),
            "expected_labels": {int(i): label(int(i)) for i in np.unique(top.numpy())},
            "uniform": math.log2(logits.shape[-1])}


def text(record: dict, lang: str) -> str:
    """The statistics table with its title and definitions, then where each query of `record["head"]` looks."""
    say, T = messages(lang), len(record["ids"])
    lines = [say("stats.title", n=T, cells=T**2), format_stats_table(record["stats"], lang), say("stats.defs")]
    if record["head"] is not None:
        layer, head = record["head"]
        lines += [say("stats.top", layer=layer, head=head), format_top_attended(record["att"][layer, head],
                                                                              record["tokens"])]
    return "\n".join(lines)
