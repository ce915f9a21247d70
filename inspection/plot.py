"""PNG heatmaps of attention maps, with Hangul token labels.

Hangul is drawn with NanumGothic, which the `koreanize-matplotlib` dependency ships as a .ttf inside
its package; DejaVu Sans (bundled with matplotlib) is the fallback for symbols NanumGothic lacks,
such as the visible space "␣". A label character neither font covers is written as `<U+XXXX>`, so
no label is ever drawn as empty boxes. matplotlib is imported lazily and drawn with the Agg canvas,
so nothing here needs a display or changes pyplot's global state.
"""

import functools
import math
import os
from pathlib import Path

import numpy as np

from cli.messages import messages
from cli.arguments import need_int, need_labels, need_maps, need_type
from cli.errors import UserError
from storage.atomic import atomic_write

FONT_FAMILIES = ["NanumGothic", "DejaVu Sans"]


def korean_font_path() -> Path:
    """The NanumGothic .ttf shipped inside the installed koreanize-matplotlib package."""
    import importlib.util

    spec = importlib.util.find_spec("koreanize_matplotlib")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the Korean font package is missing; install it: pip install koreanize-matplotlib")
    path = Path(next(iter(spec.submodule_search_locations))) / "fonts" / "NanumGothic.ttf"
    if not path.is_file():
        raise UserError(f"{path} is missing; reinstall it: pip install --force-reinstall koreanize-matplotlib")
    return path


@functools.cache
def font_paths() -> tuple[Path, ...]:
    """Register NanumGothic with matplotlib; return the font files used, in fallback order."""
    from matplotlib import font_manager

    korean = korean_font_path()
    font_manager.fontManager.addfont(str(korean))
    fallback = Path(font_manager.findfont("DejaVu Sans", fallback_to_default=False))
    return korean, fallback


@functools.cache
def covered_chars() -> frozenset[int]:
    """Code points that at least one of the fonts in `font_paths()` has a glyph for."""
    from matplotlib.ft2font import FT2Font

    return frozenset().union(*(FT2Font(str(p)).get_charmap() for p in font_paths()))


def drawable(label: str) -> str:
    """`label` with characters no font covers replaced by `<U+XXXX>`."""
    covered = covered_chars()
    return "".join(ch if ord(ch) in covered else f"<U+{ord(ch):04X}>" for ch in label)


def _new_figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _draw_map(ax, att: np.ndarray, labels: list[str], title: str, say, words: bool = False):
    """One heatmap on `ax`: rows = queries, columns = keys (words, 어절, given `words`), the masked future left
    blank."""
    T = att.shape[-1]
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    image = ax.imshow(np.ma.masked_array(att, future), cmap="viridis", vmin=0.0, vmax=1.0,
                      interpolation="nearest", aspect="equal")
    # At most ~64 tick labels per axis stay readable; longer sequences label every n-th token.
    step = max(1, math.ceil(T / 64))
    ticks = np.arange(0, T, step)
    names = [drawable(labels[i]) for i in ticks]
    fontsize = max(4.0, min(10.0, 300.0 / len(ticks)))
    ax.set_xticks(ticks, names, rotation=45, ha="right", rotation_mode="anchor", fontsize=fontsize)  # Hangul read at 45°
    ax.set_yticks(ticks, names, fontsize=fontsize)
    ax.set_xlabel(say("plot.key_word" if words else "plot.key"), fontsize=8)
    ax.set_ylabel(say("plot.query_word" if words else "plot.query"), fontsize=8)
    ax.set_title(title, fontsize=10)
    return image


def draw_layer(att: np.ndarray, labels: list[str], layer: int, heads: list[int] | None = None,
               roles: list[list[str]] | None = None, lang: str = "en", off=None, words: bool = False):
    """A matplotlib Figure with one heatmap per head of `att[layer]` (att: (L, H, T, T)); `roles`
    (L, H) nested lists of captions (inspection.views.roles.HeadRoles.labels) are added to the titles; the
    titles and axis labels in `lang` ("en" or "ko"). `off` (L, H): "", "mean" or "zero" (a `Trace`'s): a
    switched-off head's title says so, and the figure that its map is still its attention. `words`: the maps are
    by word (inspection/views/words.py's word_maps, `labels` the words), and the titles say so."""
    from matplotlib import rc_context

    say = messages(lang)  # first: it checks lang
    att = need_maps("att", att)
    need_labels("labels", labels, att.shape[-1])
    layer = need_int("layer", layer, 0, att.shape[0] - 1)
    heads = list(range(att.shape[1])) if heads is None else need_type("heads", heads, (list, tuple), "a list of heads")
    heads = [need_int("heads", h, 0, att.shape[1] - 1) for h in heads]
    font_paths()
    T = att.shape[-1]
    ncols = min(len(heads), 4)
    nrows = math.ceil(len(heads) / ncols)
    cell = min(14.0, max(3.0, 0.22 * min(T, 64) + 1.2))
    with rc_context({"font.family": FONT_FAMILIES, "axes.unicode_minus": False}):
        fig = _new_figure(cell * ncols + 1.0, cell * nrows + 0.6)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for ax in axes.flat[len(heads):]:
            ax.set_axis_off()
        for ax, head in zip(axes.flat, heads):
            role = f" · {roles[layer][head]}" if roles is not None else ""
            mode = str(off[layer][head]) if off is not None else ""
            role += " · " + say("ablate.off", mode=say("ablate.short_" + mode)) if mode else ""
            image = _draw_map(ax, att[layer, head], labels, f"layer {layer} head {head}{role}", say, words)
        fig.colorbar(image, ax=axes, label=say("plot.weight"), shrink=0.8)
        any_off = off is not None and any(str(off[layer][head]) for head in heads)
        title = say("plot.layer_words" if words else "plot.layer", layer=layer)
        fig.suptitle(title + ("\n" + say("ablate.map_note") if any_off else ""))
    return fig


