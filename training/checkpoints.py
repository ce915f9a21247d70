"""Training checkpoints: `RUN/last/` and `RUN/best/`, each swapped in whole, never half-written.

    save_checkpoint(run_dir, "last", model, config_dict, prepared_dir, train_state)   # swapped in whole
    recover(run_dir)                       # on start: finish or undo a save that a crash interrupted

The files of a checkpoint dir are storage/checkpoint.py's: config.json + model.safetensors, tokenizer.json
and meta.json (copied from the prepared data) and train_state.pt (optimizer, step, RNG states, loader
position). This module is the run's side: when they are written, and what a crash leaves; what a run
directory may be, --resume and --overwrite are training/run_dir.py's.

With `train.snapshots = N` the run also keeps N evenly spaced copies of the weights in
`RUN/snapshots/step_<step>/`: a checkpoint dir without the train state, taken at evaluations
(`snapshot_due`), so `generate.py --ckpt RUN/snapshots/step_000500` inspects the model of that step.

A save writes everything into `RUN/.tmp-<name>`, then storage.atomic.swap_directory fsyncs it, renames the
old dir to `<name>.old`, renames the new one to `<name>` and deletes the old one. A crash before the first rename leaves the old
checkpoint untouched; a crash between the renames leaves `<name>.old`, which `recover` puts back. A
crash between the save of last/ and that of best/ leaves best/ one best behind, which `recover`
copies over from last/. A full disk is one `DiskError` line, with the old checkpoint kept.
"""

import os
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from storage.atomic import DiskError, swap_directory, write_failure
from storage.checkpoint import (META, SNAPSHOTS, STATE, TOKENIZER, CheckpointError, checkpoint_step, load_train_state,
                                run_snapshots, save_model, save_train_state, snapshot_step)  # fmt: skip
from training.run_dir import LEFTOVER

COPIED = (TOKENIZER, META)  # from the prepared data dir, so a checkpoint is self-contained


def during_save(step: int, name: str) -> None:
    """Called halfway through each save of a train state (the weights written, the train state not); it
    does nothing: a seam that tests replace (monkeypatch, tests/train_with_hooks.py) to stop or kill a run there."""


def save_checkpoint(run_dir: Path, name: str, model, config: dict, data_dir: Path, train_state: dict | None) -> Path:
    """Atomically replace `run_dir/name` with a checkpoint of `model` and `train_state` (None: the weights
    alone, a snapshot). A failed write (a full disk) raises DiskError and leaves the previous checkpoint as
    it was, with no temporary files."""
    final, tmp = run_dir / name, run_dir / f".tmp-{name}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_model(model, tmp, extra_config={k: v for k, v in config.items() if k != "model"})
        for file in COPIED:
            shutil.copyfile(data_dir / file, tmp / file)
        if train_state is not None:
            during_save(train_state["step"], name)
            save_train_state(train_state, tmp / STATE)
        swap_in(tmp, final)
    except (OSError, DiskError) as e:
        raise DiskError(f"cannot save {final} ({write_failure(e)}); it keeps its previous checkpoint: free some disk "
                        f"space, then continue with --resume") from None
    finally:  # a failed write, or a second Ctrl-C that aborts the save, leaves no half-written directory
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def swap_in(tmp: Path, final: Path) -> None:
    """The finished dir `tmp` becomes `final` (last/ or best/); a crash between the renames leaves
    `<final>.old`, which `recover` puts back."""
    swap_directory(tmp, final, final.with_name(f"{final.name}.old"))


