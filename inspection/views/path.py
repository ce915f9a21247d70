"""The path view: a token through the whole forward pass, from its id to the next token (`--explain path`).

    records = compute(run, text, ["path"], Settings(sampling=Sampling(0.8, 50, 0.95, seed=0), query=-1))
    print(text(records["path"], "ko"))   # the terminal; the page (path.js beside this file) draws any token's

The record follows every token in the textbook's order: its id picks a row of tok_emb and its position a row
of pos_emb, whose sum is the residual stream; each block reads it through ln_1, its heads attend (each head's
strongest key, its attention there and the size of the head's share of W_O's output), adds their output, then
ln_2 and the MLP add theirs; ln_f and the tied head give one logit per vocabulary token; softmax, temperature,
top-k and top-p turn them into the distribution the next token is drawn from, and the seed draws it. Every
number is read from the recording forward (inspection/trace.py) or is the model's own sampling function
(model/sampling.py) applied to its logits: nothing here runs the network again, and nothing loops over
tokens. The record holds plain lists (floats to 6 decimals), indexed [token] or [layer][token] or
[layer][head][token]; a vector is its first DIMS values ("…_dims") and its norm ("…_norm"), a block's streams
their norms.
"""

from dataclasses import replace

import numpy as np
import torch

from cli.messages import messages
from inspection.labels import DIMS, off_names, table
from model.sampling import Sampling, choose_next, penalize_repetition, sampling_probs, seen_tokens

TOP = 10  # candidates shown at each sampling stage


def plain(a) -> list:
    """An array as nested lists of floats to 6 decimals: the record is read at 4, and the page's JSON stays small."""
    return np.round(np.asarray(a, dtype=np.float64), 6).tolist()


def vectors(name: str, a: np.ndarray) -> dict:
    """Vectors (..., C) as the path shows them: "<name>_dims" (..., DIMS) and "<name>_norm" (...)."""
    return {f"{name}_dims": plain(a[..., :DIMS]), f"{name}_norm": norms(a)}


def norms(a: np.ndarray) -> list:
    return plain(np.linalg.norm(a, axis=-1))


def top_of(probs: torch.Tensor) -> tuple[list, list]:
    """Each row's TOP most likely ids and their probabilities."""
    p, ids = probs.topk(min(TOP, probs.size(-1)), dim=-1)
    return ids.tolist(), plain(p.cpu())


def seen_before(ids: torch.Tensor, vocab_size: int, eos_token_id) -> torch.Tensor:
    """(T, V) bool: row i marks the tokens of ids[0..i], as `model.sampling.seen_tokens` marks a prompt that ends at
    token i (every later position of row i repeats ids[0], a token of that prefix already)."""
    T = ids.numel()
    below = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()  # on ids' device: torch.where mixes none
    prefixes = torch.where(below, ids, ids[0])  # (T, T): row i is ids[:i+1]
    return seen_tokens(prefixes, vocab_size, eos_token_id)