def draw_head(att: np.ndarray, labels: list[str], layer: int, head: int, lang: str = "en"):
    """A Figure with the heatmap of one head, e.g. to show in a notebook."""
    need_int("head", head, 0, need_maps("att", att).shape[1] - 1)  # named as `head`, not as draw_layer's `heads`
    return draw_layer(att, labels, layer, heads=[head], lang=lang)


def draw_patch(record: dict, labels: list[str], lang: str = "en"):
    """A Figure of a patching record's grid (inspection/views/patch.py; its "token" and "versus" as they are to be
    shown): a row per stage of the residual stream, a column per token of the clean text, coloured by the share of
    the logit difference that comes back."""
    from matplotlib import rc_context

    font_paths()
    say = messages(lang)
    grid = np.asarray(record["grid"])  # (S, T)
    stages = [say("lens.embeddings")] + [say("lens.block", layer=s) for s in range(len(grid) - 1)]
    T = grid.shape[1]
    with rc_context({"font.family": FONT_FAMILIES, "axes.unicode_minus": False}):
        fig = _new_figure(min(16.0, 2.5 + 0.35 * T), 1.6 + 0.45 * len(grid))
        ax = fig.subplots()
        image = ax.imshow(grid, cmap="RdBu", vmin=-1.0, vmax=1.0, interpolation="nearest", aspect="auto")
        step = max(1, math.ceil(T / 64))
        ticks = np.arange(0, T, step)
        ax.set_xticks(ticks, [drawable(labels[i]) for i in ticks], rotation=45, ha="right", rotation_mode="anchor",
                      fontsize=max(4.0, min(9.0, 300.0 / len(ticks))))
        ax.set_yticks(range(len(grid)), [drawable(s) for s in stages], fontsize=8)
        fig.colorbar(image, ax=ax, label=say("patch.colour"), shrink=0.9)
        ax.set_title(patch_title(record, lang), fontsize=10, wrap=True)
    return fig


def patch_title(record: dict, lang: str = "en") -> str:
    """patch.png's title: both texts, the tokens where they differ in [brackets], and the two tokens compared."""
    changed = set(record["changed"])

    def shown(t, label):  # "␣략" -> " 략", changed: " [략]"
        space, word = (" ", label[1:]) if label.startswith("␣") else ("", label)
        return space + (f"[{word}]" if t in changed else word).replace("␣", " ")

    def text(labels):
        return drawable("".join(shown(t, label) for t, label in enumerate(labels) if label != "<|endoftext|>").strip())

    return messages(lang)("patch.png_title", clean=text(record["labels"]), corrupt=text(record["corrupt_labels"]),
                          token=drawable(str(record["token"])), versus=drawable(str(record["versus"])))


def save_figure(fig, path: str | os.PathLike) -> Path:
    """Write `fig` as PNG atomically (a temporary file, then a rename)."""
    from matplotlib import rc_context

    def write(tmp):
        with rc_context({"font.family": FONT_FAMILIES}):
            fig.savefig(tmp, format="png", dpi=110)

    return atomic_write(Path(path), write)


def save_layer_png(att: np.ndarray, labels: list[str], layer: int, roles: list[list[str]] | None,
                   path: str | os.PathLike, lang: str = "en", off=None, words: bool = False) -> Path:
    """The heatmaps of every head of one layer of `att` (L, H, T, T) as a PNG at `path` (`off`, `words`: as
    draw_layer's)."""
    return save_figure(draw_layer(att, labels, layer, roles=roles, lang=lang, off=off, words=words), path)


def save_layer_pngs(att: np.ndarray, labels: list[str], out_dir: str | os.PathLike,
                    roles: list[list[str]] | None = None, layers: list[int] | None = None) -> list[Path]:
    """`layer_<L>.png` for every layer of `att` (L, H, T, T), or those in `layers`, in `out_dir`."""
    layers = range(att.shape[0]) if layers is None else layers
    return [save_layer_png(att, labels, layer, roles, Path(out_dir) / f"layer_{layer}.png") for layer in layers]
