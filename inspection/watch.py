"""The live training page's numbers: what a run directory holds, read while another process writes it.

    follower = RunFollower(Path("runs/heads"))     # a run dir: finished, or being trained right now
    follower.poll()                               # reads what is new (metrics.jsonl, last/, snapshots/)
    state = follower.state()                      # the page's record of the run: its curves, heads and maps
    maps = follower.text_maps("가나다 가나다")      # a typed text's maps at every evaluation whose weights it holds

Everything here only reads: metrics.jsonl line by line from where it stopped (a line still being written waits for
its end), config.json, and the weights of each evaluation as the run saves them (last/ after each evaluation, best/,
snapshots/step_<step>/). The trainer writes last/ before the evaluation's line, by swapping in a whole directory
(training/checkpoints.py), so an evaluation's weights are read from the directory whose config.json names its step,
before and after the read. An evaluation whose weights were replaced before they were read (a page opened late on
a run without snapshots) has its curves and heads, and no maps. The maps of the fixed text (`TEXT`, or a typed one)
are computed here, on this process's own thread, never in the training loop: the run is the same with and without
a page (tests/test_watch.py).

The record holds numbers and ids only; the page (inspection/page/watch.js) draws them in the viewer's language.
"""

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cli.errors import UserError
from inference.runs import Run, load_run
from inspection.labels import vocab_text
from inspection.live import fitting_text
from inspection.views import Settings, compute
from inspection.views.roles import first_reached, role_bar
from model.nll import bits_per_char
from storage.checkpoint import (CONFIG, checkpoint_step, parse_record, read_json, read_meta, snapshot_dirs,
                                snapshot_step)
from training.run_dir import is_run_config

TEXT = "대한민국 국회는 법률을 제정한다. 대한민국 국회는 법률을"  # a phrase and its copy: where induction shows
FORMED_ROLES = ("previous-token", "induction")  # the copying circuit: its heads' moments are marked on the curves
HELD_BYTES = 512 * 2**20  # weights kept in memory for typed texts; past it every other evaluation's are let go
ROUND = 6  # decimals of a number sent (metrics.jsonl's own)


class NotARun(UserError):
    """A directory that holds no training run."""


def check_run(run_dir: Path, option: str) -> dict:
    """The model table of the run in `run_dir` (its config.json), or NotARun saying what to pass instead."""
    if not run_dir.is_dir():
        raise NotARun(f"{option} {run_dir} is not a directory; pass a run's directory (runs/NAME)")
    config = read_json(run_dir / CONFIG, f"pass a run's directory to {option}", NotARun)
    if not is_run_config(config):
        what = "has no config.json" if config is None else "has a config.json that is not a run's"
        raise NotARun(f"{option} {run_dir} {what}; pass the directory of a run train.py made (runs/NAME)")
    return config["model"]


@dataclass
class Evaluation:
    """One evaluation of the run as the page draws it."""

    record: dict  # the page's numbers (see `eval_numbers`)
    maps: dict | None = None  # the fixed text's attention at this evaluation: {"att": (L, H, T, T) list}
    model: object = None  # its weights, for a typed text (None: not read, or let go past HELD_BYTES)
    missed: bool = False  # its weights were replaced before they could be read


