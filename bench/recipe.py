"""The default run against nanoGPT's character-level recipe at equal wall time, and against `xz -9e`.

    git clone https://github.com/karpathy/nanoGPT /tmp/nanoGPT        # any checkout; never part of this repo
    python bench/recipe.py --nanogpt /tmp/nanoGPT builtin corpora/gimp --budget 10m
    python bench/recipe.py --nanogpt /tmp/nanoGPT corpora/gimp --side-by-side     # both at once, a core each

For each source, on the project's own split (data/split.py: the last whole documents, 10% of the
characters):
- ours: `python train.py --data.source=SRC --train.time_budget=BUDGET` with configs/small.toml, whose
  settings are "auto"; the figure is the final held-out bits per character of the best weights;
- nanoGPT: its train.py with config/train_shakespeare_char.py and the overrides of its README's CPU
  recipe (4 layers, 4 heads, 128 wide, 64 characters of context, batch 12, no dropout, lr 1e-3), on the
  same split as characters. A short timing run first measures its time per iteration (side by side, while
  ours already runs on the other core), so max_iters (and
  lr_decay_iters, as its README asks) fill the same budget, with evaluations every eighth of the run;
  its best checkpoint is then scored over the whole held-out text with the same windows as ours
  (model.nll.stream_nll);
- `xz -9e` given the training text (bench/baselines.py).
Both trainers use the same threads: all of them in turn, or with --side-by-side one pinned core each at
the same time (half the hours; each sees a shared memory bus). Prints a table and writes JSON lines to
--out.
"""

import argparse
import importlib.util
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from bench.baselines import COMPRESSORS, incremental_bits_per_char, split_texts  # noqa: E402
from data.config import DataConfig  # noqa: E402
from model.nll import bits_per_char, stream_nll  # noqa: E402
from training.recipe import parse_duration  # noqa: E402

NANO_RECIPE = ["config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
               "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
               "--n_embd=128", "--dropout=0.0"]  # fmt: skip
HANGUL = re.compile("[\uac00-\ud7a3]")


def pinned(core: int | None, threads: int) -> tuple[list[str], dict]:
    """The command prefix and environment that give a trainer `threads` threads (on one core if `core`)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    return (["taskset", "-c", str(core)] if core is not None else []), env


def start_ours(source: str, budget: str, out: Path, core, threads: int) -> subprocess.Popen:
    prefix, env = pinned(core, threads)
    cmd = prefix + [sys.executable, "train.py", f"--data.source={source}", f"--train.time_budget={budget}",
                    f"--train.threads={threads}", "--train.sample_tokens=0", "--out", str(out), "--overwrite"]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class Timed(threading.Thread):
    """Waits for a started process in the background and notes when it ended, so two trainers that run at
    once each get their own wall time."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.proc, self.started = proc, time.perf_counter()
        self.start()

    def run(self):
        self.output = self.proc.communicate()[0]
        self.wall = time.perf_counter() - self.started

    def result(self, what: str) -> tuple[str, float]:
        self.join()
        if self.proc.returncode:
            sys.exit(f"error: {what} failed:\n{self.output[-2000:]}")
        return self.output, self.wall


def finish_ours(timed: Timed, out: Path) -> dict:
    _, wall = timed.result("train.py")
    final = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"final"' in line][-1]
    config = json.loads((out / "config.json").read_text())
    auto = {k: config[k.split(".")[0]][k.split(".")[1]] for k in config["auto"]}
    return {"bpc": final["best_val_bpc"], "wall_s": round(wall, 1), "budget_used_s": final["budget_used_s"],
            "steps": final["step"], "vocab": config["model"]["vocab_size"], "auto": auto}  # fmt: skip


def write_nano_data(nano: Path, name: str, train: str, val: str) -> tuple[Path, dict]:
    """nanoGPT's character data set (train.bin, val.bin, meta.pkl) of our split, in its data/ folder."""
    chars = sorted(set(train + val))  # as its shakespeare_char prepare does, over the whole text
    stoi = {c: i for i, c in enumerate(chars)}
    folder = nano / "data" / name
    folder.mkdir(parents=True, exist_ok=True)
    for part, text in (("train", train), ("val", "\n" + val)):  # "\n": the line break before val's first character
        np.array([stoi[c] for c in text], dtype=np.uint16).tofile(folder / f"{part}.bin")
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
    return folder, stoi


def nano_command(nano_out: Path, name: str, iters: int, eval_interval: int, core, threads: int):
    prefix, env = pinned(core, threads)
    cmd = prefix + [sys.executable, "train.py", *NANO_RECIPE, f"--dataset={name}", f"--out_dir={nano_out}",
                    f"--max_iters={iters}", f"--lr_decay_iters={iters}", f"--eval_interval={eval_interval}"]
    return cmd, env


