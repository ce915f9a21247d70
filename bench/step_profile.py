"""Where a training step's time goes: torch.profiler over the step train.py runs, grouped by kind of work.

    python bench/step_profile.py                                  # the default shape and 6 x 384, fp32 and bf16
    python bench/step_profile.py --shapes default --precisions bf16 --compile

The step is train.py's: forward with the loss under autocast (bf16) or none (fp32), backward, gradient clipping
at 1.0 and AdamW as train.py makes it (training/setup.py), on a fixed random batch. After --warmup steps,
--steps steps run under the profiler; each CPU operator's own time (its children's excluded) goes to one of the
groups below, printed as ms per step and share of the step, with the step's tokens/s and GFLOP/s (6N + 12·L·d·T
FLOPs a token, model.flops_per_token) against this machine's matmul peak at that precision
(bench/train_speed.py's measure_matmul_peak).
"""

import argparse
import contextlib
import sys
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.generate_speed import matrix_params  # noqa: E402
from bench.train_speed import measure_matmul_peak  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from model.speed import speed_up  # noqa: E402
from training.hardware import PRECISIONS  # noqa: E402
from training.setup import make_optimizer  # noqa: E402

SHAPES = {  # name: (n_layer, n_head, n_embd, block_size, batch_size, vocab_size)
    "default": (4, 6, 192, 128, 16, 2048),  # configs/small.toml on the built-in corpus (vocabulary and batch "auto")
    "6x384": (6, 6, 384, 256, 8, 8192),  # bench/train_speed.py's "small"
}
DEFAULT_DROPOUT = 0.2  # what the default run's "auto" dropout comes to on the built-in corpus in ten minutes

# An operator's group: the first whose key is in its name (profiler names, e.g. "aten::addmm")
GROUPS = [
    ("matmul", ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm",
                "mkldnn", "onednn")),
    ("attention (SDPA)", ("scaled_dot_product", "flash_attention", "_efficient_attention")),
    ("cross-entropy / softmax", ("log_softmax", "nll_loss", "cross_entropy", "softmax")),
    ("layer norm", ("layer_norm",)),
    ("GELU", ("gelu",)),
    ("optimizer (AdamW)", ("_foreach", "adam", "lerp", "addcmul", "addcdiv")),
    ("gradient clipping", ("norm", "clamp", "clip")),
    ("dtype casts / copies", ("aten::to", "_to_copy", "copy_", "clone", "contiguous")),
    ("embedding", ("embedding",)),
    ("element-wise / reductions", ("aten::add", "aten::mul", "aten::sum", "aten::div", "aten::fill_", "zero_",
                                   "aten::sub", "aten::where", "aten::mean", "aten::rsub", "aten::masked")),
]  # fmt: skip


def group_of(name: str) -> str:
    lowered = name.lower()
    for group, keys in GROUPS:
        if any(key.lower() in lowered for key in keys):
            return group
    if "compiled" in lowered or "inductor" in lowered or lowered.startswith("graph_"):
        return "compiled code (fused)"
    return "other"


def make_step(shape, precision: str, compiled: bool, dropout: float = 0.0):
    n_layer, n_head, n_embd, block_size, batch_size, vocab_size = shape
    torch.manual_seed(0)
    raw = speed_up(GPT(GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head,
                                 n_embd=n_embd, dropout=dropout)))  # as train.py runs it
    raw.train()
    model = torch.compile(raw) if compiled else raw
    settings = SimpleNamespace(lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.99)
    optimizer = make_optimizer(raw, settings, torch.device("cpu"))
    idx = torch.randint(vocab_size, (batch_size, block_size + 1))
    x, y = idx[:, :-1], idx[:, 1:]
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

    def step():
        with autocast:
            loss = model(x, y, loss_only=True)[1]  # as train.py calls it
        loss.backward()
        torch.nn.utils.clip_grad_norm_(raw.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    tokens = batch_size * block_size
    return step, raw.flops_per_token(block_size) * tokens, tokens, 6 * matrix_params(raw) * tokens


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="default,6x384", help=f"comma list of {', '.join(SHAPES)}")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (the step's forward and backward)")
    p.add_argument("--dropout", type=float, default=0.0, help=f"the model's dropout (the default run's: {DEFAULT_DROPOUT})")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--threads", type=int, default=0)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    # only the precisions asked for: a CPU without native bf16 takes minutes over the bf16 peak alone
    peaks = {precision: measure_matmul_peak(PRECISIONS[precision]) for precision in args.precisions.split(",")}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; matmul peak (2048^2): "
          + ", ".join(f"{precision} {gflops:.0f}" for precision, gflops in peaks.items()) + " GFLOP/s")
    for name in args.shapes.split(","):
        for precision in args.precisions.split(","):
            step, flops, tokens, matrix_flops = make_step(SHAPES[name], precision, args.compile, args.dropout)
            for _ in range(args.warmup):
                step()
            started = time.perf_counter()
            for _ in range(args.steps):
                step()
            seconds = (time.perf_counter() - started) / args.steps  # timed outside the profiler, which adds overhead
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(args.steps):
                    step()
            spent = defaultdict(float)
            for event in prof.key_averages():
                spent[group_of(event.key)] += event.self_cpu_time_total / 1e3 / args.steps  # ms per step
            total = sum(spent.values())
            gflops = flops / seconds / 1e9
            print(f"\n{name} {SHAPES[name]} (layers, heads, width, T, batch, vocabulary), {precision}"
                  f"{', compiled' if args.compile else ''}, dropout {args.dropout}: {seconds * 1e3:.1f} ms a step, {tokens / seconds:,.0f} "
                  f"tokens/s, {gflops:.0f} GFLOP/s = {gflops / peaks[precision]:.0%} of the {precision} matmul peak")
            for group, ms in sorted(spent.items(), key=lambda kv: -kv[1]):
                print(f"  {group:<28} {ms:8.1f} ms  {ms / total:6.1%}")
            if spent.get("matmul"):  # the weight matrices' 6N FLOPs a token in the matmul group's own time
                rate = matrix_flops / (spent["matmul"] / 1e3) / 1e9
                print(f"  the matmuls alone: {rate:.0f} GFLOP/s = {rate / peaks[precision]:.0%} of the peak, the step's"
                      " ceiling were everything else free")


if __name__ == "__main__":
    main()
