"""attention.html: one self-contained interactive page of a text's views (inline JS/CSS, no network).

    html = page(compute(run, text, ["maps", "walkthrough", "lens", "path", "why"]), title, "ko")

The page draws the records of inspection/views/ (each view's script beside its module: maps.js, walkthrough.js,
path.js, why.js; the page's own parts in page/: page.html, data.js, draw.js, controls.js, live.js, main.js). A reader chooses a
layer and a head or all heads, and hovers or clicks a token to see where it attends and what attends to it. Given
the walkthrough's record, a click on a query token of a head opens the walkthrough of that head at that token, with
the terminal's own numbers (the page computes none of them). Given maps from decoding (`prefill`), a slider steps
through the generated tokens one cached row at a time. Given the roles, each head's caption names its strongest
role, and the role table shows what switching each head off costs. Given the lens, the focused token shows its
next-token guess after every block.

The data is embedded as JSON; the glyphs of the token labels as a NanumGothic subset (a few KB), so
Hangul renders even where no Korean font is installed; the attention as the lower triangle of each map,
quantised to uint16 (error < 1e-5) and base64-encoded, which keeps a 12-layer, 12-head, 256-token page
near 13 MB; q, k, v, y as base64 float32. `layers` keeps only some layers, for long texts.
"""

import base64
import html
import json
import math
import re
from pathlib import Path

import numpy as np

from cli.messages import page_messages
from inspection.glossary import GLOSSARY
from inspection.plot import korean_font_path
from inspection.tour import tour_cards
from inspection.views.roles import ROLES, lesson_head, roles_from_record
from model.sampling import TEMPERATURE

HERE = Path(__file__).parent
TEMPLATE = HERE / "page" / "page.html"
SCRIPTS = ["page/data.js", "page/draw.js", "views/maps.js", "views/walkthrough.js", "views/path.js", "views/why.js",
           "page/controls.js", "page/live.js", "page/tour.js", "page/main.js"]  # in order


SURPRISE = ("surprise", "expected", "expected_p", "expected_labels", "uniform")  # the maps record's, for the token line


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


def frame(records: dict, layers: list[int], step: int | None = None) -> dict:
    """One frame of the page (a set of weights' view of the text: the only one, or a snapshot's of training step
    `step`), from its records of one forward: the maps of `layers` and their statistics (records["maps"]), each head's
    roles and costs (records["roles"], optional), the maps by word (records["words"]) and the walkthrough's numbers
    (records["walkthrough"]), which the page looks up and computes none of."""
    maps, roles, words = records["maps"], records.get("roles"), records.get("words")
    return {"step": step, "att": pack_att(maps["att"][layers]),
            **{name: maps.get(name) for name in SURPRISE},  # None for maps of no model (the page leaves it out)
            "words_att": None if words is None else pack_att(words["att"][layers]),
            "stats": finite({name: value[layers].tolist() for name, value in maps["stats"].items()}),  # NaN: null
            "roles": None if roles is None else role_captions(roles, layers), "scores": roles_of(roles, layers),
            "off": [maps["off"][layer] for layer in layers],
            "explain": None if "walkthrough" not in records else walkthrough_data(records["walkthrough"], layers)}


def role_captions(record: dict, layers: list[int]) -> list[list[list]]:
    """Each head's strongest role and its score, [role, score], which the page names in its language."""
    roles = roles_from_record(record)
    H = len(record["scores"][ROLES[0]][0])
    return [[list(roles.strongest(layer, head)) for head in range(H)] for layer in layers]


def roles_of(record: dict | None, layers: list[int]) -> dict | None:
    """The role record of `layers` as the page reads them (the costs, when measured, by the same layer index)."""
    if record is None:
        return None
    found = {**record, "scores": {r: [rows[layer] for layer in layers] for r, rows in record["scores"].items()}}
    if "importance" in record:
        found["importance"] = {**record["importance"],
                               **{k: [record["importance"][k][layer] for layer in layers] for k in ("loss", "drop")}}
    return found


def opening(records: dict, layers: list[int]) -> dict | None:
    """Where the page opens, the lesson's place: {"li": the layer's index in `layers`, "head", "focus"}. With the
    roles, their lesson head (roles.lesson_head) at the token where it shows its role best: an induction head at
    the token whose earlier copy's successor it attends to most, another head at the last token. None without
    roles (the page opens on every head of its first layer)."""
    if records.get("roles") is None:
        return None
    found = lesson_head(roles_from_record(records["roles"]), layers)
    if found is None:
        return None
    layer, head = found
    ids, att = np.asarray(records["maps"]["ids"]), records["maps"]["att"][layer, head]  # (T, T)
    T, focus = len(ids), len(ids) - 1
    if roles_from_record(records["roles"]).strongest(layer, head)[0] == "induction":
        q, j = np.tril_indices(T, -2)  # query q, an earlier key j with a successor j + 1 < q
        copies = ids[q] == ids[j]
        if copies.any():
            best = np.argmax(att[q[copies], j[copies] + 1])
            focus = int(q[copies][best])
    return {"li": layers.index(layer), "head": head, "focus": focus}


def walkthrough_data(record: dict, layers: list[int]) -> dict:
    """The walkthrough record's numbers of `layers` for the page: the small ones as they are, the arrays as base64
    float32 (walkthrough.js reads them by layer, head and token)."""
    rows = [record["layers"].index(layer) for layer in layers]
    arrays = {name: pack_floats(record[name][rows]) for name in ("x", "out", "q", "k", "v", "y", "keys", "dot",
                                                                  "scaled", "sum", "q_norm", "y_norm", "v_norm", "top",
                                                                  "top_size", "top_terms", "best", "qk")}
    return {**{k: record[k] for k in ("d_head", "n_embd", "dims", "K", "top_n", "future")}, **arrays,
            "why": pack_floats(record["why"][:, rows]), "off": [record["off"][i] for i in rows]}


