"""Three lesson experiments with heads kept off from the first step (train.heads_off), on seeds of your choice.

    python bench/heads_off.py 41 808 6006 --out bench/out/heads_off --record

For each seed, the learner's commands one after the other: the lesson run as it is (configs/heads.toml), then
(a) its previous-token head kept off, (b) every head of layer 0 kept off, (c) its strongest induction head kept
off. Each run records at every evaluation every head's role scores and what switching each off costs
(train.head_costs: the lesson run's are cheap), and this prints, per run: when each head first passed the role
bar (inspection/views/roles.py: at least 0.3 and twice chance) and when it became needed (its in-context drop lost
when switched off at least 1 nat, training/plots.py's NECESSARY), the roles at the end, and the in-context loss
drop at best/ and at its highest. --record appends a line per run to bench/results/heads_off.jsonl.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inspection.views.roles import ROLE_MIN  # noqa: E402
from training.metrics import read_metrics  # noqa: E402
from training.plots import NECESSARY  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "heads_off.jsonl"


def train(seed: int, out: Path, heads_off: str = "") -> float:
    """The lesson run of `seed` into `out` (replaced), with `heads_off` kept off; its wall time in seconds."""
    argv = [sys.executable, "train.py", "--config", "configs/heads.toml", f"--train.seed={seed}", "--out", str(out),
            "--overwrite", "--train.head_costs=true"] + ([f"--train.heads_off={heads_off}"] if heads_off else [])
    started = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def summary(run: Path) -> dict:
    """What the run's metrics.jsonl says of its heads over training and at best/."""
    records = read_metrics(run / "metrics.jsonl")
    evals = [r for r in records if r.get("kind") == "eval" and r.get("heads")]
    final = next(r for r in records if r.get("kind") == "final")
    heads = final["best_heads"]
    L, H = len(heads["scores"]["induction"]), len(heads["scores"]["induction"][0])

    def first(test) -> dict:
        """"L.H" -> the first evaluation's step at which test(record, layer, head) held."""
        found = {}
        for r in evals:
            for layer in range(L):
                for head in range(H):
                    if f"{layer}.{head}" not in found and test(r["heads"], layer, head):
                        found[f"{layer}.{head}"] = r["step"]
        return found

    def passed(role):
        bar = max(ROLE_MIN, 2 * (evals[0]["heads"]["chance"][role] or 0))
        return first(lambda h, l, k: (h["scores"][role][l][k] or 0) >= bar)

    def drop(h) -> float:
        return (h["loss_first_copy"] or 0) - (h["loss_second_copy"] or 0)

    return {"best_step": final["best_step"], "best_bpc": round(final["best_val_bpc"], 4),
            "previous_token_formed": passed("previous-token"), "induction_formed": passed("induction"),
            "self_formed": passed("self"),
            "needed": first(lambda h, l, k: h.get("importance") and (h["importance"]["drop"][l][k] or 0) >= NECESSARY),
            "best": {role: [[round(x or 0, 3) for x in row] for row in heads["scores"][role]]
                     for role in ("previous-token", "self", "induction")},
            "best_cost_drop": [[round(x or 0, 3) for x in row] for row in heads["importance"]["drop"]],
            "drop_best": round(drop(heads), 3), "drop_highest": round(max(drop(r["heads"]) for r in evals), 3),
            "cost_seconds": round(sum(r["heads"].get("seconds", 0) for r in evals), 1)}


def strongest(run_summary: dict, role: str, layer: int) -> str:
    """The head of `layer` with the highest `role` score at best/, as "L.H"."""
    row = run_summary["best"][role][layer]
    return f"{layer}.{max(range(len(row)), key=row.__getitem__)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("seeds", type=int, nargs="+")
    parser.add_argument("--out", default="bench/out/heads_off", help="where the runs go (replaced)")
    parser.add_argument("--record", action="store_true", help=f"append the figures to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    for seed in args.seeds:
        base_dir = Path(args.out) / str(seed) / "base"
        wall = train(seed, base_dir)
        base = summary(base_dir)
        runs = [("base", "", wall, base)]
        for name, off in (("a", strongest(base, "previous-token", 0)), ("b", "0"),
                          ("c", strongest(base, "induction", 1))):
            run_dir = Path(args.out) / str(seed) / name
            runs.append((name, off, train(seed, run_dir, off), summary(run_dir)))
        for name, off, wall, found in runs:
            row = {"seed": seed, "experiment": name, "heads_off": off, "wall_s": round(wall, 1), **found}
            print(json.dumps(row, ensure_ascii=False))
            if args.record:
                with RESULTS.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"date": time.strftime("%Y-%m-%d"), **row}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