@dataclass
class RunFollower:
    """A run directory followed as it grows (`poll`); `state` is what the page draws of it."""

    run_dir: Path
    text: str = TEXT
    offset: int = 0  # bytes of metrics.jsonl read
    inode: int | None = None  # metrics.jsonl's, to see it rewritten (a resumed run drops what came after its checkpoint)
    config: dict = field(default_factory=dict)
    logged: list = field(default_factory=list)  # [step, train loss] of each log line
    evals: dict = field(default_factory=dict)  # step -> Evaluation
    final: dict | None = None
    meta: dict | None = None  # the data's (bits per character: the validation split's tokens and characters)
    tokens: list | None = None  # the fixed text's token labels
    vocab: str = ""  # every token's label (the glyphs the page's font needs), once a checkpoint is read
    version: int = 0  # grows with every change the page should see
    lock: threading.Lock = field(default_factory=threading.Lock)

    def poll(self) -> bool:
        """Read what the run wrote since the last poll; True if anything changed."""
        changed = self.read_config() | self.read_metrics()
        changed |= self.read_weights()
        if changed:
            self.version += 1
        return changed

    def read_config(self) -> bool:
        config = read_json(self.run_dir / CONFIG, "", NotARun) if (self.run_dir / CONFIG).exists() else None
        if is_run_config(config) and config != self.config:
            self.config = config
            return True
        return False

    def read_metrics(self) -> bool:
        path = self.run_dir / "metrics.jsonl"
        try:
            with open(path, "rb") as f:
                inode = os.fstat(f.fileno()).st_ino
                if inode != self.inode or os.fstat(f.fileno()).st_size < self.offset:  # rewritten: from its start
                    self.inode, self.offset, self.logged, self.final = inode, 0, [], None
                    with self.lock:
                        self.evals = {}
                f.seek(self.offset)
                data = f.read()
        except OSError:  # not yet written
            return False
        whole = data[: data.rfind(b"\n") + 1]  # a line without its end is being written: read it next time
        self.offset += len(whole)
        for line in whole.splitlines():
            record = parse_record(line)
            if record is None:
                continue
            if record.get("kind") == "eval" and record.get("heads"):
                with self.lock:
                    self.evals[record["step"]] = Evaluation(eval_numbers(record))
            elif record.get("kind") == "final":
                self.final = {k: record.get(k) for k in ("step", "val_loss", "val_bpc", "best_step", "best_val_bpc")}
            elif "loss" in record and "kind" not in record:
                self.logged.append([record["step"], record["loss"]])
        return bool(whole)

    def read_weights(self) -> bool:
        """The weights of each evaluation not yet read, from the directory that holds its step now."""
        waiting = [s for s, e in self.evals.items() if e.maps is None and not e.missed]
        if not waiting:
            return False
        found = {snapshot_step(d): d for d in snapshot_dirs(self.run_dir)}
        for name in ("best", "last"):
            step = checkpoint_step(self.run_dir / name)
            if step is not None:
                found[step] = self.run_dir / name
        changed, latest = False, max(self.evals)
        for step in sorted(waiting):
            run = load_step(found.get(step), step)
            if run is None:
                if step < latest or self.final is not None:  # replaced by a later save: it stays without maps
                    self.evals[step].missed = changed = True
                continue
            if self.meta is None:
                self.meta, self.vocab = read_meta(found[step]), vocab_text(run.tokenizer)
            text = fitting_text(run, self.text)
            maps = compute(run, text, ["maps"], Settings())["maps"]
            self.tokens = maps["tokens"]
            with self.lock:
                self.evals[step].maps = {"att": rounded(maps["att"])}
                self.evals[step].model = run
                self.let_go()
            changed = True
        return changed

    def let_go(self) -> None:
        """Past HELD_BYTES of weights, every other evaluation's (the latest kept), for a typed text."""
        held = [s for s in sorted(self.evals) if self.evals[s].model is not None]
        size = sum(p.numel() * p.element_size() for p in self.evals[held[-1]].model.model.parameters()) if held else 0
        if size * len(held) > HELD_BYTES:
            for step in held[-2::-2]:
                self.evals[step].model = None

    def text_maps(self, text: str) -> dict:
        """A typed text's token labels and its maps at each evaluation whose weights are held: {"tokens", "maps":
        {step: att}}."""
        with self.lock:
            held = [(s, e.model) for s, e in sorted(self.evals.items()) if e.model is not None]
        tokens, maps = None, {}
        for step, run in held:
            found = compute(run, fitting_text(run, text), ["maps"], Settings())["maps"]
            tokens, maps[step] = found["tokens"], rounded(found["att"])
        return {"tokens": tokens, "maps": maps}

    def state(self) -> dict:
        """The page's record of the run: its sizes, curves, each evaluation's numbers, the moments its heads formed."""
        with self.lock:
            evals = [dict(e.record, maps=e.maps is not None) for _, e in sorted(self.evals.items())]
        model, train = self.config.get("model", {}), self.config.get("train", {})
        if self.meta:
            val = self.meta["splits"]["val"]
            for e in evals:  # the held-out loss per token, as bits per character of the validation split
                e["bpc"] = round(bits_per_char(e["val_loss"] * val["tokens"], val["chars"]), ROUND)
        return {"name": self.run_dir.name, "path": str(self.run_dir), "n_layer": model.get("n_layer"),
                "n_head": model.get("n_head"), "max_steps": train.get("max_steps"), "logged": self.logged,
                "evals": evals, "final": self.final, "formed": formed(evals), "tokens": self.tokens}

    def maps_at(self, step: int) -> dict | None:
        e = self.evals.get(step)
        return None if e is None or e.maps is None else {"step": step, "tokens": self.tokens, **e.maps}


def load_step(directory: Path | None, step: int) -> Run | None:
    """The checkpoint in `directory` if it holds the weights of `step` before and after they are read, else None (a
    save swapped it under the read, or it holds another step)."""
    if directory is None or checkpoint_step(directory) != step:
        return None
    try:
        run = load_run(directory, device="cpu", speed=False, quiet=True)
    except (UserError, OSError):  # swapped out in the middle of the read
        return None
    return run if checkpoint_step(directory) == step else None


def eval_numbers(record: dict) -> dict:
    """An evaluation line of metrics.jsonl as the page reads it: its losses, every head's role scores, the bar each
    role's score must reach, what switching each head off cost (where it was measured), and the run's sample."""
    heads = record["heads"]
    costs = heads.get("importance")
    return {"step": record["step"], "train_loss": record.get("train_loss"), "val_loss": record.get("val_loss"),
            "scores": heads["scores"], "bars": {r: role_bar(c) for r, c in heads.get("chance", {}).items()},
            "loss_drop": heads.get("loss_drop"), "sample": record.get("sample"),
            "costs": None if costs is None else {"loss": costs["loss"], "drop": costs["drop"]}}


def formed(evals: list[dict]) -> list[dict]:
    """The first evaluation at which each head passed the bar of a role of the copying circuit (FORMED_ROLES), in
    order of the step: [{"role", "layer", "head", "step"}]."""
    steps, found = [e["step"] for e in evals], []
    for role in FORMED_ROLES:
        scored = [e for e in evals if role in e["scores"]]
        if not scored:
            continue
        bar, table = scored[0]["bars"].get(role, role_bar(None)), scored[0]["scores"][role]
        for layer, row in enumerate(table):
            for head in range(len(row)):
                values = [e["scores"][role][layer][head] if role in e["scores"] else None for e in evals]
                step = first_reached(steps, values, bar)
                if step is not None:
                    found.append({"role": role, "layer": layer, "head": head, "step": step})
    return sorted(found, key=lambda f: f["step"])


def rounded(att) -> list:
    """(L, H, T, T) attention as nested lists of 4 decimals: what a page's colours tell apart, a quarter of the bytes."""
    return torch.as_tensor(att).double().mul(1e4).round().div(1e4).tolist()
