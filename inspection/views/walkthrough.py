"""The walkthrough view: one attention head on one query token, step by step, with the model's own numbers.

    records = compute(run, text, ["walkthrough"], Settings(head=(1, 0), query=-1))
    print(text(records["walkthrough"], "ko"))      # head 1.0 at the last token (--explain 1.0)

The steps are those of the textbook formula, in its order: the query token and the keys it may see;
the normalised input x_j of each; q = x W_Q + b_Q, k_j, v_j; the scores q·k_j; their division by
√d_k; the causal mask (future keys -inf); the softmax's attention w_j (they sum to 1); y = Σ_j w_j v_j and
its largest contributions w_j v_j; where y goes (concatenated with the other heads, times W_O). Each step says
why, from the numbers shown: what q, k and v are for, why the scores are divided by √d_k (their spread before
and after, the largest attention without the division), why the mask comes before softmax, how much of y its
strongest term makes, each head's share of out, and that a map is a hint, not a causal explanation.
Vectors show their first `DIMS` values and then "…"; explain.npz holds them whole.

The record holds every number the steps show for every head and query of its layers (the page opens any of them
with a click; walkthrough.js beside this file draws them, as coloured cells too: q ⊙ k_j of the most attended key
is the record's; and on a decoding's page the KV cache, step by step, from its k, v and q), and at `focus` the one head and query the terminal
walks through, with what only that walk needs (its attention row, its head's share of W_O's output).
"""

import math

import numpy as np

from inspection.labels import DIMS, table, vector, with_gaps
from cli.messages import messages

ALL_KEYS = 24  # up to this many visible keys every one is listed; beyond, a selection
FUTURE = 3  # masked keys listed after the query, to show the mask at work
TOP = 3  # contributions to y listed


def listed_keys(att: np.ndarray) -> np.ndarray:
    """The keys the walkthrough lists for every query of every head, att (H, T, T) -> (H, T, K), ascending, -1
    padding: every key the query sees when there are at most ALL_KEYS of them, else the first, the 8 strongest and
    the last 4; then up to FUTURE masked ones after the query."""
    T = att.shape[-1]
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]  # query, key
    strongest = np.zeros(att.shape, dtype=bool)
    np.put_along_axis(strongest, np.argsort(-att, axis=-1, kind="stable")[..., :8], True, axis=-1)  # masked: 0, last
    seen = (j <= i) & ((i < ALL_KEYS) | (j == 0) | (j >= i - 3) | strongest)
    listed = seen | ((j > i) & (j <= i + FUTURE))  # (H, T, T)
    count = listed.sum(-1)
    keys = np.argsort(~listed, axis=-1, kind="stable")[..., : count.max()]  # the listed keys first, in order
    return np.where(np.arange(keys.shape[-1]) < count[..., None], keys, -1)


WHY = ("before", "after", "largest", "undivided", "mix")  # the numbers the why-texts quote, per query


def why_numbers(trace, layer: int) -> np.ndarray:
    """(5, H, T): for every head of `layer` and every query, over the keys it may see: the scores' standard
    deviation before ("before", q·k_j) and after ("after") the division by √d_k; the largest attention with the
    division ("largest") and without it ("undivided", softmax of q·k_j); and the share of y's largest term
    w_j |v_j| in Σ_j w_j |v_j| ("mix"). The terminal quotes them for one query, the page for any. One layer at a
    time: the (H, T, T) temporaries of a long text stay a layer's, not the model's."""
    att = trace.att[layer]
    T = att.shape[-1]
    visible = np.tril(np.ones((T, T), dtype=bool))  # (T, T): key j <= query i
    n = visible.sum(-1)  # (T,)
    scaled = trace.scores[layer].astype(np.float64)
    raw = scaled * np.sqrt(trace.d_head)

    def std(a):  # over each row's visible keys
        mean = np.where(visible, a, 0).sum(-1) / n
        return np.sqrt(np.where(visible, (a - mean[..., None]) ** 2, 0).sum(-1) / n)

    e = np.where(visible, np.exp(raw - np.where(visible, raw, -np.inf).max(-1, keepdims=True)), 0)
    terms = att * np.linalg.norm(trace.v[layer], axis=-1)[..., None, :]  # (H, T, T): w_j |v_j|, 0 where masked
    with np.errstate(invalid="ignore"):  # a head whose values are all zero (a hand-built model) has no largest share: nan
        largest = terms.max(-1) / terms.sum(-1)
    return np.stack([std(raw), std(scaled), att.max(-1), (e / e.sum(-1, keepdims=True)).max(-1), largest])


