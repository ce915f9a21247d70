"""The views of a text, each one module: `record(look, settings) -> dict` makes its numbers once, `text(record, lang)`
is the terminal's form of them, and its script beside it (maps.js, walkthrough.js, ...) draws them on the page.

    records = compute(run, "대한민국 국회는 법률을", ["maps", "walkthrough"], Settings(explain=(1, 0)))
    print(VIEWS["walkthrough"].text(records["walkthrough"], "ko"))
    records = compute(run, text, ["why", "lens"], Settings(query=5), off="1.0,1.2")   # with two heads switched off

    maps         every head's attention over the text and per-head statistics (--attention, --head)
    walkthrough  one head at one query token, Q·K·V step by step (--explain L.H)
    path         one token from its id to the next token (--explain path)
    lens         the next-token guess after the embeddings and after each block (--lens)
    why          a logit difference split into each part's direct share (--why)
    patch        which streams and heads carry the difference between two texts (--patch)
    words        attention read by Korean word, 어절 (--words)
    roles        what each head does, and what it costs switched off (--heads): the run's, of no text
    score        how well the model predicts a whole text (--score), however long

`compute` is the one place a text is read for the views and heads are switched off for them: the text (or its ids)
cut to the model's context, one recording forward (inspection/trace.py), and each record asked for from it, with
the heads `off` giving their mean on the run's held-out text (mode "mean") or zeros. Records hold numbers and ids,
never sentences: the terminal (generate.py), the notebook (inspection/notebook.py) and the page
(inspection/html.py) take them as they are and say them in their language.
"""

import contextlib
import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch

from cli.arguments import ArgumentValueError, need_choice, need_int, need_text, need_token_ids, need_type
from common.heads_off import MODES, HeadsOff, check_heads, read_head, read_heads
from inference.runs import Run, crop, need_run
from inspection.heldout import held_out_means
from inspection.labels import labeller, token_labels
from inspection.trace import Trace, resolve_query, trace_ids
from inspection.views import lens, maps, patch, path, roles, score, walkthrough, why, words
from model.sampling import Sampling

VIEWS = {"maps": maps, "walkthrough": walkthrough, "path": path, "lens": lens, "why": why, "patch": patch,
         "words": words, "roles": roles, "score": score}
NONE_OFF = SimpleNamespace(off={})  # what `compute` reads of a HeadsOff when it switches no head off
OF_TEXT = ("maps", "walkthrough", "path", "lens", "why", "patch", "words")  # record(look, settings): of a text's forward


@dataclass(frozen=True)
class Settings:
    """What the views are asked for, each checked once where it is read. `query`: the token the walkthrough, path,
    lens, why and words look from (negative: from the end); `explain`: the walkthrough's head (layer, head); `head`:
    the head whose queries the maps and words list; `sampling`: how the path draws the next token; `why`: the two
    tokens compared, as labels or "#ID" (None: the model's choice, its runner-up); `corrupt`, `patch_heads`: the
    patch's corrupted text and heads patched together; `layers`: the walkthrough's layers (None: all);
    `heads_text`: the roles' held-out text file (None: the run's); `mode`: what a head switched off gives, "mean" or
    "zero"; `last_only`: the path of the last token alone (a live keystroke's)."""
    query: int = -1
    explain: tuple[int, int] | None = None
    head: tuple[int, int] | None = None
    sampling: Sampling = field(default_factory=Sampling)
    why: tuple[str | None, str | None] = (None, None)
    corrupt: str | None = None
    patch_heads: tuple[tuple[int, int], ...] = ()
    layers: tuple[int, ...] | None = None
    heads_text: str | None = None
    mode: str = "mean"
    last_only: bool = False

    def __post_init__(self):
        """Each setting as the type it means ("1.0" for a head: (1, 0)), or one line naming it."""
        def put(name, value):
            object.__setattr__(self, name, value)

        put("query", need_int("query", self.query, what="a token of the text, -1 the last"))
        for name in ("explain", "head"):
            if getattr(self, name) is not None:
                put(name, read_head(getattr(self, name), name))
        need_type("sampling", self.sampling, Sampling, "a Sampling (inspection.Sampling(temperature=0.8))")
        need_type("why", self.why, (tuple, list), "two tokens (token, versus), each a label, \"#ID\" or None")
        if len(self.why) != 2:
            raise ArgumentValueError(f"why must be two tokens (token, versus), got {len(self.why)}")
        for name, value in zip(("why's token", "why's versus"), self.why):
            if value is not None:
                need_text(name, value, 'a token as the tables show it, or "#ID"; None: the model\'s choice')
        put("why", tuple(self.why))
        if self.corrupt is not None:
            need_text("corrupt", self.corrupt, "the corrupted text of the patch")
        put("patch_heads", tuple(read_heads(self.patch_heads, "patch_heads")) if self.patch_heads else ())
        if self.layers is not None:
            need_type("layers", self.layers, (list, tuple), "a list of layers, or None for all")
            put("layers", tuple(need_int("layers", layer, lo=0) for layer in self.layers))
        if self.heads_text is not None:
            need_type("heads_text", self.heads_text, (str, os.PathLike), "the path of a UTF-8 text file, or None")
        need_choice("mode", self.mode, MODES)
        need_type("last_only", self.last_only, bool, "True or False")


@dataclass
class Look:
    """What every view of one text reads, made once by `compute`: the run, the text's ids and token labels, the
    recording forward, the maps (the forward's, or a decoding's own rows: `prefill` rows from its prefill, one row
    per cached step after), the query resolved to 0..T-1, and `label(id)` for any vocabulary token."""
    run: Run
    ids: list[int]
    labels: list[str]
    trace: Trace
    att: np.ndarray
    prefill: int | None
    query: int
    label: Callable[[int], str]


