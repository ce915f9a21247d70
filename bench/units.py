"""Syllables against jamo (data.unit) at equal wall time: bits per character on held-out text, tokens per character,
steps reached, for corpora x units x vocabulary sizes x seeds, one run at a time.

    python bench/units.py                                              # the final table: 10-minute runs, two seeds
    python bench/units.py --corpora builtin corpus:debian-faq --vocab 1024 2048 --seeds 0 --budget 90s   # a pilot
    python bench/units.py --corpora builtin --units jamo --budget 2m -- --train.patience=0   # after --: train.py's
    python bench/units.py --corpora builtin --steps 300 --seeds 0      # equal steps instead: for a busy machine

Every corpus x unit x vocabulary size is prepared first (python -m data.prepare; timed, outside the budget: the
data cache keeps it for the next seed), then each run is `python train.py` with the default config
(configs/small.toml), `--train.time_budget`, `--train.seed` and `--data.unit`/`--data.vocab_size`, alone on the
machine. The held-out text is the same validation split in both units (the split is made on characters, before
the tokenizer), and bits per character count its NFC characters in both, so the figures compare directly. Printed
per run: the bits per character of best/ and last/ over the whole validation split, validation tokens per
character, the steps reached (of those planned) and the wall time; then each corpus x unit x vocabulary's mean
over the seeds. Each run appends a record to bench/results/units.jsonl (--no-record: none).

--steps N trains every run N steps instead of a time budget: on a machine others share, the steps a budget buys
vary from run to run, while a step of the same vocabulary costs the same in both units (the same model, the same
tokens per step), so equal steps stand in for equal time there (each run's training tokens per second is recorded).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "units"
RESULTS = ROOT / "bench" / "results" / "units.jsonl"
CORPORA = ("builtin", "corpus:debian-faq", "corpus:gimp-manual", "corpus:libreoffice-help")


def run_name(corpus: str, unit: str, vocab: str, seed: int) -> str:
    return f"{corpus.removeprefix('corpus:')}-{unit}-{vocab}-s{seed}"


def data_args(corpus: str, unit: str, vocab: str) -> list[str]:
    return [f"--data.source={corpus}", f"--data.unit={unit}", f"--data.vocab_size={vocab}"]


def prepare(corpus: str, unit: str, vocab: str, extra: list[str]) -> float:
    """Prepare (or reuse) the data of one corpus x unit x vocabulary; the seconds it took."""
    started = time.perf_counter()
    options = [a for a in extra if a.startswith("--data.")]
    done = subprocess.run([sys.executable, "-m", "data.prepare", *data_args(corpus, unit, vocab), *options], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"{corpus} {unit} {vocab}: data.prepare failed: {done.stderr.strip().splitlines()[-1]}")
    return time.perf_counter() - started


def train(corpus: str, unit: str, vocab: str, seed: int, budget: str, steps: int, extra: list[str]) -> dict:
    """One run at the time budget (or of `steps` steps); its figures, read from its metrics.jsonl and meta.json."""
    out = OUT / run_name(corpus, unit, vocab, seed)
    length = [f"--train.max_steps={steps}", "--train.time_budget=", "--train.patience=0"] if steps else [
        f"--train.time_budget={budget}"]
    argv = [sys.executable, "train.py", *data_args(corpus, unit, vocab), *length, f"--train.seed={seed}",
            "--out", str(out), "--overwrite", *extra]
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"{out.name}: train.py failed: {done.stderr.strip().splitlines()[-1]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    final = next(r for r in reversed(records) if r.get("kind") == "final")
    meta = json.loads((out / "last" / "meta.json").read_text(encoding="utf-8"))
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    val = meta["splits"]["val"]
    return {"corpus": corpus, "unit": unit, "vocab": vocab, "vocab_size": meta["vocab_size"], "seed": seed,
            "budget": f"{steps} steps" if steps else budget, "best_bpc": round(final["best_val_bpc"], 4), "last_bpc": round(final["val_bpc"], 4),
            "tokens_per_char": round(val["tokens"] / val["chars"], 4), "val_chars": val["chars"],
            "train_chars": meta["splits"]["train"]["chars"], "steps": final["step"], "best_step": final["best_step"],
            "planned_steps": config["train"]["max_steps"], "wall_s": round(wall, 1),
            "tokens_per_s": final.get("tokens_per_s"), "extra": extra}  # fmt: skip


HEADER = f"{'corpus':18} {'unit':9} {'vocab':>6} {'seed':>4} {'bits/char':>9} {'last':>7} {'tok/char':>8} {'steps':>11} {'wall':>6}"


def line(r: dict) -> str:
    steps = f"{r['steps']}/{r['planned_steps']}"
    return (f"{r['corpus'].removeprefix('corpus:'):18} {r['unit']:9} {r['vocab_size']:>6} {r['seed']:>4} "
            f"{r['best_bpc']:9.4f} {r['last_bpc']:7.4f} {r['tokens_per_char']:8.3f} {steps:>11} {r['wall_s']:5.0f}s")


def means(rows: list[dict]) -> list[str]:
    """Each corpus x unit x vocabulary's mean bits per character over the seeds, and their spread."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["corpus"], r["unit"], r["vocab"]), []).append(r)
    out = [f"{'corpus':18} {'unit':9} {'vocab':>6} {'seeds':>5} {'bits/char':>9} {'spread':>7} {'tok/char':>8} {'steps':>6}"]
    for (corpus, unit, _), group in groups.items():
        bpc = [r["best_bpc"] for r in group]
        out.append(f"{corpus.removeprefix('corpus:'):18} {unit:9} {group[0]['vocab_size']:>6} {len(group):>5} "
                   f"{statistics.mean(bpc):9.4f} {max(bpc) - min(bpc):7.4f} {group[0]['tokens_per_char']:8.3f} "
                   f"{statistics.mean(r['steps'] for r in group):6.0f}")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], usage="python bench/units.py [options] [-- train.py options]")
    parser.add_argument("--corpora", nargs="+", default=list(CORPORA), help="data.source values (default: %(default)s)")
    parser.add_argument("--units", nargs="+", default=["syllables", "jamo"], choices=["syllables", "jamo"])
    parser.add_argument("--vocab", nargs="+", default=["auto"], help='data.vocab_size values (default: "auto")')
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--budget", default="10m", help="train.time_budget of every run (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=0, help="train every run this many steps instead of a budget")
    parser.add_argument("--no-record", action="store_true", help=f"append nothing to {RESULTS.relative_to(ROOT)}")
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    plan = [(c, u, v) for c in args.corpora for u in args.units for v in args.vocab]
    for corpus, unit, vocab in plan:
        print(f"prepared {corpus} {unit} {vocab} in {prepare(corpus, unit, vocab, extra):.1f} s", flush=True)
    print(HEADER, flush=True)
    rows, date = [], time.strftime("%Y-%m-%d")
    for seed in args.seeds:  # a seed's runs together: a machine that slows down later touches every cell alike
        for corpus, unit, vocab in plan:
            rows.append(train(corpus, unit, vocab, seed, args.budget, args.steps, extra))
            print(line(rows[-1]), flush=True)
            if not args.no_record:
                RESULTS.parent.mkdir(parents=True, exist_ok=True)
                with RESULTS.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"date": date, "cpus": os.cpu_count(), **rows[-1]}, ensure_ascii=False) + "\n")
    print("\n".join(means(rows)))


if __name__ == "__main__":
    main()
