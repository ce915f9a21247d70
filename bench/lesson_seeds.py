"""The lesson run for many seeds, inspected the way a learner does: does each grow its copying circuit?

    python bench/lesson_seeds.py 11 23 101 --runs /tmp/lessons          # configs/heads.toml, seed by seed
    python bench/lesson_seeds.py 7 42 --train.copy_lessons=0.5     # overrides go to train.py

For each seed: `python train.py --config configs/heads.toml --train.seed=S` (its wall time, as a learner waits
for it), then `python generate.py --ckpt RUN --heads --attention RUN/inspect`, the learner's command, whose
heads.json gives the circuit (inspection.views.roles.copying_circuit): the strongest previous-token head in a layer
below the strongest induction head, and the in-context loss drop. One line per seed, the count that pass
the bars (0.5, 0.5, 2 nats), and a JSON line per seed appended to bench/results/heads.jsonl with --record.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inspection.views.roles import HeadRoles, copying_circuit, roles_from_record  # noqa: E402
from bench.record import append_result  # noqa: E402


def roles_of(heads_json: Path) -> HeadRoles:
    """The scores of a heads.json (a roles record, inspection/views/roles.py) as a HeadRoles."""
    return roles_from_record(json.loads(heads_json.read_text(encoding="utf-8")))


def command(*args: str) -> None:
    """Run a command of this project quietly; on failure print what it said and stop."""
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def lesson(seed: int, config: str, runs: Path, overrides: list[str]) -> dict:
    run = runs / f"seed_{seed}"
    started = time.perf_counter()
    command("train.py", "--config", config, f"--train.seed={seed}", "--out", str(run), "--overwrite", *overrides)
    wall = time.perf_counter() - started
    command("generate.py", "--ckpt", str(run), "--heads", "--attention", str(run / "inspect"))
    circuit = copying_circuit(roles_of(run / "inspect" / "heads.json"))
    step = json.loads((run / "best" / "config.json").read_text(encoding="utf-8"))["step"]
    return {"run": config + "".join(f" {o}" for o in overrides), "seed": seed, "wall_s": round(wall, 1),
            "inspected_step": step, "previous_token": circuit.previous and [*circuit.previous[:2], round(circuit.previous[2], 3)],
            "induction": [*circuit.induction[:2], round(circuit.induction[2], 3)], "loss_drop": round(circuit.drop, 2),
            "formed": circuit.formed}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("seeds", type=int, nargs="+")
    parser.add_argument("--config", default="configs/heads.toml")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/lessons"), help="where the runs go")
    parser.add_argument("--record", action="store_true", help="append each seed's line to bench/results/heads.jsonl")
    args, overrides = parser.parse_known_args()  # the rest, --section.key=value, go to train.py
    passed = 0
    print(f"{'seed':>6} {'wall':>7} {'step':>6}  {'previous-token':>16}  {'induction':>12}  {'drop':>6}  formed")
    for seed in args.seeds:
        r = lesson(seed, args.config, args.runs, overrides)
        prev, ind = ("none" if h is None else "{2:.2f} ({0}.{1})".format(*h) for h in (r["previous_token"], r["induction"]))
        print(f"{seed:>6} {r['wall_s']:>6.1f}s {r['inspected_step']:>6}  {prev:>16}  {ind:>12}  {r['loss_drop']:>6.2f}  "
              f"{r['formed']}", flush=True)
        passed += r["formed"]
        if args.record:
            append_result("heads", r)
    print(f"{passed} of {len(args.seeds)} seeds grew the circuit (previous-token >= 0.5 below induction >= 0.5, drop >= 2 nats)")


if __name__ == "__main__":
    main()
