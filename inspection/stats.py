"""Per-head statistics of causal attention maps, and the terminal tables that show them.

For one head, `att[q, k]` is the attention query token q gives key token k (each row sums to 1, zero
for k > q). entropy and distance are means over the query positions q = 1 .. T-1 (query 0 can only attend
to itself, so it would add the same trivial value to every head); NaN when T = 1.

- entropy:  mean of -sum_k att[q, k] * ln att[q, k], in nats. 0 = one key only; ln(q+1) = uniform.
- distance: mean of sum_k att[q, k] * (q - k), in tokens: how far back the head looks on average.

prev, first and self are the previous-token, first-token and self role scores of inspection/heads.py, one
definition for both: means over the queries q = 2 .. T-1 (at q = 1 the previous token is the first) of
att[q, q-1], att[q, 0] (often an "attention sink") and att[q, q]; NaN when T < 3.
"""

import numpy as np
import torch

from inspection.heads import text_role_sums
from inspection.labels import display_width, pad
from model.arguments import ArgumentValueError, need_int, need_labels, need_maps, need_type
from cli.messages import messages

STAT_NAMES = ("entropy", "distance", "prev", "first", "self")


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
            cells = [str(layer), str(head)] + [f"{stats[name][layer, head]:.4f}" for name in STAT_NAMES]
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


def format_top_attended(att: np.ndarray, labels: list[str], k: int = 3) -> str:
    """For each query token of one head's map `att` (T, T): the `k` keys it attends to most, with their attention."""
    att = need_maps("att", att, dims=2)
    need_labels("labels", labels, att.shape[-1])
    k = need_int("k", k, lo=1)
    width = max(display_width(label) for label in labels)
    lines = []
    for q, label in enumerate(labels):
        top = np.argsort(-att[q, : q + 1], kind="stable")[:k]
        targets = "  ".join(f"{labels[j]}({j}) {att[q, j]:.3f}" for j in top)
        lines.append(f"{q:>4} {pad(label, width)} -> {targets}")
    return "\n".join(lines)