def recover(run_dir: Path) -> None:
    """Undo what a crash in the middle of `save_checkpoint` (or of an atomic write) left behind, and make
    best/ agree with last/. Call it with the run's lock held."""
    for name in ("last", "best"):
        old = run_dir / f"{name}.old"
        if old.exists() and not (run_dir / name).exists():
            os.rename(old, run_dir / name)  # crashed between the two renames: the old one is intact
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(run_dir / f".tmp-{name}", ignore_errors=True)
    for orphan in run_dir.glob(".*.tmp"):  # storage.atomic.atomic_write's temporary files, of a run's files only
        if LEFTOVER.fullmatch(orphan.name):
            orphan.unlink(missing_ok=True)
    for cut_short in (run_dir / SNAPSHOTS).glob(".tmp-step_*"):  # a snapshot is a new name: no old one to restore
        shutil.rmtree(cut_short, ignore_errors=True)
    sync_best(run_dir)


def sync_best(run_dir: Path) -> None:
    """A crash between the swaps of last/ and best/ leaves best/ older than the best step last/ names; then
    last/ holds those best weights, so copy it into best/."""
    last = run_dir / "last"
    try:
        state = load_train_state(last, mmap=True)
        step, best_step = state["step"], state["best_step"]
    except (CheckpointError, KeyError, TypeError):  # no last/, or a damaged one: resuming it reports the damage
        return
    if best_step == step and checkpoint_step(run_dir / "best") != step:
        tmp = run_dir / ".tmp-best"
        shutil.copytree(last, tmp)
        swap_in(tmp, run_dir / "best")


def rng_state(device: torch.device | None = None) -> dict:
    """Every random generator the loop draws from, as tensors and plain values: on CUDA only the run's own
    device's generator (`device`), so a run resumes on a machine with fewer GPUs."""
    np_state = np.random.get_state()
    py_state = random.getstate()
    on_cuda = device is not None and device.type == "cuda"
    return {
        "torch": torch.get_rng_state(),
        "cuda": [torch.cuda.get_rng_state(device)] if on_cuda else [],
        "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                  "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "python": {"version": py_state[0], "state": torch.tensor(py_state[1], dtype=torch.int64), "gauss": py_state[2]},
    }  # fmt: skip


def cuda_state_for(states: list, device: torch.device):
    """The saved CUDA generator state to give `device`: the one state a run saves now, or (a file written before,
    holding one state per visible GPU) the device's own, else the first; None when there is none to give."""
    if not states or device.type != "cuda":
        return None
    if len(states) == 1:
        return states[0]
    index = device.index or 0
    return states[index] if index < len(states) else states[0]


def set_rng_state(state: dict, device: torch.device | None = None) -> None:
    torch.set_rng_state(state["torch"])
    cuda = cuda_state_for(state["cuda"], device or torch.device("cpu"))
    if cuda is not None:
        torch.cuda.set_rng_state(cuda, device)
    n = state["numpy"]
    np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["state"].tolist()), p["gauss"]))


def snapshot_due(step: int, max_steps: int, taken: int, wanted: int) -> bool:
    """Whether the evaluation at `step` takes a snapshot: the k-th of `wanted` is due at the first evaluation
    at or after step k * max_steps / wanted, so the last one is the run's last step."""
    return taken < wanted and step * wanted >= (taken + 1) * max_steps


def save_snapshot(run_dir: Path, step: int, model, config: dict, data_dir: Path) -> Path:
    """RUN/snapshots/step_<step>: the weights of `step` with their config, tokenizer and meta.json."""
    return save_checkpoint(run_dir / SNAPSHOTS, f"step_{step:06d}", model, {**config, "step": step}, data_dir, None)


def snapshots_taken(run_dir: Path, cfg) -> list[Path]:
    """The snapshots in run_dir that are this run's (`cfg`, a RunConfig: its model and run_id), by step; a
    directory copied in from elsewhere is neither counted nor removed."""
    return run_snapshots(run_dir, asdict(cfg.model), cfg.run_id)[0]


def drop_snapshots_after(run_dir: Path, step: int, cfg) -> None:
    """A resumed run takes again the snapshots after its checkpoint, so drop those a stopped run took: an
    evaluation takes its snapshot before it saves last/, so a crash in between leaves one to retake."""
    for d in snapshots_taken(run_dir, cfg):
        if snapshot_step(d) > step:
            shutil.rmtree(d)
