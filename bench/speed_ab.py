"""Decoding tok/s and a training step's ms of this checkout against another (an older commit's `git worktree`), in
turns, one process a round and tree, the medians and their ratio: is a change within noise?

    git worktree add ../before 513cfad
    python bench/speed_ab.py --before ../before --rounds 5          # 2 threads: the machine otherwise idle

Shapes: the default (configs/small.toml's 4 x 6 x 192, vocabulary 2,048, block 128) and 6 x 384 (vocabulary 8,192,
block 1,024); fp32, the speed layer on, greedy decoding of 600 and 300 tokens after a 16-token prompt, training steps
(forward, backward, AdamW; dropout 0) at batch 16 x 128 and 4 x 256, the median of 6 after 2.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ROUND = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(int(sys.argv[2]))
from model import GPT, GPTConfig
from model.sampling import generate
from model.speed import speed_up
out = {}
for name, cfg, new, batch, T in (("default", dict(vocab_size=2048, block_size=128, n_layer=4, n_head=6, n_embd=192), 600, 16, 128),
                                 ("6x384", dict(vocab_size=8192, block_size=1024, n_layer=6, n_head=6, n_embd=384), 300, 4, 256)):
    torch.manual_seed(0)
    model = speed_up(GPT(GPTConfig(**cfg, dropout=0.0)).eval())
    idx = torch.randint(0, cfg["vocab_size"], (1, 16))
    generate(model, idx, 20, temperature=0)
    t = time.perf_counter(); generate(model, idx, new, temperature=0)
    out[f"decode {name} (tok/s)"] = new / (time.perf_counter() - t)
    model.train()
    x = torch.randint(0, cfg["vocab_size"], (batch, T + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for i in range(8):
        t = time.perf_counter()
        loss = model(x[:, :-1], x[:, 1:], loss_only=True)[1]; loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        if i >= 2: times.append(time.perf_counter() - t)
    out[f"step {name} (ms)"] = 1000 * statistics.median(times)
print(json.dumps(out))
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="the other checkout (a git worktree of an older commit)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    trees = {"before": Path(args.before).resolve(), "after": ROOT}
    figures: dict[str, dict[str, list[float]]] = {}
    for r in range(args.rounds):
        for name, tree in trees.items():  # in turn: a burst of load hits both alike
            done = subprocess.run([sys.executable, "-c", ROUND, str(tree), str(args.threads)], capture_output=True,
                                  text=True, check=True, env={"OMP_NUM_THREADS": str(args.threads), "PATH": ""})
            for key, value in json.loads(done.stdout).items():
                figures.setdefault(key, {}).setdefault(name, []).append(value)
    for key, by in figures.items():
        before, after = statistics.median(by["before"]), statistics.median(by["after"])
        print(f"{key:24} before {before:9.1f}  after {after:9.1f}  after/before {after / before:.3f}  "
              f"(spread {min(by['before']):.1f}-{max(by['before']):.1f} | {min(by['after']):.1f}-{max(by['after']):.1f})")


if __name__ == "__main__":
    main()
