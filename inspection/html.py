"""attention.html: one self-contained interactive page of attention maps (inline JS/CSS, no network).

The page (template: page/page.html beside this file, its script page/*.js) lets a reader choose a layer and a head or all heads,
and hover or click a token to see where it attends and what attends to it, with the attention each gets. Given a
`Trace` (inspection/trace.py), a click on a query token of a head opens the walkthrough of that head
at that token, with the model's q, k, v and y and every number of `inspection.explain.walkthrough_numbers`,
the terminal's own (the page computes none of them). Given the `prefill` of maps from decoding, a slider steps through the generated tokens one cached
row at a time. Given head roles (inspection/heads.py), each head's caption names its strongest role, and
the role table shows what switching each head off costs, when measured (inspection/importance.py). Given
a logit lens (inspection/lens.py), the focused token shows its next-token guess after every block.

The data is embedded as JSON; the glyphs of the token labels as a NanumGothic subset (a few KB), so
Hangul renders even where no Korean font is installed; the attention as the lower triangle of each map,
quantised to uint16 (error < 1e-5) and base64-encoded, which keeps a 12-layer, 12-head, 256-token page
near 13 MB; q, k, v, y as base64 float32. `layers` keeps only some layers, for long texts.
"""

import base64
import html
import json
import math
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from inspection.explain import DIMS, FUTURE, TOP, walkthrough_numbers, why_numbers
from inspection.glossary import GLOSSARY
from inspection.heads import HeadRoles, roles_record
from cli.messages import page_messages
from inspection.plot import korean_font_path
from inspection.stats import head_stats
from inspection.words import even_spread, word_labels, word_maps
from model.sampling import TEMPERATURE
from storage.atomic import write_text_atomic

PAGE = Path(__file__).with_name("page")
TEMPLATE = PAGE / "page.html"
SCRIPTS = ["data.js", "maps.js", "walkthrough.js", "path.js", "why.js", "controls.js", "live.js", "main.js"]  # in order


def pack_att(att: np.ndarray) -> str:
    """(L, H, T, T) -> base64 of little-endian uint16 lower triangles, row by row, layer-major."""
    T = att.shape[-1]
    q, k = np.tril_indices(T)                                      # row by row: (0,0), (1,0), (1,1), ...
    tri = np.asarray(att, dtype=np.float64)[..., q, k]        # (L, H, T*(T+1)/2)
    values = np.rint(np.clip(tri, 0.0, 1.0) * 65535).astype("<u2")
    return base64.b64encode(values.tobytes()).decode("ascii")


