"""The why view: why this token and not that one, a prediction's logit difference split into the parts that wrote it.

    records = compute(run, text, ["why"], Settings(query=-1))             # the model's choice against its runner-up
    records = compute(run, text, ["why"], Settings(query=5, why=("␣법률", "#3")))   # or two tokens named
    print(text(records["why"], "ko"))

The last residual stream at a token is a sum: the token's row of tok_emb, the position's row of pos_emb, and,
for every block, each head's output y_h W_O (its d rows of W_O), the attention's bias b_O and the MLP's output.
The logits are lm_head(ln_f(stream)), and ln_f subtracts the stream's mean and divides by its scale σ (the square
root of its variance plus eps), then multiplies by a gain g and adds a bias b. Held at the σ this token's stream
has (as computed in the forward pass), ln_f is affine, so it splits over the sum: part p becomes
(p − mean(p)) / σ · g, and ln_f's bias b is a part of its own. The tied head turns each into logits, and the
difference of two tokens' logits into a difference of their rows of tok_emb: share(p) = ((p − mean p) / σ · g) ·
(E[A] − E[B]). The shares add up to logit(A) − logit(B) exactly (up to float rounding), and each share is what
removing that one part from the stream would change, σ held fixed. Held fixed, σ is the one thing this leaves out:
removing a part would also change σ, and so every other part's share a little; that is why the split is exact
only at the stream the model computed.

A share is a property of this text at this token, not of the head: the same head can push other tokens elsewhere.
Every number is read from the recording forward (inspection/trace.py) and the model's own weights.
"""

import numpy as np

from cli.arguments import need_int, need_type
from cli.errors import UserError
from cli.messages import messages
from inspection.labels import off_mark, off_names, table
from inspection.trace import Trace, resolve_query
from model import GPT

TOP = 5  # tokens a head pushes up and down the most, shown per head


def stream_parts(model, trace) -> tuple[list[dict], np.ndarray]:
    """The parts whose sum is the last residual stream: ([{"name", "kind", "layer", "head"}], (P, T, C) float64)."""
    c, vectors, parts = model.config, [trace.tok, trace.pos], [{"name": "tok_emb", "kind": "embedding"},
                                                                {"name": "pos_emb", "kind": "embedding"}]
    shares = trace.shares()  # (L, H, T, C): out = concat(y) W_O + b_O, a head's rows of W_O at a time
    for layer, block in enumerate(model.blocks):
        for head in range(c.n_head):
            vectors.append(shares[layer, head])  # (T, C)
            parts.append({"name": f"head {layer}.{head}", "kind": "head", "layer": layer, "head": head})
        if block.attn.c_proj.bias is not None:
            vectors.append(np.broadcast_to(block.attn.c_proj.bias.detach().cpu().double().numpy(), trace.tok.shape))
            parts.append({"name": f"attention bias {layer}", "kind": "bias", "layer": layer})
        if block.mlp is not None:
            vectors.append(trace.mlp[layer])
            parts.append({"name": f"MLP {layer}", "kind": "mlp", "layer": layer})
    return parts, np.stack([np.asarray(v, dtype=np.float64) for v in vectors])  # (P, T, C)


