"""Training throughput: tokens/s and model FLOP utilisation of one full train step.

A step is forward, backward and an AdamW update on random token batches, timed after warm-up, each model with
its own project's optimizer (ours as train.py makes it, nanoGPT's from its configure_optimizers, and
transformers' Trainer default, torch's AdamW), for the project's GPT in fp32 and bf16 autocast, eager and
`torch.compile`d, and (when transformers is installed) for `GPT2LMHeadModel` at the same shape, in fp32 and in
bf16 autocast: each of our rows is compared ("vs HF") with transformers at the same precision, never across
precisions. With `--nanogpt DIR` (a checkout of nanoGPT; nothing of it is part of this repository) its
model.py's GPT runs the same steps, at both precisions, eager and compiled as ours, compared the same way ("vs
nano"). Utilisation is measured against this machine's own matmul peak (a large fp32 and bf16 matmul, timed
here): fp32 rows against the fp32 peak, bf16 rows against the bf16 one. Variants run interleaved, round by
round, and each reports its median round, so other work on shared cores skews the comparison less.

    python bench/train_speed.py                       # tiny and small shapes, every variant
    python bench/train_speed.py --shapes small --steps 20 --no-compile
    python bench/train_speed.py --shapes default,small --nanogpt /tmp/nanoGPT --no-hf --dropout 0.2
    python bench/train_speed.py --shapes gpu --nanogpt /tmp/nanoGPT --no-hf --steps 2   # configs/gpu.toml's shape
"""

import argparse
import contextlib
import importlib.util
import io
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model import GPT, GPTConfig  # noqa: E402
from model.speed import speed_up  # noqa: E402
from training.setup import make_optimizer  # noqa: E402


@dataclass(frozen=True)
class Shape:
    name: str
    n_layer: int
    n_head: int
    n_embd: int
    block_size: int
    batch_size: int
    vocab_size: int = 8192


SHAPES = {
    "tiny": Shape("tiny", n_layer=4, n_head=4, n_embd=128, block_size=128, batch_size=16),
    "default": Shape("default", n_layer=4, n_head=6, n_embd=192, block_size=128, batch_size=16, vocab_size=2048),
    "small": Shape("small", n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=8),
    # configs/gpu.toml's model at one sequence a step: its 16 x 2 would take minutes a step on a CPU
    "gpu": Shape("gpu", n_layer=12, n_head=12, n_embd=768, block_size=1024, batch_size=1, vocab_size=32000),
}  # default: configs/small.toml on the built-in corpus (its "auto" vocabulary and batch)
DROPOUT = {"p": 0.0}  # --dropout, for every model alike


def measure_matmul_peak(dtype: torch.dtype, n: int = 2048, repeats: int = 10) -> float:
    """Best GFLOP/s of an (n, n) @ (n, n) matmul in `dtype`: the ceiling that utilisation is measured against."""
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    for _ in range(2):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best / 1e9


def build_project_model(shape: Shape) -> torch.nn.Module:
    config = GPTConfig(vocab_size=shape.vocab_size, block_size=shape.block_size, n_layer=shape.n_layer,
                       n_head=shape.n_head, n_embd=shape.n_embd, dropout=DROPOUT["p"])
    return speed_up(GPT(config))  # as train.py runs it (train.speed_up = true)


OPTIMIZER = SimpleNamespace(lr=1e-4, weight_decay=0.1, beta1=0.9, beta2=0.95)  # the same numbers for every model


def project_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return make_optimizer(model, OPTIMIZER, torch.device("cpu"))


def nanogpt_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    with contextlib.redirect_stdout(io.StringIO()):  # it prints its parameter counts
        return model.configure_optimizers(OPTIMIZER.weight_decay, OPTIMIZER.lr, (OPTIMIZER.beta1, OPTIMIZER.beta2),
                                          "cpu")


def hf_optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=OPTIMIZER.lr, betas=(OPTIMIZER.beta1, OPTIMIZER.beta2),
                             weight_decay=OPTIMIZER.weight_decay)