def sampling_stages(logits: torch.Tensor, sampling: Sampling, ids: torch.Tensor, first: int = 0) -> dict:
    """softmax, then each setting in the order model.sampling applies them (the repetition penalty, temperature,
    top-k, top-p), each stage the distribution under the settings up to it: its top ids ("top"), their
    probabilities ("p") and how many tokens keep a probability above 0 ("kept"), per token. The last stage is
    what the next token is drawn from, and "chosen" is the token that `generate.py --seed S --max-new-tokens 1`
    writes after a prompt that ends at each token: model.sampling's own draw, from a generator seeded as a
    decoding seeds it, on the logits' device. `ids`: the whole text's tokens; the logits (T', V) predict the
    tokens after ids[first:]."""
    probs = logits.softmax(-1)
    top, p = top_of(probs)
    stages = [{"name": "softmax", "top": top, "p": p, "logit": plain(logits.cpu().gather(-1, torch.tensor(top))),
               "kept": (probs > 0).sum(-1).tolist()}]
    if sampling.repetition_penalty != 1:  # the scores the decoding's choice starts from
        seen = seen_before(ids.to(logits.device), logits.size(-1), sampling.eos_token_id)[first:]  # (T', V)
        logits = penalize_repetition(logits, seen, sampling.repetition_penalty)
        probs = logits.softmax(-1)
        top, p = top_of(probs)
        stages.append({"name": "repetition_penalty", "value": sampling.repetition_penalty, "top": top, "p": p,
                       "kept": (probs > 0).sum(-1).tolist()})
    settings = {}
    for name in ("temperature", "top_k", "top_p"):
        value = getattr(sampling, name)
        if value is None:
            continue
        settings[name] = value
        probs = sampling_probs(logits, **settings)
        top, p = top_of(probs)
        stages.append({"name": name, "value": value, "top": top, "p": p, "kept": (probs > 0).sum(-1).tolist()})
    seed = sampling.seed or 0  # a draw is shown even when no seed was asked for
    # every position's draw is the first of a decoding seeded alike: one generator, one race for all rows
    generator = torch.Generator(device=logits.device).manual_seed(seed)
    chosen = choose_next(logits, sampling.temperature, sampling.top_k, sampling.top_p, generator, same_race=True)
    return {"stages": stages, "chosen": chosen.tolist(), "chosen_p": plain(probs.gather(-1, chosen[:, None])[:, 0].cpu()),
            "seed": seed}


def record(look, settings) -> dict:
    """The path of every token (of the last alone with settings.last_only: a live keystroke's), drawn with
    settings.sampling as a decoding draws (the end-of-text token unpenalised, as inference.textgen decodes);
    "query" the token the terminal follows, "next_logits" the last token's logits, from which the page draws the
    next token's probabilities as the sampling settings move."""
    trace = look.trace
    decoding = replace(settings.sampling, eos_token_id=look.run.eot_id)
    first = len(look.ids) - 1 if settings.last_only else 0
    path = forward_path(look.run.model, trace, look.label, decoding, first)
    return {**path, "query": look.query, "next_logits": trace.logits[-1]}


def forward_path(model, trace, label, sampling: Sampling = Sampling(), first: int = 0) -> dict:
    """The path of tokens first..T-1 (the module docstring; "first" says where the lists start: a live keystroke
    asks for the last token's alone); `label(id)` names the vocabulary tokens the record shows."""
    L, H, T, d = trace.q.shape
    C = trace.tok.shape[-1]
    shares = trace.shares(slice(first, None))  # (L, H, T', C): each head's part of out
    att = trace.att[:, :, first:]  # (L, H, T', T)
    key = att.argmax(-1)  # the strongest key of each head and token (the masked future holds 0)
    has_mlp = trace.hidden.shape[-1] > 0
    blocks = {"key": key.tolist(), "att": plain(np.take_along_axis(att, key[..., None], -1)[..., 0]),
              "share": norms(shares), "off": trace.off.tolist(), **{f"{name}_norm": norms(getattr(trace, name)[:, first:])
                                         for name in ("resid", "out", "mid", "block")},
              "mlp_norm": norms(trace.mlp[:, first:]) if has_mlp else None,
              "active": plain((trace.hidden[:, first:] > 0).mean(-1)) if has_mlp else None}
    device = model.tok_emb.weight.device  # where a decoding would draw
    logits = torch.from_numpy(trace.logits[first:]).to(device)  # (T', V)
    sampled = sampling_stages(logits, sampling, torch.from_numpy(trace.ids), first)
    shown = {i for stage in sampled["stages"] for row in stage["top"] for i in row} | set(sampled["chosen"])
    return {"T": T, "first": first, "C": C, "V": trace.logits.shape[-1], "L": L, "H": H, "d": d,
            "ids": trace.ids.tolist(), **vectors("tok", trace.tok[first:]), **vectors("pos", trace.pos[first:]),
            **vectors("sum", trace.resid[0, first:]), "blocks": blocks, **vectors("final", trace.final[first:]),
            "logit_max": plain(logits.max(-1).values.cpu()), "logit_min": plain(logits.min(-1).values.cpu()),
            "sampling": sampled,
            "labels": {i: label(i) for i in sorted(shown | set(trace.ids.tolist()))}}


