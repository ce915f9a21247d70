"""The figure of docs/units.md "What the heads do with jamo": two runs of one config in the two units, the best
head's previous-token and induction scores and the in-context loss drop at every evaluation (their metrics.jsonl).

    python train.py --config configs/heads.toml --data.unit=syllables --out runs/heads-syllables
    python train.py --config configs/heads.toml --data.unit=jamo --out runs/heads-jamo
    python bench/units_heads.py runs/heads-syllables runs/heads-jamo          # writes docs/units_heads.png

It prints, for each run, the first evaluation at which each role's best head passed 0.5 and the last drop.
"""

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storage.checkpoint import read_metrics  # noqa: E402

ROLES = ("previous-token", "induction")


def best(record: dict, role: str) -> float:
    return max(max(row) for row in record["heads"]["scores"][role])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("syllables", type=Path, help="the run with data.unit = syllables")
    parser.add_argument("jamo", type=Path, help="the same config's run with data.unit = jamo")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "units_heads.png")
    args = parser.parse_args()
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), dpi=100)
    for unit, run, colour in (("syllables", args.syllables, "#1f77b4"), ("jamo", args.jamo, "#d62728")):
        evals = [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "eval"]
        steps = [r["step"] for r in evals]
        for ax, role in zip(axes, ROLES):
            ax.plot(steps, [best(r, role) for r in evals], color=colour, label=unit)
        axes[2].plot(steps, [r["heads"]["loss_drop"] for r in evals], color=colour, label=unit)
        formed = {role: next((r["step"] for r in evals if best(r, role) >= 0.5), None) for role in ROLES}
        print(json.dumps({"unit": unit, "run": str(run), "past_0.5_at": formed, "last_drop": evals[-1]["heads"]["loss_drop"]}))
    for ax, title in zip(axes, ("previous-token score (best head)", "induction score (best head)",
                                "in-context loss drop (nats)")):  # fmt: skip
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend(title="data.unit")
    config = json.loads((args.jamo / "config.json").read_text(encoding="utf-8"))
    fig.suptitle(f"{args.jamo.name} and {args.syllables.name}, seed {config['train']['seed']}: the circuit in both units",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
