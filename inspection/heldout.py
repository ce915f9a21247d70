"""The held-out text that head roles are measured on, for a run, and the tokens random sequences use.

    ids, source = held_out_ids(run)              # np.ndarray of token ids, and where they come from
    ids, source = held_out_ids(run, "held.txt")  # a UTF-8 file instead
    print(where(source, "ko"))                   # that said in a language
    means = held_out_means(run)                  # each head's mean output on it: what a head switched off gives

The text is a file if one is given; else the run's validation split: val.bin in the prepared-data cache
that the checkpoint's meta.json names (`data.cache_dir`, relative to the current directory, and the
source fingerprint), when it is still there and has the checkpoint's tokenizer; else, so that a
checkpoint copied alone still works, text the model writes itself from <|endoftext|> (seed 0,
temperature 1). `source` says which: {"kind": "file", "validation" or "sampled", "path", "n"}. Each is found once
per run (`run.memo`).
"""

import json
from pathlib import Path

import numpy as np
import torch

from cli.messages import messages
from common.heads_off import head_means
from data.tokenizer import ordinary_ids
from inference.scoring import read_text
from model.sampling import generate
from storage.checkpoint import CheckpointError, read_meta

SAMPLED_WINDOWS = 4  # windows of text the model writes when there is no validation split
WINDOW = 256  # tokens per window of held-out text (fewer when the context is shorter)
WINDOWS = 16


def usable_ids(run) -> list[int]:
    """Token ids that are not special tokens: what the random induction sequences are drawn from."""
    return ordinary_ids(run.tokenizer, run.model.config.vocab_size)


def validation_split(ckpt: Path) -> tuple[Path, str] | None:
    """The run's val.bin and its dtype, found through the checkpoint's meta.json, if it is on disk with the
    same tokenizer."""
    try:
        meta = read_meta(ckpt)
        cache, fingerprint = Path(meta["data"]["cache_dir"]), meta["source_fingerprint"]
        for d in sorted(cache.glob(f"*-{meta['data']['vocab_size']}-{fingerprint[:16]}")):
            theirs = json.loads((d / "meta.json").read_text(encoding="utf-8"))  # the data cache's own record
            # its dtype, not the checkpoint's: that val.bin was written in it (a meta.json may say anything)
            if (theirs.get("tokenizer_hash") == meta.get("tokenizer_hash") and (d / "val.bin").is_file()
                    and theirs.get("dtype") in ("uint16", "uint32")):
                return d / "val.bin", theirs["dtype"]
    except (CheckpointError, OSError, ValueError, KeyError, TypeError):  # no meta.json, or one from elsewhere
        return None
    return None


def held_out_ids(run, path=None) -> tuple[np.ndarray, dict]:
    """(token ids, where they come from) of the held-out text (see the module docstring), found once per run."""
    if ("held_out", path) not in run.memo:
        run.memo["held_out", path] = find_held_out(run, path)
    return run.memo["held_out", path]


def find_held_out(run, path=None) -> tuple[np.ndarray, dict]:
    if path is not None:
        ids = run.encode_document(read_text(path))
        return np.asarray(ids, dtype=np.int64), {"kind": "file", "path": str(path), "n": len(ids)}
    found = validation_split(run.ckpt_dir)
    if found is not None:
        val, dtype = found
        ids = np.memmap(val, dtype=dtype, mode="r")
        if len(ids) >= 3:
            return ids, {"kind": "validation", "path": str(val), "n": len(ids)}
    start = torch.tensor([[run.eot_id if run.eot_id is not None else 0]], device=run.device)  # (1, 1)
    g = torch.Generator(device=run.device).manual_seed(0)
    n = SAMPLED_WINDOWS * min(WINDOW, run.block_size)
    ids = generate(run.model, start, n, temperature=1.0, generator=g)[0].cpu().numpy()
    return ids, {"kind": "sampled", "path": str(run.ckpt_dir), "n": len(ids)}


def where(source: dict, lang: str) -> str:
    """Where a held-out text comes from, said in `lang`."""
    return messages(lang)("where." + source["kind"], path=source["path"], ckpt=source["path"], n=f"{source['n']:,}")


def windows_of(ids, T: int, count: int = WINDOWS) -> torch.Tensor:
    """Up to `count` non-overlapping windows of T tokens spread evenly over ids -> (N, T) int64."""
    ids = np.asarray(ids)
    T = min(T, len(ids))
    n = min(count, len(ids) // T)
    starts = np.linspace(0, len(ids) - T, n).astype(np.int64) if n > 1 else np.zeros(1, dtype=np.int64)
    return torch.from_numpy(np.stack([np.asarray(ids[s : s + T], dtype=np.int64) for s in starts]))


def held_out_windows(model, text_ids) -> torch.Tensor:
    """The role scores' windows of held-out text (`windows_of`), on the model's device."""
    return windows_of(text_ids, min(WINDOW, model.config.block_size)).to(model.tok_emb.weight.device)


def held_out_means(run, path=None) -> torch.Tensor:
    """Each layer's head outputs averaged over the held-out windows (common.heads_off.head_means), with the run's
    kept-off heads off and no other: what a head switched off in mode "mean" gives. Measured once per run."""
    if ("means", path) not in run.memo:
        run.memo["means", path] = head_means(run.model, held_out_windows(run.model, held_out_ids(run, path)[0]))
    return run.memo["means", path]
