"""Training checkpoints: `RUN/last/` and `RUN/best/`, each swapped in whole, never half-written.

    save_checkpoint(run_dir, "last", model, config_dict, prepared_dir, train_state)
    recover(run_dir)                       # on start: finish or undo a save that a crash interrupted
    state = load_train_state(run_dir / "last")
    state = open_run_dir(run_dir, resume)  # a checkpoint needs --resume, --resume needs a checkpoint

A checkpoint dir holds config.json + model.safetensors (model.save), tokenizer.json and meta.json (copied
from the prepared data) and train_state.pt (optimizer, step, RNG states, loader position), which holds
only tensors and plain Python values so `torch.load(weights_only=True)` reads it without unpickling code.

A save writes everything into `RUN/.tmp-<name>`, fsyncs it, renames the old dir to `<name>.old`, renames
the new one to `<name>` and deletes the old one. A crash before the first rename leaves the old
checkpoint untouched; a crash between the renames leaves `<name>.old`, which `recover` puts back.
"""

import json
import os
import random
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from model.errors import UserError
from model import CheckpointError, GPTConfig
from model.io import REQUIRED

STATE = "train_state.pt"
COPIED = ("tokenizer.json", "meta.json")  # from the prepared data dir, so a checkpoint is self-contained


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_checkpoint(run_dir: Path, name: str, model, config: dict, data_dir: Path, train_state: dict) -> Path:
    """Atomically replace `run_dir/name` with a checkpoint of `model` and `train_state`."""
    final, old, tmp = run_dir / name, run_dir / f"{name}.old", run_dir / f".tmp-{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save(tmp, extra_config={k: v for k, v in config.items() if k != "model"})
    for file in COPIED:
        shutil.copyfile(data_dir / file, tmp / file)
    pause_for_tests(train_state["step"])
    torch.save(train_state, tmp / STATE)
    for file in tmp.iterdir():
        fsync_path(file)
    fsync_path(tmp)
    if final.exists():
        os.rename(final, old)
    os.rename(tmp, final)
    fsync_path(run_dir)
    shutil.rmtree(old, ignore_errors=True)
    return final


def pause_for_tests(step: int) -> None:
    """Test hook: KOGPT_TEST_SAVE_PAUSE=<step> sleeps halfway through that step's save, so a test can kill -9 it."""
    if os.environ.get("KOGPT_TEST_SAVE_PAUSE") == str(step):
        print(f"SAVE_PAUSED {step}", flush=True)
        time.sleep(60)


def recover(run_dir: Path) -> None:
    """Undo what a crash in the middle of `save_checkpoint` left behind."""
    for name in ("last", "best"):
        old = run_dir / f"{name}.old"
        if old.exists() and not (run_dir / name).exists():
            os.rename(old, run_dir / name)  # crashed between the two renames: the old one is intact
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(run_dir / f".tmp-{name}", ignore_errors=True)


def load_train_state(ckpt: Path) -> dict:
    """train_state.pt of a checkpoint dir, read without unpickling arbitrary objects."""
    try:
        return torch.load(ckpt / STATE, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt / STATE} is missing; this checkpoint cannot be resumed (start a new run with --out)") from None
    except Exception as e:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"{ckpt / STATE} is damaged ({e}); start a new run with --out") from None


def rng_state() -> dict:
    """Every random generator the loop draws from, as tensors and plain values."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "python": {"version": py_state[0], "state": torch.tensor(py_state[1], dtype=torch.int64), "gauss": py_state[2]},
    }  # fmt: skip


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"].tolist()), p["gauss"]))


def open_run_dir(out_dir: Path, resume: bool) -> dict | None:
    """Check the run dir against --resume; last/'s train_state when resuming."""
    has_ckpt = (out_dir / "last" / "model.safetensors").exists()
    if has_ckpt and not resume:
        raise UserError(f"{out_dir} already holds a checkpoint; add --resume to continue it, or pass --out NEW_DIR")
    if resume and not has_ckpt:
        raise UserError(f"nothing to resume in {out_dir} (no last/ checkpoint); drop --resume to start a new run")
    return load_train_state(out_dir / "last") if resume else None


def check_same_model(ckpt: Path, model_config: dict, meta: dict) -> None:
    """Refuse to resume with a model or tokenizer other than the checkpoint's (only dropout may change)."""
    try:
        saved = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))["model"]
        saved_meta = json.loads((ckpt / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"cannot read {ckpt}/config.json and meta.json ({e}); start a new run with --out") from None
    defaults = asdict(GPTConfig())  # a setting added since the checkpoint was saved has its default value there
    saved = {**{k: v for k, v in defaults.items() if k not in REQUIRED}, **saved}
    changed = [f"model.{k} {saved.get(k)} -> {v}" for k, v in model_config.items() if k != "dropout" and saved.get(k) != v]
    if saved_meta.get("tokenizer_hash") != meta.get("tokenizer_hash"):
        changed.append("the tokenizer (data settings)")
    if changed:
        raise UserError(
            f"cannot resume from {ckpt}: the model differs ({', '.join(changed)}); "
            "use the checkpoint's settings (see its config.json) or start a new run with --out"
        )
