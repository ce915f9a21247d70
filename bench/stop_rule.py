"""The early stop judged on corpora it was not tuned on: whole-budget runs, and each stopping rule replayed on them.

    python bench/stop_rule.py subsets corpus:libreoffice-help 2 4     # folders of every 2nd and 4th document
    python bench/stop_rule.py run builtin corpus:debian-faq ...       # the default command, train.patience=0
    python bench/stop_rule.py replay bench/out/stop/* --record        # each rule on each recorded curve

`run` trains the default config on each source for its whole time budget (`--train.patience=0`), keeping every
evaluation's losses in metrics.jsonl. `replay` walks each run's evaluations as the training loop does and asks
each rule where it would have stopped: training/early_stop.py's patience (with the settings "auto" gives), the
same with the stop for memorizing it had before (`memorizing`), and none;
the bits per character it would have kept is best/'s validation loss up to that step, in the units of the final
score (the final best_val_bpc over the evaluation's loss at that step). Printed per corpus and rule: the step it
stops at, the bits per character kept against the whole budget's, and the minutes saved. --record appends the
rows to bench/results/stop_rule.jsonl.
"""

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from training import early_stop  # noqa: E402
from training.metrics import read_metrics  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "stop"
RESULTS = ROOT / "bench" / "results" / "stop_rule.jsonl"


def run_name(source: str) -> str:
    return source.replace("corpus:", "").replace("/", "_").strip("_") or "builtin"


def make_subsets(source: str, every: list[int]) -> None:
    """Folders of every N-th document of a built corpus (bench/out/stop/subsets/NAME-every-N)."""
    from data.config import DataConfig
    from data.corpora import corpus_folder

    folder = corpus_folder(source.removeprefix("corpus:"), DataConfig().cache_dir)
    documents = sorted(folder.glob("*.txt"))
    for n in every:
        out = OUT / "subsets" / f"{folder.name}-every-{n}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for document in documents[::n]:
            shutil.copy(document, out / document.name)
        chars = sum(len(d.read_text(encoding="utf-8")) for d in documents[::n])
        print(f"{out}: {len(documents[::n])} documents, {chars:,} characters")


def run(sources: list[str], extra: list[str]) -> None:
    for source in sources:
        out = OUT / run_name(source)
        argv = [sys.executable, "train.py", f"--data.source={source}", "--train.patience=0", "--out", str(out),
                "--overwrite", *extra]
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            sys.exit(f"{source}: train.py failed: {done.stderr.strip().splitlines()[-1]}")
        (out / "wall_s.txt").write_text(f"{time.perf_counter() - started:.1f}\n")
        print(f"{source}: {time.perf_counter() - started:.0f} s -> {out}")


RULES = ("memorizing", "patience", "none")  # the rule before (patience and its stop for memorizing); now; none
OVERFIT_RISE, OVERFIT_GAP = 0.002, 0.2  # the removed stop: see memorizing()


def memorizing(val: float, train: float, previous: float, best: float, since: int) -> bool:
    """The stop training/early_stop.py had until 2026-12-05: a second evaluation without a better best/, higher
    than the one before and 0.2% above best/'s, with the training loss 20% below the validation loss."""
    return since >= 2 and val > previous and val >= (1 + OVERFIT_RISE) * best and train <= (1 - OVERFIT_GAP) * val


def replay(run_dir: Path, rule: str) -> int | None:
    """The step at which `rule` stops the recorded run (None: it runs the whole budget)."""
    config = json.loads((run_dir / "last" / "config.json").read_text())
    records = read_metrics(run_dir / "metrics.jsonl")
    evals = [r for r in records if r.get("kind") == "eval"]
    tc = SimpleNamespace(**config["train"])
    tc.patience = early_stop.auto_patience(tc.max_steps, tc.eval_interval)
    cfg = SimpleNamespace(train=tc, auto={"train.patience", "train.max_steps"})
    best, last, since = math.inf, math.inf, 0
    for r in evals:
        best, since = (r["val_loss"], 0) if r["val_loss"] < best else (best, since + 1)
        memorized = memorizing(r["val_loss"], r["train_loss"], last, best, since)
        last = r["val_loss"]
        if rule == "none":
            continue
        if early_stop.stops_early(cfg, r["step"], since) or (rule == "memorizing" and memorized and
                                                             r["step"] >= early_stop.EARLIEST_SHARE * tc.max_steps):
            return r["step"]
    return None


def summary(run_dir: Path) -> list[dict]:
    records = read_metrics(run_dir / "metrics.jsonl")
    evals = [r for r in records if r.get("kind") == "eval"]
    final = next(r for r in records if r.get("kind") == "final")
    at_best = next(r["val_loss"] for r in evals if r["step"] == final["best_step"])
    per_nat = final["best_val_bpc"] / at_best  # bits per character per nat of the evaluation's loss
    seconds_per_step = float((run_dir / "wall_s.txt").read_text()) / final["step"] if (run_dir / "wall_s.txt").exists() else 0
    rows = []
    for rule in RULES:
        stop = replay(run_dir, rule)
        kept = [r["val_loss"] for r in evals if stop is None or r["step"] <= stop]
        bpc = min(kept) * per_nat if stop is not None else final["best_val_bpc"]
        rows.append({"corpus": run_dir.name, "rule": rule, "stop_step": stop, "steps": final["step"],
                     "best_step": final["best_step"], "bpc": round(bpc, 4), "whole_bpc": round(final["best_val_bpc"], 4),
                     "lost": round(bpc - final["best_val_bpc"], 4),
                     "minutes_saved": round((final["step"] - (stop or final["step"])) * seconds_per_step / 60, 1)})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("subsets")
    p.add_argument("source")
    p.add_argument("every", type=int, nargs="+")
    p = sub.add_parser("run")
    p.add_argument("sources", nargs="+")
    p = sub.add_parser("replay")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--record", action="store_true")
    args, extra = parser.parse_known_args(argv)
    if args.command == "subsets":
        make_subsets(args.source, args.every)
    elif args.command == "run":
        run(args.sources, extra)
    else:
        date = time.strftime("%Y-%m-%d")
        print(f"{'corpus':34} {'rule':14} {'stops at':>9} {'of':>6} {'best':>6} {'bits/char':>9} {'whole':>7} {'lost':>7} {'saved':>6}")
        for run_dir in args.runs:
            for row in summary(run_dir):
                print(f"{row['corpus']:34} {row['rule']:14} {row['stop_step'] or '-':>9} {row['steps']:>6} "
                      f"{row['best_step']:>6} {row['bpc']:9.4f} {row['whole_bpc']:7.4f} {row['lost']:+7.4f} "
                      f"{row['minutes_saved']:5.1f}m")
                if args.record:
                    with RESULTS.open("a", encoding="utf-8") as f:
                        f.write(json.dumps({"date": date, **row}) + "\n")


if __name__ == "__main__":
    main()