def walkthrough_numbers(trace, layer: int) -> dict:
    """Every number the walkthrough shows beyond the recorded tensors, for every head of `layer` and every query,
    computed once here for the terminal (`explain_head`) and the page alike (H: heads, T: queries, K: keys listed):
    "keys" (H, T, K) the keys listed (`listed_keys`; -1 pads), "dot" (H, T, K) their
    q·k_j, "scaled" (H, T, K) the model's own q·k_j/√d_k (its recorded scores), "sum" (H, T) Σ_j w_j, "q_norm",
    "y_norm" (H, T) |q| and |y| of each query, "v_norm" (H, T) |v_j| of each key, "x_norm", "out_norm" (T,) |x_j|
    and |out_i| (the layer's input and output, all heads'), "top" (H, T, TOP) the keys j of
    y's largest terms w_j v_j by norm, w_j |v_j|, strongest first (keys after the query, of size 0, come last: a
    reader keeps j <= query), "top_size" (H, T, TOP) their w_j |v_j|, "top_terms" (H, T, TOP, DIMS) the first
    values of w_j v_j, "best" (H, T) the most attended key j* of each query and "qk" (H, T, d) q ⊙ k_j*, the
    products whose sum is q·k_j* (the page draws them as cells)."""
    att, q, k, v = trace.att[layer], trace.q[layer], trace.k[layer], trace.v[layer]  # (H, T, T), 3 x (H, T, d)
    H, T, _ = att.shape
    keys = listed_keys(att)  # (H, T, K)
    at = np.maximum(keys, 0)  # a padding key reads key 0; its values are never shown
    heads = np.arange(H)[:, None, None]
    best = att.argmax(-1)  # (H, T): the first of the largest, always among the listed keys (the 8 strongest)
    dot = np.einsum("htd,htkd->htk", q.astype(np.float64), k[heads, at].astype(np.float64))
    v_norm = np.linalg.norm(v.astype(np.float64), axis=-1)  # (H, T)
    size = att * v_norm[:, None, :]  # (H, T, T): w_j |v_j|, 0 where masked
    top = np.argsort(-size, axis=-1, kind="stable")[..., :TOP]  # (H, T, TOP)
    w_top = np.take_along_axis(att, top, -1)  # (H, T, TOP)
    return {"keys": keys, "dot": dot, "scaled": trace.scores[layer][heads, np.arange(T)[None, :, None], at],
            "sum": att.sum(-1, dtype=np.float64), "q_norm": np.linalg.norm(q.astype(np.float64), axis=-1),
            "x_norm": np.linalg.norm(trace.x[layer].astype(np.float64), axis=-1),  # (T,)
            "out_norm": np.linalg.norm(trace.out[layer].astype(np.float64), axis=-1),  # (T,)
            "y_norm": np.linalg.norm(trace.y[layer].astype(np.float64), axis=-1), "v_norm": v_norm, "top": top,
            "top_size": np.take_along_axis(size, top, -1),
            "top_terms": w_top[..., None] * v[heads, top][..., :DIMS], "best": best,
            "qk": q.astype(np.float64) * k[heads[..., 0], best].astype(np.float64)}