def pack_floats(a: np.ndarray) -> str:
    """Any array -> base64 of its little-endian float32 values, C order."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")


def explain_data(trace, layers: list[int], dims: int = DIMS) -> dict:
    """What the page's walkthrough shows, for `layers`: x and out as their first `dims` values and norm, q, k, v
    and y whole, every other number of `inspection.explain.walkthrough_numbers` (each (L', H, T, ...): the keys
    listed, -1 padding them to K a row, q·k_j, ÷√d_k, Σ w_j, the norms, y's largest terms) and those the why-texts
    quote (`why_numbers`): the page looks them up and computes none of them."""
    numbers = [walkthrough_numbers(trace, layer) for layer in layers]
    K = max(n["keys"].shape[-1] for n in numbers)

    def stacked(name, fill=0.0):  # (L', ...) with the key axis padded to K
        return np.stack([np.pad(n[name], [(0, 0)] * 2 + [(0, K - n[name].shape[-1])], constant_values=fill)
                         if name in ("keys", "dot", "scaled") else n[name] for n in numbers])

    def head_and_norm(a, norm):  # (L', T, C) -> (L', T, dims + 1)
        return np.concatenate([a[..., :dims], stacked(norm)[..., None]], axis=-1)

    return {"d_head": trace.d_head, "n_embd": trace.x.shape[-1], "dims": dims, "K": K, "top_n": TOP,
            "future": FUTURE, "x": pack_floats(head_and_norm(trace.x[layers], "x_norm")),
            "out": pack_floats(head_and_norm(trace.out[layers], "out_norm")),
            **{name: pack_floats(getattr(trace, name)[layers]) for name in ("q", "k", "v", "y")},
            "keys": pack_floats(stacked("keys", -1)),
            **{name: pack_floats(stacked(name)) for name in ("dot", "scaled", "sum", "q_norm", "y_norm", "v_norm",
                                                             "top", "top_size", "top_terms")},
            "why": pack_floats(np.stack([why_numbers(trace, layer) for layer in layers], axis=1)),  # (5, L', H, T)
            "off": trace.off[layers].tolist()}  # (L', H): "", "mean", "zero"; a switched-off head's y is its replacement


def font_face_css(text: str) -> str:
    """A CSS @font-face rule embedding the NanumGothic glyphs that `text` needs, as a data URL."""
    import io
    import logging

    from fontTools import subset
    from fontTools.ttLib import TTFont

    # fontTools logs a warning per table it drops (hinting sources the subset does not need).
    logging.getLogger("fontTools.subset").setLevel(logging.ERROR)
    font = TTFont(korean_font_path())
    subsetter = subset.Subsetter(subset.Options())
    subsetter.populate(text=text)
    subsetter.subset(font)
    buffer = io.BytesIO()
    font.save(buffer)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return ('  @font-face { font-family: "EmbeddedNanumGothic"; '
            f'src: url(data:font/ttf;base64,{data}) format("truetype"); }}')


def frame_data(att: np.ndarray, layers: list[int], *, trace=None, roles=None, step: int | None = None,
               words: list[list[int]] | None = None, off: np.ndarray | None = None) -> dict:
    """One frame of the page: the maps `att` (L, H, T, T) of `layers`, their statistics, the walkthrough's
    tensors given a `Trace`, and `roles`: a caption per head ((L, H) nested lists, shown as they are) or a
    `HeadRoles` (each head's strongest role and score, which the page names in its language, and every
    score). `step`: the training step of a snapshot. `words`: the tokens of each word (inspection/words.py), whose
    word-level maps the page's switch shows. `off`: (L, H) "", "mean" or "zero", the heads switched off in the forward
    (a `Trace`'s), which the maps' titles name."""
    if isinstance(roles, HeadRoles):
        captions = [[list(roles.strongest(layer, head)) for head in range(att.shape[1])] for layer in layers]
    else:
        captions = None if roles is None else [roles[layer] for layer in layers]
    return {"step": step, "att": pack_att(att[layers]),
            "words_att": None if words is None else pack_att(word_maps(att[layers], words)),
            "stats": finite({name: value.tolist() for name, value in head_stats(att[layers]).items()}),  # NaN: null
            "roles": captions, "scores": roles_json_of(roles, layers),
            "off": None if off is None else np.asarray(off)[layers].tolist(),
            "explain": None if trace is None else explain_data(trace, layers)}


def finite(obj):
    """obj with every NaN or infinity as null: what JSON can hold (a statistic of a one-token text is NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def roles_json_of(roles, layers: list[int]) -> dict | None:
    """The role scores of `layers` as the page reads them (inspection.heads.roles_record), if `roles` has them."""
    if not isinstance(roles, HeadRoles):
        return None
    record = roles_record(roles)
    record["scores"] = {r: [rows[layer] for layer in layers] for r, rows in record["scores"].items()}
    if "importance" in record:  # the page reads the costs by the same layer index as the scores
        record["importance"] |= {k: [record["importance"][k][layer] for layer in layers] for k in ("loss", "drop")}
    return record


@dataclass(frozen=True)
class Views:
    """What a page shows beside its maps, each optional. `trace`: the walkthrough's tensors (inspection/trace.py);
    `roles`: head roles (inspection/heads.py); `lens`: every token's logit lens (inspection.lens.lens_table);
    `paths`: every token's way through the forward pass (inspection.path.forward_path, of the same trace; a
    frames page takes it as `path_data` made it); `live`: the live inspector's settings (inspection/live.py),
    which turn on its text box; `glyphs`: more characters for the embedded font (a live page shows texts it
    has not seen yet); `why`: every token's attribution (inspection/attribution.py, generate.why_page);
    `words`: the tokens of each word, for the switch that reads the maps by word (inspection/words.py); `patch`:
    a patching record with its tokens named (inspection/patching.py, generate.py's print_patch)."""
    trace: object = None
    roles: object = None
    lens: dict | None = None
    paths: dict | None = None
    live: dict | None = None
    glyphs: str = ""
    why: dict | None = None
    words: list[list[int]] | None = None
    patch: dict | None = None


def attention_page(att: np.ndarray, labels: list[str], title: str = "Attention maps", *,
                   layers: list[int] | None = None, prefill: int | None = None, lang: str = "en",
                   views: Views = Views()) -> str:
    """The HTML text of the page for `att` (L, H, T, T) and token `labels`; the options as in the
    module docstring and `frame_data`; `lang` ("en" or "ko") the language it opens in; `views` what it shows
    beside the maps (the path's with the last token's logits for the next-token bars)."""
    layers = list(range(att.shape[0])) if layers is None else list(layers)
    frame = frame_data(att, layers, trace=views.trace, roles=views.roles, words=views.words,
                       off=None if views.trace is None else views.trace.off)
    return frames_page([frame], labels, title, layers, att.shape[1], prefill, lang,
                       replace(views, paths=path_data(views.paths, views.trace)))


def path_data(path: dict | None, trace) -> dict | None:
    """The path as the page reads it: the record, and the last token's logits (base64 float32) from which the
    page draws the next token's probabilities as the sampling settings move."""
    return None if path is None else {**path, "next_logits": pack_floats(trace.logits[-1])}


def frames_page(frames: list[dict], labels: list[str], title: str, layers: list[int], n_head: int,
                prefill: int | None = None, lang: str = "en", views: Views = Views()) -> str:
    """The page of one or more `frame_data` of the same text (several: a slider over the training steps),
    opening in `lang`; it carries its texts in both languages (cli/messages.py) and switches in place.
    Of `views` it shows the lens, the paths (path_data's), the live settings and the glyphs."""
    T = len(labels)
    lens, paths, glyphs = views.lens, views.paths, views.glyphs
    data = {"n_layer": len(layers), "layers": layers, "n_head": n_head, "T": T, "tokens": list(labels),
            "prefill": T if prefill is None else int(prefill), "frames": frames, "lang": lang,
            "messages": page_messages(), "live": views.live, "lens": lens, "path": paths,
            "glossary": [list(entry) for entry in GLOSSARY], "temperature": TEMPERATURE, "why": views.why,
            "patch": views.patch,
            "words": None if views.words is None else word_labels(list(labels), views.words),
            "word_tokens": None if views.words is None else [len(tokens) for tokens in views.words],
            "words_even": None if views.words is None else np.round(even_spread(views.words), 6).tolist()}
    # "<" escaped so that no token (say "</script>") can end the script element early.
    payload = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")
    page = TEMPLATE.read_text(encoding="utf-8")
    script = "\n".join(f"// ---- {name} ----\n" + (PAGE / name).read_text(encoding="utf-8") for name in SCRIPTS)
    # the glyphs of the tokens, the title and every Korean text of the page (the language picker's too)
    lens_glyphs = "".join(lens["labels"].values()) if lens else ""
    lens_glyphs += "".join(paths["labels"].values()) if paths else ""
    lens_glyphs += "".join(part for p in views.why["last"]["parts"] for part in p.get("up", []) + p.get("down", [])
                           ) + "".join(views.why["labels"].values()) if views.why else ""
    lens_glyphs += "".join(views.patch["corrupt_labels"]) + views.patch["token"] + views.patch["versus"] if views.patch else ""
    font_css = font_face_css("".join(labels) + title + glyphs + lens_glyphs + "한국어" +
                             "".join(ko for _, ko in data["messages"].values()) + "".join(name + ko for _, name, _, ko in GLOSSARY))
    fields = {"FONT_CSS": font_css, "TITLE": html.escape(title), "DATA": payload, "SCRIPT": script}
    # one pass over the template, so a title or token that spells a placeholder stays text
    return re.sub(r"__(FONT_CSS|TITLE|DATA|SCRIPT)__", lambda m: fields[m.group(1)], page)


def save_html(att: np.ndarray, labels: list[str], path: str | os.PathLike, title: str = "Attention maps", *,
              layers: list[int] | None = None, prefill: int | None = None, lang: str = "en", **views) -> Path:
    """Write the page to `path` atomically (`views`: the fields of `Views`)."""
    page = attention_page(att, labels, title, layers=layers, prefill=prefill, lang=lang, views=Views(**views))
    return write_text_atomic(Path(path), page)
