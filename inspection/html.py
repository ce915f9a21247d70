"""attention.html: one self-contained interactive page of attention maps (inline JS/CSS, no network).

The page (template: page.html beside this file) lets a reader choose a layer and a head or all heads,
and hover or click a token to see where it attends and what attends to it, with the weights.
The data is embedded as JSON; the glyphs of the token labels as a NanumGothic subset (a few KB), so
Hangul renders even where no Korean font is installed; the weights as the lower triangle of each map, quantised to uint16
(error < 1e-5) and base64-encoded, which keeps a 12-layer, 12-head, 256-token page near 13 MB.
"""

import base64
import html
import json
import os
import re
from pathlib import Path

import numpy as np

from inspection.plot import korean_font_path
from inspection.stats import head_stats

TEMPLATE = Path(__file__).with_name("page.html")


def pack_weights(weights: np.ndarray) -> str:
    """(L, H, T, T) -> base64 of little-endian uint16 lower triangles, row by row, layer-major."""
    T = weights.shape[-1]
    q, k = np.tril_indices(T)                                      # row by row: (0,0), (1,0), (1,1), ...
    tri = np.asarray(weights, dtype=np.float64)[..., q, k]        # (L, H, T*(T+1)/2)
    values = np.rint(np.clip(tri, 0.0, 1.0) * 65535).astype("<u2")
    return base64.b64encode(values.tobytes()).decode("ascii")


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


def attention_page(weights: np.ndarray, labels: list[str], title: str = "Attention maps") -> str:
    """The HTML text of the page for `weights` (L, H, T, T) and token `labels`."""
    L, H, T, _ = weights.shape
    stats = {name: value.tolist() for name, value in head_stats(weights).items()}
    data = {"n_layer": L, "n_head": H, "T": T, "tokens": list(labels), "stats": stats,
            "weights": pack_weights(weights)}
    # "<" escaped so that no token (say "</script>") can end the script element early.
    payload = json.dumps(data, ensure_ascii=False).replace("<", "\\u003c")
    page = TEMPLATE.read_text(encoding="utf-8")
    font_css = font_face_css("".join(labels) + title)
    fields = {"FONT_CSS": font_css, "TITLE": html.escape(title), "DATA": payload}
    # one pass over the template, so a title or token that spells a placeholder stays text
    return re.sub(r"__(FONT_CSS|TITLE|DATA)__", lambda m: fields[m.group(1)], page)


def save_html(weights: np.ndarray, labels: list[str], path: str | os.PathLike, title: str = "Attention maps") -> Path:
    """Write the page to `path` atomically."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(attention_page(weights, labels, title), encoding="utf-8")
    os.replace(tmp, path)
    return path