def record(look, settings) -> dict:
    """Every number of the walkthrough for the layers shown (settings.layers, all when None) and, with
    settings.explain, the focus: that head at settings.query."""
    trace = look.trace
    L, H, T, d = trace.q.shape
    focus = settings.explain
    layers = sorted(set(range(L) if settings.layers is None else settings.layers) | ({focus[0]} if focus else set()))
    numbers = [walkthrough_numbers(trace, layer) for layer in layers]
    K = max(n["keys"].shape[-1] for n in numbers)

    def stacked(name, fill=0.0):  # (L', ...) with the key axis padded to K
        return np.stack([np.pad(n[name], [(0, 0)] * 2 + [(0, K - n[name].shape[-1])], constant_values=fill)
                         if name in ("keys", "dot", "scaled") else n[name] for n in numbers])

    def head_and_norm(a, norm):  # (L', T, C) -> (L', T, DIMS + 1): the first values and the norm
        return np.concatenate([a[..., :DIMS], stacked(norm)[..., None]], axis=-1)

    found = {"layers": layers, "n_layer": L, "d_head": d, "n_embd": trace.x.shape[-1], "dims": DIMS, "K": K,
             "top_n": TOP, "future": FUTURE, "mlp": trace.hidden.shape[-1] > 0,
             "x": head_and_norm(trace.x[layers], "x_norm"), "out": head_and_norm(trace.out[layers], "out_norm"),
             **{name: getattr(trace, name)[layers] for name in ("q", "k", "v", "y")}, "keys": stacked("keys", -1),
             **{name: stacked(name) for name in ("dot", "scaled", "sum", "q_norm", "y_norm", "v_norm", "top",
                                                  "top_size", "top_terms", "best", "qk")},
             "why": np.stack([why_numbers(trace, layer) for layer in layers], axis=1),  # (5, L', H, T)
             "off": trace.off[layers].tolist(), "focus": None}
    if focus is not None:
        layer, head = focus
        shares = trace.shares(slice(look.query, look.query + 1))[layer, :, 0]  # (H, C): each head's part of out
        found["focus"] = {"layer": layer, "head": head, "query": look.query, "tokens": list(look.labels),
                          "w": trace.att[layer, head, look.query], "share": shares[head],
                          "shares": np.linalg.norm(shares, axis=-1)}
    return found


def text(record: dict, lang: str) -> str:
    """The walkthrough of the record's focus (see the module docstring), in `lang` ("en" or "ko", cli/messages.py:
    the same numbers in both)."""
    say, f = messages(lang), record["focus"]
    layer, head, i, labels = f["layer"], f["head"], f["query"], f["tokens"]
    li = record["layers"].index(layer)
    H, T, d = record["q"].shape[1:]
    C = record["n_embd"]
    x, q, k, v = record["x"][li], record["q"][li, head, i], record["k"][li, head], record["v"][li, head]
    w = f["w"]
    n = {name: record[name][li, head, i] for name in ("keys", "dot", "scaled", "sum", "q_norm")}  # this head, query
    listed = [int(j) for j in n["keys"] if j >= 0]
    keys, future = [j for j in listed if j <= i], [j for j in listed if j > i]
    column = {j: c for c, j in enumerate(listed)}  # where key j's q·k_j sits in the record
    token = say("explain.token")
    lines = [say("explain.title", layer=layer, head=head, i=i, token=repr(labels[i]), T=T, C=C, H=H, d=d), ""]
    mode = record["off"][li][head]  # "": on; a switched-off head's y is what replaced it (inspection/trace.py)
    if mode:
        lines += [say("explain.off", layer=layer, head=head, mode=say("ablate." + mode)), ""]

    lines.append(say("explain.step1", i=i, masked=say("explain.masked_later") if i < T - 1 else ""))
    if len(keys) < i + 1:
        lines.append(say("explain.some_keys", shown=len(keys), n=i + 1))
    lines.append(say("explain.x", dims=DIMS, C=C))
    rows = [["j", token, "x_j", "|x_j|"]] + with_gaps(keys, lambda j: [
        str(j), labels[j], vector(x[j][:DIMS], total=C), f"{x[j][DIMS]:.4f}"])
    lines += table(rows) + [""]

    lines.append(say("explain.step2", head=head, i=i, C=C, d=d))
    lines.append(f"   q = {vector(q)}   |q| = {n['q_norm']:.4f}")
    rows = [["j", token, "k_j", "v_j"]] + with_gaps(keys, lambda j: [str(j), labels[j], vector(k[j]), vector(v[j])])
    lines += table(rows) + [say("explain.why_qkv", i=i), ""]

    root = math.sqrt(d)
    lines.append(say("explain.step34", d=d, C=C, H=H, root=f"{root:.4f}"))
    lines.append(say("explain.step56"))

    def score_cells(j):
        dot, scaled = n["dot"][column[j]], n["scaled"][column[j]]  # step 3, and the model's own q·kᵀ/√d_k
        return [str(j), labels[j], f"{dot: .4f}", f"{scaled: .4f}", " -∞" if j > i else f"{scaled: .4f}", f"{w[j]:.4f}"]

    rows = [["j", token, "q·k_j", "÷√d_k", say("explain.masked"), "w_j"]] + with_gaps(keys + future, score_cells)
    lines += table(rows)
    if T - 1 - i > FUTURE:
        lines.append(say("explain.more_masked", n=T - 1 - i - FUTURE))
    why = dict(zip(WHY, record["why"][:, li, head, i]))
    lines += [f"   Σ w_j = {n['sum']:.6f}", say("explain.why_scale", d=d, **{k: f"{why[k]:.4f}" for k in WHY[:4]}),
              say("explain.why_mask"), ""]  # step 4's reason, then step 5's

    lines += mix_lines(record, li, i, say) + [""] + output_lines(record, li, i, say)
    lines += ["", say("explain.off_hint" if mode else "path.hint")]
    return "\n".join(lines)