def time_nano_iteration(nano: Path, name: str, scratch: Path, core, threads: int) -> float:
    """Seconds per nanoGPT iteration: the median of 100 timed iterations (after 5), as it prints them."""
    cmd, env = nano_command(scratch / "nano-timing", name, 105, 10_000, core, threads)
    log = subprocess.run(cmd, cwd=nano, env=env, capture_output=True, text=True, check=True).stdout
    times = [float(ms) for i, ms in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", log) if int(i) >= 5]
    return statistics.median(times) / 1000


def nano_iterations(seconds: float, per_iter: float, eval_iters: int = 20) -> tuple[int, int]:
    """max_iters that fill `seconds` with 8 evaluations (each 2 x eval_iters forward passes, about a third
    of an iteration each), rounded to a multiple of 8 so the last evaluation falls on the last iteration."""
    evals = 8
    iters = (seconds - evals * 2 * eval_iters * per_iter / 3) / per_iter
    iters = max(evals, int(iters) // evals * evals)
    return iters, iters // evals


class NanoForScoring(nn.Module):
    """nanoGPT's model behind the interface model.nll.stream_nll reads: tok_emb, config.block_size and
    `model(x, all_logits=True) -> (logits, None)` (nanoGPT returns every position's logits when given targets)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt, self.config, self.tok_emb = gpt, gpt.config, gpt.transformer.wte

    def forward(self, x, all_logits=True):
        return self.gpt(x, x)[0], None


def score_nano(nano: Path, nano_out: Path, val_ids: np.ndarray, val_chars: int) -> float:
    spec = importlib.util.spec_from_file_location("nanogpt_model", nano / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ckpt = torch.load(nano_out / "ckpt.pt", map_location="cpu", weights_only=True)
    gpt = module.GPT(module.GPTConfig(**ckpt["model_args"]))
    gpt.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in ckpt["model"].items()})
    nll, count = stream_nll(NanoForScoring(gpt), val_ids)
    assert count == val_chars, (count, val_chars)
    return bits_per_char(nll, val_chars)


def compare(source: str, args, scratch: Path) -> dict:
    train, val = split_texts(DataConfig(source=source))
    slug = re.sub(r"\W+", "_", Path(source).name)
    row = {"source": source, "train_chars": len(train), "val_chars": len(val),
           "hangul": round(len(HANGUL.findall(train + val)) / len(train + val), 3)}  # fmt: skip
    row["xz"] = incremental_bits_per_char(COMPRESSORS["xz -9e"], train, val)
    nano, name = Path(args.nanogpt).resolve(), f"kogpt_{slug}"
    _, stoi = write_nano_data(nano, name, train, val)
    ours_core, nano_core = (0, 1) if args.side_by_side else (None, None)
    ours_out, nano_out = scratch / f"ours-{slug}", scratch / f"nano-{slug}"

    def start() -> Timed:
        return Timed(start_ours(source, args.budget, ours_out, ours_core, args.threads))

    # side by side, nanoGPT is timed while ours already runs on the other core, under the load its real run
    # will see: timed on a quiet machine it misjudged its speed by 20% either way (497 s and 747 s for 600)
    ours = start() if args.side_by_side else None
    per_iter = time_nano_iteration(nano, name, scratch, nano_core, args.threads)
    iters, eval_interval = nano_iterations(parse_duration(args.budget), per_iter)
    nano_cmd, nano_env = nano_command(nano_out, name, iters, eval_interval, nano_core, args.threads)

    def run_nano() -> Timed:
        return Timed(subprocess.Popen(nano_cmd, cwd=nano, env=nano_env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))  # fmt: skip

    def finish_nano(timed: Timed) -> dict:
        wall = timed.result("nanoGPT")[1]
        return {"wall_s": round(wall, 1), "iters": iters, "s_per_iter": round(per_iter, 4)}

    if args.side_by_side:
        nano_run = run_nano()
        row["ours"], row["nano"] = finish_ours(ours, ours_out), finish_nano(nano_run)
    else:
        row["ours"] = finish_ours(start(), ours_out)
        row["nano"] = finish_nano(run_nano())
    val_ids = np.array([stoi[c] for c in "\n" + val], dtype=np.int64)
    row["nano"]["bpc"] = score_nano(nano, nano_out, val_ids, len(val))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sources", nargs="+", help='data sources as data.source takes them ("builtin", a folder, a file)')
    parser.add_argument("--nanogpt", required=True, help="a nanoGPT checkout (its data/ folder gets the splits)")
    parser.add_argument("--budget", default="10m", help="wall time of each trainer's training (default 10m)")
    parser.add_argument("--threads", type=int, default=None, help="threads per trainer (default: 1 side by side, else 2)")
    parser.add_argument("--side-by-side", action="store_true", help="run both at once, each on its own core")
    parser.add_argument("--scratch", default="/tmp/kogpt-recipe", help="run directories of both trainers")
    parser.add_argument("--out", default="recipe.jsonl", help="JSON lines, one per source")
    args = parser.parse_args(argv)
    args.threads = args.threads or (1 if args.side_by_side else 2)
    if not (Path(args.nanogpt) / "train.py").is_file():
        print(f"error: {args.nanogpt} is not a nanoGPT checkout (no train.py); clone it there", file=sys.stderr)
        return 2
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    print(f"{'source':24} {'train chars':>11} {'Hangul':>6} {'ours':>6} {'wall':>6} {'nanoGPT':>7} {'wall':>6} {'xz -9e':>6}  bits/char")
    for source in args.sources:
        row = compare(source, args, scratch)
        with open(args.out, "a") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        ours, nano = row["ours"], row["nano"]
        print(f"{Path(source).name:24} {row['train_chars']:11,} {row['hangul']:6.0%} {ours['bpc']:6.3f} {ours['wall_s']:5.0f}s "
              f"{nano['bpc']:7.3f} {nano['wall_s']:5.0f}s {row['xz']:6.3f}   ours: {ours['steps']} steps, "
              f"vocab {ours['vocab']}, {ours['auto']}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
