"""One text through every snapshot of a run (`train.snapshots`): a page with a slider over the training steps.

    snapshots = run_snapshots(Path("runs/heads"))               # its snapshots/, in order
    page, frames, labels = over_training_page(snapshots, "runs/heads", "국회는 법률을")   # the page's HTML

Each frame is the page's view of one snapshot: the maps of the same tokens, the walkthrough's tensors and
each head's role scores at that step (inspection/views/). The scores are the run's own, recorded at the evaluation
that took the snapshot (`records`: metrics.jsonl's); a snapshot with none recorded is scored here, with the same
definitions and held-out text (inspection/views/roles.py, inspection/heldout.py).
"""

import sys
from pathlib import Path

from cli.messages import messages
from common.heads_off import head_name
from inference.runs import load_run
from inspection.heldout import held_out_ids, usable_ids
from inspection.html import frame, frames_page, opening
from inspection.labels import pad
from inspection.views import Settings, compute
from inspection.views.roles import measure_heads, roles_from_record, roles_record
from inspection.views.words import word_start_ids
from cli.errors import UserError
from storage.checkpoint import read_meta, snapshot_step, snapshots_of_run
from storage.checkpoint import read_metrics


def run_snapshots(run_dir: Path) -> list[Path]:
    """The snapshots of a run, in order (the folders that are not one are named on stderr, never drawn as the
    run's); a UserError that says how to take them when it has none."""
    snapshots, skipped = snapshots_of_run(run_dir) if run_dir.is_dir() else ([], [])
    for line in skipped:  # copied in from another run, or not a snapshot at all
        print(line, file=sys.stderr)
    if not snapshots:
        raise UserError(f"{run_dir} holds no snapshots/ of a training run; train it with --train.snapshots=8 "
                        "(evenly spaced copies of the weights), then look again")
    return snapshots


def over_training_page(snapshots: list[Path], run_dir, prompt: str, device: str = "auto",
                       layers: list[int] | None = None, lang: str = "en") -> tuple[str, list[dict], list[str]]:
    """The page of `prompt` through `snapshots` (of the run `run_dir`, its metrics.jsonl's role scores), opening in
    `lang`, with its frames and token labels (for format_snapshot_table)."""
    frames, records, run = snapshot_frames(snapshots, prompt, read_metrics(Path(run_dir) / "metrics.jsonl"), device,
                                           layers)  # fmt: skip
    layers = list(range(run.model.config.n_layer)) if layers is None else layers
    title = messages(lang)("snapshots.page_title", text=prompt[:60] + ("…" if len(prompt) > 60 else ""),
                           n=len(frames), run=run_dir)
    maps = records["maps"]
    page = frames_page(frames, maps["tokens"], title, layers, lang,
                       shown={"open": opening(records, layers)})  # the lesson's head, as the last snapshot's roles name it
    return page, frames, maps["tokens"]


def snapshot_frames(snapshots: list[Path], prompt: str, records: list[dict], device: str = "auto",
                    layers: list[int] | None = None) -> tuple[list[dict], dict, object]:
    """The frames of `prompt` (html.frame), one per snapshot in order, the last snapshot's records and its Run (for
    titles and sizes)."""
    recorded = {r.get("step"): r["heads"] for r in records if r.get("kind") == "eval" and r.get("heads")}
    frames, found, first_meta, run = [], None, None, None
    for directory in snapshots:
        run = load_run(directory, device=device)
        meta = read_meta(directory) or {}
        if first_meta is None:
            first_meta, ids = meta, run.encode_prompt(prompt)
        elif meta.get("tokenizer_hash") != first_meta.get("tokenizer_hash"):
            raise UserError(f"{directory} has another tokenizer than {snapshots[0]}; the snapshots of one run share "
                            "theirs, so this folder was changed by hand: remove the odd one")
        found = compute(run, ids, ["maps", "walkthrough"], Settings(layers=layers))
        step = snapshot_step(directory)
        roles = recorded_roles(recorded.get(step), directory, (run.model.config.n_layer, run.model.config.n_head))
        if roles is None:  # a snapshot whose evaluation record is gone: score it the same way now
            roles = measure_heads(run.model, held_out_ids(run)[0], usable_ids(run), run.eot_id,
                                  word_starts=word_start_ids(run.token_bytes))
        found["roles"] = roles_record(roles)
        frames.append(frame(found, list(range(run.model.config.n_layer)) if layers is None else layers, step))
    return frames, found, run


def recorded_roles(record, snapshot: Path, shape: tuple[int, int]):
    """The HeadRoles of a metrics.jsonl `heads` record for a model of `shape` (layers, heads), or None (with a
    line) when it holds none to read."""
    if record is None:
        return None
    try:
        roles = roles_from_record(record)
        if all(roles.scores[r].shape == shape for r in roles.scores):
            return roles
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        pass
    print(f"metrics.jsonl's head scores for {snapshot.name} cannot be read; scoring that snapshot again", file=sys.stderr)
    return None


def format_snapshot_table(frames: list[dict], layers: list[int], lang: str = "en") -> str:
    """A line per frame (of `layers`): its step, the head with the highest previous-token and induction
    scores, and the in-context loss drop (the header in `lang`, "en" or "ko")."""
    step, previous, induction, drop = messages(lang)("snapshots.columns").split("|")
    lines = [pad(step, 8, right=True) + "  " + pad(previous, 18) + pad(induction, 18) + drop]
    for shown in frames:
        r, cells = shown["scores"], []
        for role in ("previous-token", "induction"):
            layer, head, score = max(((li, h, x) for li, row in enumerate(r["scores"][role]) for h, x in enumerate(row)
                                      if x is not None), key=lambda t: t[2], default=(0, 0, float("nan")))  # fmt: skip
            cells.append(f"{head_name(layers[layer], head)} {score:.3f}".ljust(18))
        lines.append(f"{shown['step']:>8}  {''.join(cells)}{r['loss_first_copy'] - r['loss_second_copy']:.3f} nats")
    return "\n".join(lines)