def mix_lines(record: dict, li: int, i: int, say) -> list[str]:
    """Step 7: the head's output y at query i, and the largest terms w_j v_j of its sum (layer index `li`)."""
    f = record["focus"]
    head, labels, w, d = f["head"], f["tokens"], f["w"], record["q"].shape[-1]
    y = record["y"][li, head, i]
    n = {name: record[name][li, head, i] for name in ("y_norm", "top", "top_size", "top_terms")}  # this head, query
    v_norm = record["v_norm"][li, head]  # (T,)
    if record["off"][li][head]:
        lines = [say("explain.step7_off", y=vector(y), norm=f"{n['y_norm']:.4f}")]
    else:
        lines = [f"7. y = Σ_j w_j v_j = {vector(y)}   |y| = {n['y_norm']:.4f}"]
    lines.append(say("explain.largest"))
    rows = [["j", say("explain.token"), "w_j", "|v_j|", "w_j |v_j|", "w_j v_j"]]
    for j, size, term in zip(n["top"], n["top_size"], n["top_terms"]):
        j = int(j)
        if j <= i:  # a key after the query adds nothing
            rows.append([str(j), labels[j], f"{w[j]:.4f}", f"{v_norm[j]:.4f}", f"{size:.4f}", vector(term, total=d)])
    mix = record["why"][WHY.index("mix"), li, head, i]
    return lines + table(rows) + [say("explain.why_mix", share=f"{100 * mix:.1f}")]


def output_lines(record: dict, li: int, i: int, say) -> list[str]:
    """Step 8: W_O mixes the heads' outputs into what attention adds to the residual stream at query i."""
    f = record["focus"]
    head, H, d, C = f["head"], record["q"].shape[1], record["q"].shape[3], record["n_embd"]
    lo, hi = head * d, (head + 1) * d
    out = record["out"][li, i]
    lines = [say("explain.step8", d=d, lo=lo, last=hi - 1, C=C, H=H, i=i),
             f"   out_{i} = {vector(out[:DIMS], total=C)}   |out| = {out[DIMS]:.4f}",
             say("explain.share", lo=lo, end=hi, share=vector(f["share"]), norm=f"{np.linalg.norm(f['share']):.4f}")]
    marks = [say("explain.off_mark") if record["off"][li][h] else "" for h in range(H)]
    named = ", ".join(f"{h}: {x:.4f}{m}" for h, (x, m) in enumerate(zip(f["shares"], marks)))
    return lines + [say("explain.why_heads", shares=named),
                    say("explain.residual", i=i, mlp=say("explain.mlp_follows") if record["mlp"] else "")]

