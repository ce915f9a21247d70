"""Attention maps of a text, read from one recording forward of the model, and the files that show them.

    maps = attention_for_text(run, "대한민국은 서울")     # .att (L, H, T, T), .labels, .pieces, .ids, .trace
    write_attention(maps, "out/")                       # layer_<L>.png, attention.html, attention.npz
    print(format_stats_table(head_stats(maps.att)))

attention.npz holds `att` float32 (L, H, T, T), `ids` int64 (T,), `tokens` (the vocabulary pieces,
spaces literal), `labels` (readable, see inspection.labels) and `prefill` (int64: rows 0..prefill-1 came
from one forward; each later row from one cached decoding step), all loadable with allow_pickle=False.

    maps = attention_from_decoding(run, ids, recorded)   # the rows of generated tokens, as decoding made them
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from cli.command import integer
from cli.messages import messages
from inspection.words import word_labels, word_maps, word_spans
from inference.runs import Run, crop, need_run, warn
from model.arguments import need_text, need_token_ids
from inspection.heads import HeadRoles
from inspection.html import Views, attention_page
from inspection.labels import token_labels, token_pieces
from inspection.plot import save_layer_png
from inspection.trace import Trace, save_trace, trace_ids
from model.errors import UserError
from storage.atomic import write_files, write_npz, write_text_atomic


@dataclass
class AttentionMaps:
    ids: list[int]
    pieces: list[str]       # vocabulary pieces, as the tokenizer stores them
    labels: list[str]       # readable labels
    att: np.ndarray         # (L, H, T, T) float32; row q = how query q spreads its attention over keys
    prefill: int | None = None  # rows from one forward (None: all); the later ones from one decoding step each
    trace: Trace | None = None  # the whole forward the maps came from (inspection/trace.py), when they came from one

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head's map (T, T), with a clear error for an index out of range."""
        check_head(*self.att.shape[:2], layer, head)
        return self.att[layer, head]


def check_head(n_layer: int, n_head: int, layer: int, head: int) -> None:
    """UserError unless head `layer`.`head` exists in a model of n_layer layers of n_head heads."""
    if not (0 <= layer < n_layer and 0 <= head < n_head):
        raise UserError(f"head {layer}.{head} does not exist; this model has layers 0..{n_layer - 1} "
                        f"and heads 0..{n_head - 1} (write --head LAYER.HEAD, e.g. --head 0.1)")


def parse_head(text: str, option: str = "--head") -> tuple[int, int]:
    layer, dot, head = text.partition(".")
    try:
        return integer(layer), integer(head if dot else "")
    except ValueError:
        path = " or path (one token's whole way to the next token)" if option == "--explain" else ""
        raise UserError(f"{option} {text!r} must be LAYER.HEAD with two numbers, e.g. {option} 0.1{path}") from None


def parse_heads(text: str, option: str = "--ablate") -> list[tuple[int, int]]:
    """--ablate "1.0,1.2" -> [(1, 0), (1, 2)]; the model checks they exist (model.ablation.check_heads)."""
    if not text.strip(" ,"):
        raise UserError(f"{option} needs at least one head, e.g. {option} 1.0 or {option} 1.0,1.2")
    return [parse_head(part.strip(), option) for part in text.split(",")]


@torch.inference_mode()
def attention_for_ids(run: Run, ids: list[int]) -> AttentionMaps:
    """Maps of `ids` (the last block_size of them, with a warning if that drops some), with the recording
    forward that gave them (`.trace`: everything else a view of the text shows comes from it too)."""
    need_run(run)
    need_token_ids("ids", ids, run.model.config.vocab_size)
    ids = crop(list(ids), run.block_size, "cut.maps", run.lang)
    trace = trace_ids(run.model, ids)
    return AttentionMaps(ids, token_pieces(run.tokenizer, ids), token_labels(run.tokenizer, ids), trace.att,
                         trace=trace)


