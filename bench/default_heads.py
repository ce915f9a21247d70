"""Does the default run grow a previous-token head and an induction head? Variants of it on one corpus.

    python bench/default_heads.py corpora/libreoffice --runs /tmp/heads                  # the default, seeds 1 and 2
    python bench/default_heads.py corpora/libreoffice --name lessons10 --train.copy_lessons=0.1

Runs `python train.py --data.source=CORPUS` (configs/small.toml: the 10-minute budget and its "auto" settings)
once per seed, with the overrides given, one run at a time, and reads each run's own records: the whole
validation split's bits per character of best/, the steps, the wall time, best/'s copying circuit
(inspection.views.roles.copying_circuit: a previous-token head below an induction head, and the in-context loss drop)
and the first evaluation at which each of the three reached its bar. Prints a line per run and the mean over
the seeds; --record appends a JSON line per run to bench/results/heads.jsonl.
"""

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inspection.views.roles import DROP_FORMED, FORMED, copying_circuit, roles_from_record  # noqa: E402
from bench.record import append_result  # noqa: E402
from training.metrics import read_metrics  # noqa: E402


def first_formed(evals: list[dict]) -> dict:
    """The first evaluated step at which the circuit's previous-token head, induction head and drop reached their bars."""
    found = {}
    for record in evals:
        if not record.get("heads"):
            continue
        c = copying_circuit(roles_from_record(record["heads"]))
        for name, value, bar in (("previous-token", c.previous and c.previous[2], FORMED),
                                 ("induction", c.induction[2], FORMED), ("drop", c.drop, DROP_FORMED)):  # fmt: skip
            if value is not None and value >= bar:
                found.setdefault(name, record["step"])
    return found


def one_run(corpus: str, name: str, seed: int, runs: Path, overrides: list[str]) -> dict:
    run = runs / f"{name}_seed{seed}"
    done = subprocess.run([sys.executable, "train.py", f"--data.source={corpus}", f"--train.seed={seed}", "--out",
                           str(run), "--overwrite", *overrides], cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        sys.exit(f"the run {run} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    records = read_metrics(run / "metrics.jsonl")
    final = records[-1]
    c = copying_circuit(roles_from_record(final["best_heads"]))
    return {"run": f"configs/small.toml on {corpus}" + "".join(f" {o}" for o in overrides), "name": name, "seed": seed,
            "steps": final["step"], "best_step": final["best_step"], "best_val_bpc": round(final["best_val_bpc"], 4),
            "wall_s": final["wall_s"], "previous_token": c.previous and [*c.previous[:2], round(c.previous[2], 3)],
            "induction": [*c.induction[:2], round(c.induction[2], 3)], "loss_drop": round(c.drop, 3),
            "formed": c.formed, "first_reached": first_formed([r for r in records if r.get("kind") == "eval"])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", help="data.source of the runs")
    parser.add_argument("--name", default="default", help="the variant's name in the table")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--runs", type=Path, default=Path("/tmp/heads"), help="where the runs go")
    parser.add_argument("--record", action="store_true", help="append each run's line to bench/results/heads.jsonl")
    args, overrides = parser.parse_known_args()  # the rest, --section.key=value, go to train.py
    rows = []
    for seed in args.seeds:
        r = one_run(args.corpus, args.name, seed, args.runs, overrides)
        rows.append(r)
        prev = "none" if r["previous_token"] is None else "{2:.2f} ({0}.{1})".format(*r["previous_token"])
        print(f"{args.name} seed {seed}: {r['best_val_bpc']:.4f} bits/char at step {r['best_step']} of {r['steps']}, "
              f"{r['wall_s']:.0f} s; previous-token {prev}, induction {r['induction'][2]:.2f} "
              f"({r['induction'][0]}.{r['induction'][1]}), drop {r['loss_drop']:.2f} nats; first reached "
              f"{r['first_reached'] or 'none'}", flush=True)
        if args.record:
            append_result("heads", r)
    mean = sum(r["best_val_bpc"] for r in rows) / len(rows)
    print(f"{args.name}: mean {mean:.4f} bits/char over {len(rows)} runs; circuit formed in "
          f"{sum(r['formed'] for r in rows)} of them")


if __name__ == "__main__":
    main()
