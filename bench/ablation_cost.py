"""Does switching heads off (common/heads_off.py) cost the training step anything? Timed, alternating.

    python bench/ablation_cost.py                  # configs/small.toml's shape, fp32, 20 rounds
    python bench/ablation_cost.py --rounds 40 --threads 1

Three models of the same weights take turns, one training step each per round (forward, backward, AdamW):
"plain", never switched; "after", which went through `head_means` and a `HeadsOff(...)` block first (the
hooks come off at the block's end, so nothing of them should be left in its step); and "inside", a step
taken inside an ablation of one head per layer (the price of the hook itself, which only inspection pays).
Prints the median step time of each and the ratios to "plain".

Then what recording each head's importance (inspection/views/roles.py) would add to an evaluation: the
role scores of `--heads` alone and with the importance, on the built-in corpus's validation split, for the
default shape and for configs/heads.toml's, median of --repeats.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from data.config import DataConfig  # noqa: E402
from data.prepare import prepare  # noqa: E402
from data.tokenizer import load_tokenizer  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from common.heads_off import HeadsOff, head_means  # noqa: E402
from model.speed.fast_gpt import has_hooks  # noqa: E402
from training.evaluation import score_heads  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of the role scores per shape")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = GPTConfig(vocab_size=2048, block_size=128, n_layer=4, n_head=6, n_embd=192)  # configs/small.toml's
    torch.manual_seed(0)
    models = {name: GPT(config) for name in ("plain", "after", "inside")}
    for model in models.values():
        model.load_state_dict(models["plain"].state_dict())
    x = torch.randint(0, config.vocab_size, (16, 129), generator=torch.Generator().manual_seed(0))
    after = models["after"].eval()
    means = head_means(after, x[:4, :128])
    with HeadsOff(after, [(0, 1), (3, 5)], "mean", means):
        after(x[:, :128])
    after.train()
    assert not has_hooks(after)
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, m in models.items()}
    inside = [(layer, 0) for layer in range(config.n_layer)]

    def step(name: str) -> float:
        model, optimizer = models[name], optimizers[name]
        started = time.perf_counter()
        loss = model(x[:, :-1], x[:, 1:])[1]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - started

    times = {name: [] for name in models}
    for r in range(args.rounds + 2):  # the first two rounds warm up
        for name in models:
            with HeadsOff(models[name], inside if name == "inside" else [], "zero"):
                seconds = step(name)
            if r >= 2:
                times[name].append(seconds)
    plain = statistics.median(times["plain"])
    print(f"configs/small.toml's shape (4 x 6 x 192, context 128, batch 16), fp32, {torch.get_num_threads()} threads, "
          f"{args.rounds} rounds")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:>7}: median {1000 * median:7.1f} ms a step  ({median / plain:.3f}x plain)")
    importance_cost(args.repeats)


def importance_cost(repeats: int) -> None:
    """Seconds of the role scores with and without each head's importance, per shape."""
    prepared = prepare(DataConfig(vocab_size=2048), verbose=False)
    tokenizer = load_tokenizer(prepared.tokenizer_path)
    shapes = {"default 4 x 6 x 192, context 128": GPTConfig(vocab_size=2048, block_size=128, n_layer=4, n_head=6, n_embd=192),
              "heads.toml 2 x 4 x 64, context 32": GPTConfig(vocab_size=2048, block_size=32, n_layer=2, n_head=4, n_embd=64)}
    for name, config in shapes.items():
        model = GPT(config)
        seconds = {False: [], True: []}
        for _ in range(repeats):
            for importance in seconds:
                seconds[importance].append(score_heads(model, prepared.dir, prepared.meta, tokenizer, importance)["seconds"])
        roles, both = statistics.median(seconds[False]), statistics.median(seconds[True])
        print(f"{name}: role scores {roles:.2f} s, with each head's importance {both:.2f} s ({both / roles:.1f}x)")


if __name__ == "__main__":
    main()