def build_nanogpt_model(shape: Shape, checkout: str) -> torch.nn.Module:
    """nanoGPT's GPT (DIR/model.py) at the shape: GPT-2's layout, biases, exact GELU, SDPA, tied head."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", Path(checkout) / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = module.GPTConfig(block_size=shape.block_size, vocab_size=shape.vocab_size, n_layer=shape.n_layer,
                              n_head=shape.n_head, n_embd=shape.n_embd, dropout=DROPOUT["p"], bias=True)
    return module.GPT(config)


class HFAdapter(torch.nn.Module):
    """Gives transformers' model our calling convention: `(idx, targets) -> (logits, loss)`."""

    def __init__(self, hf_model: torch.nn.Module):
        super().__init__()
        self.hf_model = hf_model

    def forward(self, idx, targets):
        logits = self.hf_model(input_ids=idx).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


def build_hf_model(shape: Shape) -> torch.nn.Module:
    """GPT-2 of the same shape with our choices: dropout off, exact (erf) GELU, SDPA attention (its default)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    p = DROPOUT["p"]
    config = GPT2Config(vocab_size=shape.vocab_size, n_positions=shape.block_size, n_layer=shape.n_layer,
                        n_head=shape.n_head, n_embd=shape.n_embd, resid_pdrop=p, embd_pdrop=p,
                        attn_pdrop=p, activation_function="gelu", bos_token_id=0, eos_token_id=0)
    return HFAdapter(GPT2LMHeadModel(config))


def make_train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, shape: Shape, bf16: bool,
                    compile_model: bool):
    """A closure running one full train step (forward, backward, AdamW) on a fixed random batch; our model is
    called as train.py calls it, for the loss alone (`loss_only`)."""
    torch.manual_seed(0)
    model.train()
    step_model = torch.compile(model) if compile_model else model
    idx = torch.randint(shape.vocab_size, (shape.batch_size, shape.block_size + 1))
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()  # nanoGPT views its targets
    options = {"loss_only": True} if isinstance(model, GPT) else {}

    def train_step():
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            _, loss = step_model(x, y, **options)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return train_step


def time_variants(train_steps: list, warmup: int, steps: int, rounds: int) -> tuple[list[float], list[float]]:
    """Seconds of each closure's warm-up (compilation included) and per step: the median round of `steps` steps.

    The cores are shared, so a variant timed while something else runs looks slow; interleaving the variants
    round by round and taking each one's median round compares them all under the same conditions.
    """
    warmup_seconds = []
    for train_step in train_steps:
        start = time.perf_counter()
        for _ in range(warmup):
            train_step()
        warmup_seconds.append(time.perf_counter() - start)
    rounds_seconds = [[] for _ in train_steps]
    for _ in range(rounds):
        for i, train_step in enumerate(train_steps):
            start = time.perf_counter()
            for _ in range(steps):
                train_step()
            rounds_seconds[i].append((time.perf_counter() - start) / steps)
    return warmup_seconds, [statistics.median(seconds) for seconds in rounds_seconds]


def default_cpu_settings() -> tuple[str, bool] | None:
    """train.py's defaults on this CPU as (precision, compile), if train.py exposes them."""
    try:
        from training.hardware import default_compile, default_precision
        return default_precision(torch.device("cpu")), bool(default_compile(torch.device("cpu")))
    except (ImportError, AttributeError, TypeError):
        return None


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="tiny,small", help="comma-separated subset of: " + ", ".join(SHAPES))
    parser.add_argument("--steps", type=int, default=4, help="timed steps per variant and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each variant reports its median")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation happens here)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    parser.add_argument("--no-hf", action="store_true", help="skip transformers' GPT2LMHeadModel")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--nanogpt", metavar="DIR", help="a nanoGPT checkout: time its GPT too")
    parser.add_argument("--dropout", type=float, default=0.0, help="every model's dropout (the default run's: 0.2)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    DROPOUT["p"] = args.dropout
    if args.threads:
        torch.set_num_threads(args.threads)
    names = [name.strip() for name in args.shapes.split(",")]
    if not set(names) <= set(SHAPES):
        print(f"error: unknown shape in --shapes {args.shapes}; choose from {', '.join(SHAPES)}", file=sys.stderr)
        sys.exit(2)
    shapes = [SHAPES[name] for name in names]
    # oneDNN's check for native bf16 (AVX-512 BF16 or AMX); elsewhere bf16 is emulated and slower than fp32.
    bf16_ok = torch.ops.mkldnn._is_mkldnn_bf16_supported()

    peaks = {"fp32": measure_matmul_peak(torch.float32)}
    if bf16_ok:  # emulated bf16 matmuls ran at 1.3 GFLOP/s against fp32's 116 on an AVX2 CPU: hours, not minutes
        peaks["bf16"] = measure_matmul_peak(torch.bfloat16)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print("matmul peak (2048^3): " + ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in peaks.items())
          + ("" if bf16_ok else "; no native bf16 on this CPU (emulated, ~100x slower), so the bf16 rows are left out"))
    defaults = default_cpu_settings()
    if defaults:
        print(f"train.py CPU defaults: precision {defaults[0]}, compile {defaults[1]}")

    variants = [("ours", "fp32", False), ("ours", "bf16", False)]
    if not args.no_compile:
        variants += [("ours", "fp32", True), ("ours", "bf16", True)]
    if args.nanogpt:
        variants += [("nanoGPT", precision, compiled) for _, precision, compiled in variants]
    variants = [v for v in variants if v[1] in peaks]
    if not args.no_hf:
        if importlib.util.find_spec("transformers"):
            variants += [("transformers", p, False) for p in peaks]
        else:
            print("transformers not installed: no GPT2LMHeadModel comparison")

    print(f"\n{'shape':6} {'model':13} {'precision':9} {'compile':7} {'tok/s':>8} {'ms/step':>8} "
          f"{'MFU':>6} {'vs HF':>6} {'vs nano':>7} {'warm-up s':>9}")
    for shape in shapes:
        flops_per_token = build_project_model(shape).flops_per_token(shape.block_size)
        train_steps = []
        for who, precision, compiled in variants:
            build, optimizer = {"ours": (build_project_model, project_optimizer),
                                "transformers": (build_hf_model, hf_optimizer),
                                "nanoGPT": (lambda s: build_nanogpt_model(s, args.nanogpt), nanogpt_optimizer)}[who]
            model = build(shape)
            train_steps.append(make_train_step(model, optimizer(model), shape, precision == "bf16", compiled))
        warmup_seconds, seconds_per_step = time_variants(train_steps, args.warmup, args.steps, args.rounds)
        rows = []
        for (who, precision, compiled), warmup_s, seconds in zip(variants, warmup_seconds, seconds_per_step):
            tokens_per_s = shape.batch_size * shape.block_size / seconds
            mfu = flops_per_token * tokens_per_s / (peaks[precision] * 1e9)
            rows.append((who, precision, compiled, tokens_per_s, seconds, mfu, warmup_s))
        hf_rates = {r[1]: r[3] for r in rows if r[0] == "transformers"}  # precision -> tok/s
        nano_rates = {(r[1], r[2]): r[3] for r in rows if r[0] == "nanoGPT"}  # (precision, compiled) -> tok/s
        for who, precision, compiled, tokens_per_s, seconds, mfu, warmup_s in rows:
            hf_rate, nano_rate = hf_rates.get(precision), nano_rates.get((precision, compiled))
            ratio = f"{tokens_per_s / hf_rate:5.2f}x" if hf_rate else "   -"
            nano = f"{tokens_per_s / nano_rate:5.2f}x" if nano_rate else "   -"
            mark = " <- default" if defaults and who == "ours" and (precision, compiled) == defaults else ""
            print(f"{shape.name:6} {who:13} {precision:9} {compiled!s:7} {tokens_per_s:8.0f} "
                  f"{seconds * 1e3:8.1f} {mfu:6.1%} {ratio:>6} {nano:>7} {warmup_s:9.1f}{mark}", flush=True)


if __name__ == "__main__":
    main()