def vec(path: dict, name: str, *index) -> str:
    """`[ 0.1234, -0.5678, …]   |·| = 1.2345`: one vector of the record."""
    dims, norm = path[f"{name}_dims"], path[f"{name}_norm"]
    for i in index:
        dims, norm = dims[i], norm[i]
    return "[" + ", ".join(f"{x: .4f}" for x in dims) + f", …]   |·| = {norm:.4f}"


def text(path: dict, lang: str) -> str:
    """The path of the record's "query" token as text, each step with what it computes and why, in `lang`."""
    say = messages(lang)
    at, C, V, label = path["query"], path["C"], path["V"], path["labels"].__getitem__
    if at < path["first"]:
        raise ValueError(f"the record holds tokens {path['first']}..{path['T'] - 1}, not token {at}")
    i, token_id = at - path["first"], path["ids"][at]  # i: the record's index
    lines = [say("path.title", i=at, token=repr(label(token_id)), id=token_id, T=path["T"], L=path["L"], C=C, V=V), ""]
    lines += [say("path.embed", id=token_id, i=at, C=C), f"   tok_emb[{token_id}] = {vec(path, 'tok', i)}",
              f"   pos_emb[{at}] = {vec(path, 'pos', i)}", f"   tok + pos = {vec(path, 'sum', i)}", ""]
    b = path["blocks"]
    mlp = "" if b["active"] is not None else "_no_mlp"  # an attention-only model: no MLP to name
    lines.append(say("path.blocks" + mlp, C=C, H=path["H"], d=path["d"], i=at))
    for layer in range(path["L"]):
        lines.append(say("path.block" + mlp, layer=layer, resid=f"{b['resid_norm'][layer][i]:.4f}",
                         out=f"{b['out_norm'][layer][i]:.4f}", mid=f"{b['mid_norm'][layer][i]:.4f}",
                         block=f"{b['block_norm'][layer][i]:.4f}"))
        rows = [["head", say("path.key"), "j", "att", "|share|", ""]]  # the last column names a head that is off
        for h in range(path["H"]):
            j = b["key"][layer][h][i]
            mode = b["off"][layer][h]  # a switched-off head's share is its replacement's (mean W_O, or 0)
            rows.append([f"{layer}.{h}", label(path["ids"][j]), str(j), f"{b['att'][layer][h][i]:.4f}",
                         f"{b['share'][layer][h][i]:.4f}"] + ([say("ablate.off", mode=say("ablate.short_" + mode))]
                                                              if mode else [""]))
        lines += table(rows)
        off = {(layer, h): mode for h, mode in enumerate(b["off"][layer]) if mode}
        if off:
            lines.append(say("path.off_note", heads=off_names(off, say)))
        if b["active"] is not None:
            lines.append(say("path.mlp", mlp=f"{b['mlp_norm'][layer][i]:.4f}",
                             active=f"{100 * b['active'][layer][i]:.1f}", hidden=4 * C))
    lines += ["", say("path.final", C=C, V=V), f"   ln_f = {vec(path, 'final', i)}",
              say("path.logits", max=f"{path['logit_max'][i]:.4f}", min=f"{path['logit_min'][i]:.4f}"), ""]
    sampled = path["sampling"]
    for stage in sampled["stages"]:
        name = stage["name"]
        lines.append(say(f"path.{name}", value=stage.get("value", ""), kept=stage["kept"][i], V=V))
        logit = stage.get("logit")
        rows = [[say("path.rank"), say("explain.token"), "p"] + (["logit"] if logit else [])]
        for r, (t, p) in enumerate(zip(stage["top"][i], stage["p"][i])):
            rows.append([str(r + 1), label(t), f"{p:.4f}"] + ([f"{logit[i][r]:.4f}"] if logit else []))
        lines += table(rows)
    chosen = sampled["chosen"][i]
    lines += [say("path.chosen", token=repr(label(chosen)), id=chosen, p=f"{sampled['chosen_p'][i]:.4f}",
                  seed=sampled["seed"]), "", say("path.hint")]
    return "\n".join(lines)
