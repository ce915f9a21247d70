"""Attention maps of a text, from the model's own weights, and the files that show them.

    maps = attention_for_text(run, "대한민국은 서울")     # .weights (L, H, T, T), .labels, .pieces, .ids
    write_attention(maps, "out/")                       # layer_<L>.png, attention.html, attention.npz
    print(format_stats_table(head_stats(maps.weights)))

attention.npz holds `weights` float32 (L, H, T, T), `ids` int64 (T,), `tokens` (the vocabulary pieces,
spaces literal) and `labels` (readable, see inspection.labels), all loadable with allow_pickle=False.
"""

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from inspection.labels import token_labels, token_pieces
from inference.runs import Run, crop
from model.errors import UserError


@dataclass
class AttentionMaps:
    ids: list[int]
    pieces: list[str]       # vocabulary pieces, as the tokenizer stores them
    labels: list[str]       # readable labels
    weights: np.ndarray     # (L, H, T, T) float32; row q = how query q spreads its attention over keys

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head's map (T, T), with a clear error for an index out of range."""
        check_head(*self.weights.shape[:2], layer, head)
        return self.weights[layer, head]


def check_head(n_layer: int, n_head: int, layer: int, head: int) -> None:
    """UserError unless head `layer`.`head` exists in a model of n_layer layers of n_head heads."""
    if not (0 <= layer < n_layer and 0 <= head < n_head):
        raise UserError(f"head {layer}.{head} does not exist; this model has layers 0..{n_layer - 1} "
                        f"and heads 0..{n_head - 1} (write --head LAYER.HEAD, e.g. --head 0.1)")


@torch.inference_mode()
def attention_for_ids(run: Run, ids: list[int]) -> AttentionMaps:
    """Maps of `ids` (the last block_size of them, with a warning if that drops some)."""
    ids = crop(list(ids), run.block_size, "the text for the attention maps")
    idx = torch.tensor([ids], dtype=torch.long, device=run.device)   # (1, T)
    weights = run.model.attention_maps(idx)[0].float().cpu().numpy()  # (L, H, T, T)
    return AttentionMaps(ids, token_pieces(run.tokenizer, ids), token_labels(run.tokenizer, ids), weights)


def attention_for_text(run: Run, text: str) -> AttentionMaps:
    """Maps of <|endoftext|> + text, as the model sees a prompt."""
    return attention_for_ids(run, run.encode_prompt(text))


def save_npz(maps: AttentionMaps, path: str | os.PathLike) -> Path:
    """Write attention.npz atomically (see the module docstring for its arrays)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, weights=maps.weights.astype(np.float32), ids=np.asarray(maps.ids, dtype=np.int64),
                 tokens=np.array(maps.pieces, dtype=str), labels=np.array(maps.labels, dtype=str))
    os.replace(tmp, path)
    return path


def load_npz(path: str | os.PathLike) -> AttentionMaps:
    """Read an attention.npz back (no pickles)."""
    with np.load(path, allow_pickle=False) as f:
        return AttentionMaps(f["ids"].tolist(), f["tokens"].tolist(), f["labels"].tolist(), f["weights"])


def write_attention(maps: AttentionMaps, out_dir: str | os.PathLike, title: str = "Attention maps") -> list[Path]:
    """layer_<L>.png per layer, attention.html and attention.npz in `out_dir` (created if needed)."""
    from inspection.html import save_html
    from inspection.plot import save_layer_pngs

    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir} is a file; give --attention a directory to write the maps into")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {out_dir} ({e.strerror}); give --attention a directory you can write") from None
    written = save_layer_pngs(maps.weights, maps.labels, out_dir)
    written.append(save_html(maps.weights, maps.labels, out_dir / "attention.html", title))
    written.append(save_npz(maps, out_dir / "attention.npz"))
    return written
