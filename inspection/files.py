"""The files of `generate.py --attention DIR`: the records of a text as pictures, a page and arrays, written together.

    written = write_records(records, "out/", "ko")           # layer_<L>.png, attention.html, attention.npz, ...
    maps = load_npz("out/attention.npz")                     # .att (L, H, T, T), .ids, .pieces, .labels, .prefill

From the records (inspection/views/) that are there: layer_<L>.png (maps; each head's caption its strongest role
with roles), attention.html (the page), attention.npz and explain.npz (maps: the attention and the recording
forward's every tensor, inspection/trace.py), layer_<L>_words.png (words), why.json (why: the query's shares),
patch.json and patch.png (patch), heads.json (roles measured here; not the ones training stored, which only
label the page and the PNGs, "roles_stored"). The files are moved in together once all are written
(storage.atomic.write_files): never new PNGs beside an old npz.

attention.npz holds `att` float32 (L, H, T, T), `ids` int64 (T,), `tokens` (the vocabulary pieces, spaces literal),
`labels` (readable, see inspection.labels) and `prefill` (int64: rows 0..prefill-1 came from one forward; each later
row from one cached decoding step), all loadable with allow_pickle=False.
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cli.messages import messages
from inference.runs import warn
from inspection.html import page
from inspection.plot import draw_patch, save_figure, save_layer_png
from inspection.trace import save_trace
from inspection.views.roles import roles_from_record
from cli.errors import UserError
from storage.atomic import write_files, write_json, write_npz, write_text_atomic

PAGE_WARN_BYTES = 50_000_000  # a page this big loads slowly; the warning suggests --layers


@dataclass
class AttentionMaps:
    """attention.npz read back."""
    ids: list[int]
    pieces: list[str]       # vocabulary pieces, as the tokenizer stores them
    labels: list[str]       # readable labels
    att: np.ndarray         # (L, H, T, T) float32; row q = how query q spreads its attention over keys
    prefill: int | None = None  # rows from one forward; the later ones from one decoding step each


def save_npz(maps: dict, path: str | os.PathLike) -> Path:
    """Write the maps record as attention.npz atomically (see the module docstring for its arrays)."""
    arrays = {"att": maps["att"].astype(np.float32), "ids": np.asarray(maps["ids"], dtype=np.int64),
              "tokens": np.array(maps["pieces"], dtype=str), "labels": np.array(maps["tokens"], dtype=str),
              "prefill": np.int64(maps["prefill"])}  # fmt: skip
    return write_npz(path, arrays)


def load_npz(path: str | os.PathLike) -> AttentionMaps:
    """Read an attention.npz back (no pickles)."""
    with np.load(path, allow_pickle=False) as f:
        prefill = int(f["prefill"]) if "prefill" in f else None
        return AttentionMaps(f["ids"].tolist(), f["tokens"].tolist(), f["labels"].tolist(), f["att"], prefill)


def make_out_dir(out_dir: str | os.PathLike) -> Path:
    """`out_dir`, created if needed; a UserError if it is a file or cannot be made."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir} is a file; give --attention a directory to write the maps into")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {out_dir} ({e.strerror}); give --attention a directory you can write") from None
    return out_dir


def writers(records: dict, lang: str, layers: list[int] | None, asked) -> dict:
    """{file name: a function that writes it to a path} for the records given (the module docstring)."""
    found = {}
    if "roles" in records and not records.get("roles_stored"):  # training's roles label the page, not a new file
        found["heads.json"] = functools.partial(write_json, obj=records["roles"])
    if "maps" in records:
        maps = records["maps"]
        L = maps["att"].shape[0]
        shown = list(range(L)) if layers is None else layers
        roles = roles_from_record(records["roles"]).labels(lang) if "roles" in records else None
        for layer in shown:
            found[f"layer_{layer}.png"] = functools.partial(save_layer_png, maps["att"], maps["tokens"], layer, roles,
                                                            lang=lang, off=maps["off"])
            if "words" in records and "words" in asked:
                words = records["words"]
                found[f"layer_{layer}_words.png"] = functools.partial(save_layer_png, words["att"], words["words"],
                                                                      layer, roles, lang=lang, off=maps["off"],
                                                                      words=True)
        found["attention.html"] = lambda path: write_text_atomic(path, page(records, lang, layers))
        found["attention.npz"] = functools.partial(save_npz, maps)
        found["explain.npz"] = functools.partial(save_trace, maps["trace"])
    if "why" in records and "why" in asked:
        found["why.json"] = functools.partial(write_json, obj=records["why"]["focus"])
    if "patch" in records:
        patched = records["patch"]
        found["patch.json"] = functools.partial(write_json, obj=patched)
        found["patch.png"] = lambda path: save_figure(draw_patch(patched, patched["labels"], lang), path)
    return found


def write_records(records: dict, out_dir: str | os.PathLike, lang: str = "en", layers: list[int] | None = None,
                  asked=("why", "words")) -> list[Path]:
    """The files of `records` (the module docstring) in `out_dir` (created if needed); `layers`: those of the PNGs
    and the page (the npz files keep every layer); `lang`: the language of the PNGs and the one the page opens in;
    `asked`: the views asked for by name, whose files are written too (why.json; the maps by word, layer_<L>_words.png:
    the page shows both without them)."""
    out_dir = make_out_dir(out_dir)
    written = write_files(out_dir, writers(records, lang, layers, asked), UserError)
    page_file = out_dir / "attention.html"
    if page_file in written and page_file.stat().st_size > PAGE_WARN_BYTES:
        last = records["maps"]["att"].shape[0] - 1
        warn(messages()("page.big", page=page_file, mb=f"{page_file.stat().st_size / 1e6:.0f}", last=last))
    return written
