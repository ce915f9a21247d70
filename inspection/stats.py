"""Per-head statistics of causal attention maps, and the terminal tables that show them.

For one head, `att[q, k]` is the weight query token q gives key token k (each row sums to 1, zero
for k > q). Every statistic is a mean over the query positions q = 1 .. T-1: query 0 can only attend
to itself, so it would add the same trivial value to every head. With T = 1 the statistics are NaN.

- entropy:  mean of -sum_k att[q, k] * ln att[q, k], in nats. 0 = one key only; ln(q+1) = uniform.
- distance: mean of sum_k att[q, k] * (q - k), in tokens: how far back the head looks on average.
- prev:     mean of att[q, q-1], the weight on the previous token.
- first:    mean of att[q, 0], the weight on the first token (often an "attention sink").
- self:     mean of att[q, q], the weight on the query token itself.
"""

import numpy as np

from inspection.labels import display_width, pad
from inspection.messages import messages

STAT_NAMES = ("entropy", "distance", "prev", "first", "self")


def head_stats(weights: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics of `weights` (L, H, T, T) -> {name: (L, H)}, as defined in the module docstring."""
    w = np.asarray(weights, dtype=np.float64)
    T = w.shape[-1]
    q = np.arange(T)
    rows = w[..., 1:, :]                                            # (L, H, T-1, T): queries 1..T-1
    plogp = np.where(rows > 0, rows * np.log(np.where(rows > 0, rows, 1.0)), 0.0)
    offsets = (q[:, None] - q[None, :]).clip(min=0)[1:]             # (T-1, T): q - k, zero above diagonal
    per_query = {
        "entropy": -plogp.sum(-1),
        "distance": (rows * offsets).sum(-1),
        "prev": w[..., q[1:], q[:-1]],
        "first": w[..., 1:, 0],
        "self": w[..., q[1:], q[1:]],
    }
    if T < 2:
        return {name: np.full(w.shape[:2], np.nan) for name in STAT_NAMES}
    return {name: per_query[name].mean(-1) for name in STAT_NAMES}


def format_stats_table(stats: dict[str, np.ndarray], lang: str = "en") -> str:
    """One row per head: `layer head entropy distance prev first self` (the header in `lang`, "en" or "ko")."""
    n_layer, n_head = stats["entropy"].shape
    names = messages(lang)("stats.columns").split("|")
    lines = [" ".join(pad(name, width, right=True) for name, width in zip(names, (5, 4, 8, 8, 6, 6, 6)))]
    for layer in range(n_layer):
        for head in range(n_head):
            s = {name: stats[name][layer, head] for name in STAT_NAMES}
            lines.append(f"{layer:>5} {head:>4} {s['entropy']:>8.4f} {s['distance']:>8.4f} "
                         f"{s['prev']:>6.4f} {s['first']:>6.4f} {s['self']:>6.4f}")
    return "\n".join(lines)


def format_top_attended(att: np.ndarray, labels: list[str], k: int = 3) -> str:
    """For each query token of one head's map `att` (T, T): the `k` keys it attends to most, with weights."""
    width = max(display_width(label) for label in labels)
    lines = []
    for q, label in enumerate(labels):
        top = np.argsort(-att[q, : q + 1], kind="stable")[:k]
        targets = "  ".join(f"{labels[j]}({j}) {att[q, j]:.3f}" for j in top)
        lines.append(f"{q:>4} {pad(label, width)} -> {targets}")
    return "\n".join(lines)