def compute(run: Run, text, names, settings: Settings = Settings(), off=None, recorded=None) -> dict[str, dict]:
    """The records `names` of `text` (a str, as a prompt: <|endoftext|> first; or token ids) with the heads `off`
    ("1.0,1.2", [(1, 0)], ...; None, "" or []: none) switched off for them, from one recording forward; `recorded`: a decoding's own maps
    of these ids (model.sampling's `attention` list), whose rows the maps keep. "roles" alone needs no text."""
    need_run(run)
    need_type("names", names, (str, list, tuple), f"a view's name or a list of them ({', '.join(VIEWS)})")
    names = [need_choice("names", name, tuple(VIEWS)) for name in ([names] if isinstance(names, str) else names)]
    need_type("settings", settings, Settings, "a Settings (inspection.views.Settings(...))")
    config = run.model.config
    for name in ("explain", "head"):
        if getattr(settings, name) is not None:
            check_heads(config, [getattr(settings, name)], name)
    if settings.patch_heads:
        check_heads(config, settings.patch_heads, "patch_heads")
    if settings.layers is not None and max(settings.layers, default=0) >= config.n_layer:
        raise ArgumentValueError(f"layers names a layer this model lacks; it has layers 0..{config.n_layer - 1}")
    none = off is None or (isinstance(off, (str, list, tuple)) and not off)  # "": what RolesTable.with_role gives
    heads = [] if none else read_heads(off, "off", config)  # for a role no head has
    means = held_out_means(run, settings.heads_text) if heads and settings.mode == "mean" else None
    full = score.scored(run, text) if heads and "score" in names else None  # every head on, first
    with HeadsOff(run.model, heads, settings.mode, means) if heads else contextlib.nullcontext(NONE_OFF) as switched:
        records = {}
        if any(name in OF_TEXT for name in names):
            look = read_text(run, text, settings, {**kept_off(run), **switched.off}, recorded)
            records = {name: VIEWS[name].record(look, settings) for name in names if name in OF_TEXT}
        if "roles" in names:
            records["roles"] = roles.record(run, settings, {**kept_off(run), **switched.off})
        if "score" in names:
            records["score"] = score.record(run, text, switched.off, full)
    if heads and "path" in records:  # before and after: the next token's logits with every head on too
        logits, labels = full_next(run, look)
        records["path"] = {**records["path"], "next_logits_full": logits, "labels": {**records["path"]["labels"], **labels}}
    return {name: records[name] for name in names}


@torch.inference_mode()
def full_next(run: Run, look: Look) -> tuple[np.ndarray, dict]:
    """The last token's logits (V,) with no head switched off (the page's bars draw them beside the ablated
    model's), and the labels of their most likely tokens."""
    logits = run.model(torch.tensor([look.ids], device=run.device))[0][0, -1].float().cpu().numpy()
    return logits, {int(i): look.label(int(i)) for i in np.argsort(-logits, kind="stable")[: path.TOP]}


def kept_off(run: Run) -> dict:
    """The heads the run keeps off from its first step (train.heads_off), as a trace records them."""
    return run.kept_off.off if run.kept_off is not None else {}


def read_text(run: Run, text, settings: Settings, off: dict, recorded=None) -> Look:
    """The Look of `text` (module docstring), with `off` the heads switched off now."""
    if isinstance(text, str):
        need_text("text", text, "the text to look at")
        ids = run.encode_prompt(text)
    else:
        ids = crop(need_token_ids("text", text, run.model.config.vocab_size,
                                  "a str, or a non-empty list of token ids (run.encode_prompt(text))"),
                   run.block_size, "cut.maps")
    prefill, att = None, None
    if recorded:
        ids, att, prefill = decoded_maps(recorded, list(ids))
    trace = trace_ids(run.model, ids, off)  # the recording forward every view reads
    return Look(run, list(ids), token_labels(run.tokenizer, ids), trace, trace.att if att is None else att, prefill,
                resolve_query(settings.query, len(ids)), labeller(run.tokenizer))


def decoded_maps(recorded: list, ids: list[int]) -> tuple[list[int], np.ndarray | None, int | None]:
    """(the window of ids, its maps, prefill) as the cached decoding of `ids` (prompt + generated) computed them.

    `recorded`: the `(start, maps)` list that `model.sampling.stream_with_logits(attention=...)` filled. The maps
    cover the last window the decoding used (positions start.. of ids): the rows of its prefill, then one row per
    decoding step, each the step's own attention over the cache; (ids, None, None) when the first sample ended
    before that window began."""
    start = recorded[-1][0]
    steps = [m[0] for s, m in recorded if s == start]  # (L, H, Tq, Tk) each, batch row 0
    T = min(steps[-1].size(-1), len(ids) - start)
    if T < 1:
        return ids, None, None
    L, H = steps[0].shape[:2]
    att = np.zeros((L, H, T, T), dtype=np.float32)
    for m in steps:  # the rows Tk-Tq..Tk-1 over keys 0..Tk-1, cut at T
        Tq, Tk = m.shape[-2:]
        first, stop = Tk - Tq, min(Tk, T)
        if first < stop:
            att[:, :, first:stop, :stop] = m[:, :, : stop - first, :stop].float().cpu().numpy()
    return ids[start : start + T], att, min(steps[0].size(-2), T)