def through_ln_f(model, trace, vectors: np.ndarray, tokens=slice(None)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each part at `tokens` through ln_f at their σ held: vectors (P, T', C) -> ((P, T', C) the parts' outputs,
    (C,) ln_f's bias or zeros, (T',) σ)."""
    ln_f = model.ln_f
    stream = trace.block[-1][tokens].astype(np.float64)  # (T', C): what ln_f reads
    sigma = np.sqrt(stream.var(-1) + ln_f.eps)  # (T,): LayerNorm's biased variance
    gain = ln_f.weight.detach().cpu().double().numpy()
    bias = np.zeros_like(gain) if ln_f.bias is None else ln_f.bias.detach().cpu().double().numpy()
    centred = vectors - vectors.mean(-1, keepdims=True)  # (P, T, C)
    return centred / sigma[None, :, None] * gain, bias, sigma


def choice_and_runner_up(logits: np.ndarray) -> tuple[int, int]:
    """The two most likely next tokens of a (V,) row of logits, the first maximum first."""
    order = np.argsort(-logits, kind="stable")
    return int(order[0]), int(order[1])


def check_token(token: int, vocab_size: int, what: str) -> int:
    if not 0 <= token < vocab_size:
        raise UserError(f"{what} {token} is not a token id of this model (0..{vocab_size - 1})")
    return token


def attribute(model, trace, query: int = -1, token: int | None = None, versus: int | None = None) -> dict:
    """The logit difference logit(token) − logit(versus) at `query` (default: the model's choice and its runner-up
    there), split into shares (the module docstring): {"query", "token", "versus", "logit_diff", "sigma", "parts":
    [{"name", "kind", ("layer", "head"), "share", ("up", "down": a head's TOP token ids)}], ranked by |share|}."""
    need_type("model", model, GPT, "a GPT (run.model)")
    need_type("trace", trace, Trace, "a Trace (maps.trace, or trace_ids(model, ids))")
    query = need_int("query", query, what="a token of the text, -1 the last")
    token, versus = (None if t is None else need_int(name, t, what="a token id, or None")
                     for name, t in (("token", token), ("versus", versus)))
    T, V = trace.logits.shape
    i = resolve_query(query, T)
    first, second = choice_and_runner_up(trace.logits[i])
    token = first if token is None else check_token(token, V, "token")  # named as the argument is
    versus = (second if token == first else first) if versus is None else check_token(versus, V, "versus")
    if versus == token:
        raise UserError(f"the two tokens to compare are the same ({token}); name two different ones")
    parts, vectors = stream_parts(model, trace)
    outputs, bias, sigma = through_ln_f(model, trace, vectors[:, i : i + 1], slice(i, i + 1))  # (P, 1, C)
    E = model.tok_emb.weight.detach().cpu().double().numpy()  # (V, C), the tied head
    direction = E[token] - E[versus]  # (C,)
    shares = outputs[:, 0] @ direction  # (P,)
    heads = [p for p in range(len(parts)) if parts[p]["kind"] == "head"]
    pushed = outputs[heads, 0] @ E.T  # (heads, V): the logits each head's output alone adds
    top = np.argsort(-pushed, axis=-1, kind="stable")
    records = [{**part, "share": float(share)} for part, share in zip(parts, shares)]
    for row, p in enumerate(heads):
        records[p] |= {"up": top[row, :TOP].tolist(), "down": top[row, ::-1][:TOP].tolist()}
    records.append({"name": "ln_f bias", "kind": "bias", "share": float(bias @ direction)})
    records.sort(key=lambda r: -abs(r["share"]))
    return {"query": i, "token": token, "versus": versus,
            "logit_diff": float(trace.logits[i, token] - trace.logits[i, versus]), "sigma": float(sigma[0]),
            "parts": records}


def shares_per_token(model, trace) -> dict:
    """For the page: at every token, the shares of the model's choice against its runner-up, {"names": [P part
    names], "kinds": [...], "token": (T,), "versus": (T,), "logit_diff": (T,), "sigma": (T,) ln_f's scale held,
    "shares": (P, T), "order": (T, P) the parts by |share|, largest first} (heads' top tokens are left to
    `attribute`, which one token at a time can afford)."""
    parts, vectors = stream_parts(model, trace)
    outputs, bias, sigma = through_ln_f(model, trace, vectors)  # (P, T, C)
    order = np.argsort(-trace.logits, axis=-1, kind="stable")[:, :2]  # (T, 2)
    E = model.tok_emb.weight.detach().cpu().double().numpy()
    directions = E[order[:, 0]] - E[order[:, 1]]  # (T, C)
    shares = np.concatenate([np.einsum("ptc,tc->pt", outputs, directions), (directions @ bias)[None]])  # (P + 1, T)
    rows = np.arange(len(order))
    ranked = np.argsort(-np.abs(shares).T, axis=-1, kind="stable")  # (T, P + 1): each token's parts, largest first
    return {"names": [p["name"] for p in parts] + ["ln_f bias"], "kinds": [p["kind"] for p in parts] + ["bias"],
            "token": order[:, 0].tolist(), "versus": order[:, 1].tolist(),
            "logit_diff": (trace.logits[rows, order[:, 0]] - trace.logits[rows, order[:, 1]]).tolist(),
            "sigma": sigma.tolist(), "shares": np.round(shares, 6).tolist(), "order": ranked.tolist()}


def token_id(text: str, labels: dict[str, int], vocab_size: int) -> int:
    """A token the learner names: its label as the tables show it (␣ for a leading space, <0xNN> for a byte), or
    #ID; a UserError for anything else."""
    if text.startswith("#") and text[1:].isdigit():
        return check_token(int(text[1:]), vocab_size, "the token")
    if text not in labels:
        raise UserError(f"{text!r} is not one token of this model's vocabulary; name a token as the tables show it "
                        "(␣ for a leading space, e.g. ␣법률), or by its id as #123")
    return labels[text]


def text(record: dict, lang: str, rows: int = 12) -> str:
    """The record's focus as a ranked table, with what a share means, in `lang`; a head switched off is marked so
    (what it writes is its replacement's)."""
    say, focus = messages(lang), record["focus"]
    off = {f"head {l}.{h}": mode for l, h, mode in record["off"]}  # by part name
    lines = [say("why.title", i=focus["query"], token=repr(focus["token"]), versus=repr(focus["versus"]),
                 diff=f"{focus['logit_diff']:.4f}", sigma=f"{focus['sigma']:.4f}"), say("why.exact"), ""]
    cells = [[say("why.share"), say("why.part"), say("why.up"), say("why.down")]]  # the part's name left-aligned
    for part in focus["parts"][:rows]:
        mark = off_mark(off.get(part["name"]), say)
        cells.append([f"{part['share']:+.4f}", part["name"] + mark, " ".join(part.get("up", [])[:3]),
                      " ".join(part.get("down", [])[:3])])
    lines += table(cells)
    rest = sum(p["share"] for p in focus["parts"][rows:])
    if len(focus["parts"]) > rows:
        lines.append(say("why.rest", n=len(focus["parts"]) - rows, share=f"{rest:+.4f}"))
    total = sum(p["share"] for p in focus["parts"])
    lines += [say("why.sum", total=f"{total:.4f}", diff=f"{focus['logit_diff']:.4f}"), "", say("why.meaning")]
    if off:
        lines.append(say("why.off", heads=off_names({(l, h): mode for l, h, mode in record["off"]}, say)))
    return "\n".join(lines)


def labels_to_ids(label, vocab_size: int) -> dict[str, int]:
    """Every token's label -> its id (the first id where two share a label)."""
    found: dict[str, int] = {}
    for i in range(vocab_size):
        found.setdefault(label(i), i)
    return found


def named(record: dict, label) -> dict:
    """An `attribute` record with every token id named by its label too, as why.json and the page hold it."""
    parts = [{**p, **{k: [label(t) for t in p[k]] for k in ("up", "down") if k in p}} for p in record["parts"]]
    return {**record, "token_id": record["token"], "versus_id": record["versus"], "token": label(record["token"]),
            "versus": label(record["versus"]), "parts": parts}


def record(look, settings) -> dict:
    """Every token's shares of its choice against its runner-up (`shares_per_token`, with "labels" for those
    tokens), at "focus" the query's whole record (`attribute`, the tokens settings.why names or its choice and
    runner-up), every token named, with what each head pushes, and "off": the heads switched off, [layer, head,
    "mean" or "zero"], whose shares are their replacements'."""
    model, label = look.run.model, look.label
    V = model.config.vocab_size
    names = labels_to_ids(label, V) if any(settings.why) else {}
    token, versus = (None if name is None else token_id(name, names, V) for name in settings.why)
    shares = shares_per_token(model, look.trace)
    labels = {i: label(i) for i in set(shares["token"]) | set(shares["versus"])}
    off = [[l, h, mode] for (l, h), mode in sorted(look.trace.switched_off().items())]
    return {**shares, "labels": labels, "off": off,
            "focus": named(attribute(model, look.trace, look.query, token, versus), label)}