def attention_from_decoding(run: Run, ids: list[int], recorded: list) -> AttentionMaps:
    """The maps of the first sample `ids` (prompt + generated) as its cached decoding computed them.

    `recorded`: the `(start, maps)` list that `model.sampling.stream_with_logits(attention=...)` filled.
    The maps cover the last window the decoding used (positions start.. of ids): the rows of its prefill,
    then one row per decoding step, each the step's own attention over the cache.
    """
    start = recorded[-1][0]
    steps = [m[0] for s, m in recorded if s == start]  # (L, H, Tq, Tk) each, batch row 0
    T = min(steps[-1].size(-1), len(ids) - start)
    if T < 1:  # the first sample ended before the last window began
        return attention_for_ids(run, ids)
    L, H = steps[0].shape[:2]
    att = np.zeros((L, H, T, T), dtype=np.float32)
    for m in steps:  # the rows Tk-Tq..Tk-1 over keys 0..Tk-1, cut at T
        Tq, Tk = m.shape[-2:]
        first, stop = Tk - Tq, min(Tk, T)
        if first < stop:
            att[:, :, first:stop, :stop] = m[:, :, : stop - first, :stop].float().cpu().numpy()
    window = list(ids[start : start + T])
    return AttentionMaps(window, token_pieces(run.tokenizer, window), token_labels(run.tokenizer, window), att,
                         prefill=min(steps[0].size(-2), T))


def attention_for_text(run: Run, text: str) -> AttentionMaps:
    """Maps of <|endoftext|> + text, as the model sees a prompt."""
    need_run(run)
    need_text("text", text, "the text to look at")
    return attention_for_ids(run, run.encode_prompt(text))


def save_npz(maps: AttentionMaps, path: str | os.PathLike) -> Path:
    """Write attention.npz atomically (see the module docstring for its arrays)."""
    arrays = {"att": maps.att.astype(np.float32), "ids": np.asarray(maps.ids, dtype=np.int64),
              "tokens": np.array(maps.pieces, dtype=str), "labels": np.array(maps.labels, dtype=str),
              "prefill": np.int64(len(maps.ids) if maps.prefill is None else maps.prefill)}  # fmt: skip
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


PAGE_WARN_BYTES = 50_000_000  # a page this big loads slowly; the warning suggests --layers


def write_attention(maps: AttentionMaps, out_dir: str | os.PathLike, title: str = "Attention maps", *,
                    layers: list[int] | None = None, lang: str = "en", views: Views = Views(),
                    words: bool = False) -> list[Path]:
    """layer_<L>.png per layer, attention.html and attention.npz in `out_dir` (created if needed), and
    explain.npz given `views.trace` (inspection/trace.py). `views.roles`: a `HeadRoles` (its captions in the
    titles, its scores on the page too) or captions per head, (L, H) nested lists; `lang` ("en" or "ko") the
    language of the PNGs and the one the page opens in; the page shows `views` (inspection.html.Views: the
    logit lens, every token's path through the forward pass); `layers`: the layers of the PNGs and the page
    (the npz files keep every layer); `words`: `layer_<L>_words.png` too, the maps by word (inspection/words.py).
    The files are moved in together once all are written (storage.atomic.write_files): never new PNGs beside an
    old npz."""
    out_dir = make_out_dir(out_dir)
    trace, roles = views.trace, views.roles
    captions = roles.labels(lang) if isinstance(roles, HeadRoles) else roles
    off = None if trace is None else trace.off  # switched-off heads, named in the titles
    writers = {f"layer_{layer}.png": functools.partial(save_layer_png, maps.att, maps.labels, layer, captions,
                                                       lang=lang, off=off)
               for layer in (range(maps.att.shape[0]) if layers is None else layers)}  # fmt: skip
    if words:
        spans = word_spans(maps.labels)
        by_word, names = word_maps(maps.att, spans), word_labels(maps.labels, spans)
        writers |= {f"layer_{layer}_words.png": functools.partial(save_layer_png, by_word, names, layer, captions,
                                                                  lang=lang, off=off, words=True)
                    for layer in (range(maps.att.shape[0]) if layers is None else layers)}  # fmt: skip
    page = functools.partial(attention_page, maps.att, maps.labels, title, layers=layers, prefill=maps.prefill,
                             lang=lang, views=views)
    writers["attention.html"] = lambda path: write_text_atomic(path, page())
    writers["attention.npz"] = lambda path: save_npz(maps, path)
    if trace is not None:
        writers["explain.npz"] = lambda path: save_trace(trace, path)
    written = write_files(out_dir, writers, UserError)
    page = out_dir / "attention.html"
    if page.stat().st_size > PAGE_WARN_BYTES:
        warn(messages(lang)("page.big", page=page, mb=f"{page.stat().st_size / 1e6:.0f}", last=maps.att.shape[0] - 1),
             lang)
    return written