def finite(obj):
    """obj with every NaN or infinity as null: what JSON can hold (a statistic of a one-token text is NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def page(records: dict, lang: str = "en", layers: list[int] | None = None) -> str:
    """The HTML text of the page of one text's `records` (maps at least; walkthrough, roles, words, lens, path, why and
    patch when given), of `layers` (None: all), opening in `lang`, titled with the text."""
    maps = records["maps"]
    layers = list(range(maps["att"].shape[0])) if layers is None else list(layers)
    shown = {"lens": records.get("lens"), "why": records.get("why"), "patch": records.get("patch"),
             "path": path_data(records["path"]) if "path" in records else None,
             **({"words": records["words"]["words"], "word_tokens": records["words"]["tokens"],
                 "words_even": records["words"]["even"]} if "words" in records else {}),
             "open": opening(records, layers)}
    return frames_page([frame(records, layers)], maps["tokens"], title_of(maps["text"]), layers, lang, maps["prefill"],
                       shown)


def title_of(text: str, length: int = 60) -> str:
    """A page's title: its text, the first `length` characters."""
    return text[:length] + "…" if len(text) > length else text


def frames_page(frames: list[dict], labels: list[str], title: str, layers: list[int], lang: str = "en",
                prefill: int | None = None, shown: dict | None = None, live: dict | None = None) -> str:
    """The page of one or more `frame`s of the same text (several: a slider over the training steps), opening in
    `lang`; it carries its texts in both languages (cli/messages.py) and switches in place. `shown`: what it shows
    beside the maps ("lens", "path" as `path_data` made it, "why", "patch": the views' records; "words", "word_tokens",
    "words_even": the words view's labels, tokens a word and even spread) and "open", where it opens (`opening`);
    `live`: the live inspector's settings (inspection/live.py), which turn on its text box, and its "glyphs": more
    characters for the embedded font (a live page shows texts it has not seen yet), kept out of the page's data."""
    shown = shown or {}
    lens, path, why, patch, words = (shown.get(name) for name in ("lens", "path", "why", "patch", "words"))
    live = dict(live) if live else None
    glyphs = live.pop("glyphs", "") if live else ""
    T = len(labels)
    n_head = len(frames[0]["off"][0])  # every layer's heads are on or off in each frame
    data = {"n_layer": len(layers), "layers": layers, "n_head": n_head, "T": T, "tokens": list(labels),
            "prefill": T if prefill is None else int(prefill), "frames": frames, "lang": lang,
            "messages": page_messages(), "live": live, "lens": lens, "path": path,
            "glossary": [list(entry) for entry in GLOSSARY], "temperature": TEMPERATURE, "why": why, "patch": patch,
            "words": words, "word_tokens": shown.get("word_tokens"), "words_even": shown.get("words_even"),
            "open": shown.get("open"), "tour": None if live else tour_cards()}  # a live page's text changes under the cards
    # "<" escaped so that no token (say "</script>") can end the script element early.
    payload = json.dumps(data, ensure_ascii=False, default=plain).replace("<", "\\u003c")
    page_html = TEMPLATE.read_text(encoding="utf-8")
    script = "\n".join(f"// ---- {name} ----\n" + (HERE / name).read_text(encoding="utf-8") for name in SCRIPTS)
    # the glyphs of the tokens, the title and every Korean text of the page (the language picker's too)
    seen = "".join(lens["labels"].values()) if lens else ""
    seen += "".join(path["labels"].values()) if path else ""
    seen += "".join(part for p in why["focus"]["parts"] for part in p.get("up", []) + p.get("down", [])
                    ) + "".join(why["labels"].values()) if why else ""
    seen += "".join(patch["corrupt_labels"]) + patch["token"] + patch["versus"] if patch else ""
    seen += "".join(words) if words else ""
    seen += "".join(label for f in frames for label in (f["expected_labels"] or {}).values())
    font_css = font_face_css("".join(labels) + title + glyphs + seen + "한국어" +
                             "".join(ko for _, ko in data["messages"].values()) + "".join(name + ko for _, name, _, ko in GLOSSARY))
    fields = {"FONT_CSS": font_css, "TITLE": html.escape(title), "DATA": payload, "SCRIPT": script}
    # one pass over the template, so a title or token that spells a placeholder stays text
    return re.sub(r"__(FONT_CSS|TITLE|DATA|SCRIPT)__", lambda m: fields[m.group(1)], page_html)


def path_data(path: dict) -> dict:
    """The path record as the page reads it: the last token's logits (from which the page draws the next token's
    probabilities as the sampling settings move; with heads off, the whole model's beside them) as base64 float32."""
    full = path.get("next_logits_full")  # with heads switched off: the whole model's too, for before and after
    return {**path, "next_logits": pack_floats(path["next_logits"]),
            "next_logits_full": None if full is None else pack_floats(full)}


def plain(value):
    """What JSON cannot hold as it is: a numpy array or number as lists and numbers (NaN as null)."""
    if isinstance(value, np.ndarray):
        return finite(value.tolist())
    if isinstance(value, np.generic):
        return finite(value.item())
    raise TypeError(f"{type(value).__name__} is not JSON")
