"""The held-out text that head roles are measured on, for a run, and the tokens random sequences use.

    ids, where = held_out_ids(run)              # np.ndarray of token ids, and a sentence saying where from
    ids, where = held_out_ids(run, "held.txt")  # a UTF-8 file instead

The text is a file if one is given; else the run's validation split: val.bin in the prepared-data cache
that the checkpoint's meta.json names (`data.cache_dir`, relative to the current directory, and the
source fingerprint), when it is still there and has the checkpoint's tokenizer; else, so that a
checkpoint copied alone still works, text the model writes itself from <|endoftext|> (seed 0,
temperature 1). `where` says which.
"""

import json
from pathlib import Path

import numpy as np
import torch

from data.tokenizer import ordinary_ids
from inference.scoring import read_text
from inspection.heads import WINDOW
from cli.messages import messages
from model.sampling import generate
from storage.checkpoint import CheckpointError, read_meta

SAMPLED_WINDOWS = 4  # windows of text the model writes when there is no validation split


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


def held_out_ids(run, path=None, lang: str = "en") -> tuple[np.ndarray, str]:
    """(token ids, where they come from, said in `lang`) of the held-out text (see the module docstring)."""
    say = messages(lang)
    if path is not None:
        ids = run.encode_document(read_text(path))
        return np.asarray(ids, dtype=np.int64), say("where.file", path=path, n=f"{len(ids):,}")
    found = validation_split(run.ckpt_dir)
    if found is not None:
        val, dtype = found
        ids = np.memmap(val, dtype=dtype, mode="r")
        if len(ids) >= 3:
            return ids, say("where.validation", path=val, n=f"{len(ids):,}")
    start = torch.tensor([[run.eot_id if run.eot_id is not None else 0]], device=run.device)  # (1, 1)
    g = torch.Generator(device=run.device).manual_seed(0)
    n = SAMPLED_WINDOWS * min(WINDOW, run.block_size)
    ids = generate(run.model, start, n, temperature=1.0, generator=g)[0].cpu().numpy()
    return ids, say("where.sampled", n=f"{len(ids):,}", ckpt=run.ckpt_dir)
