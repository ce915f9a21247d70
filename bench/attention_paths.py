"""Which attention computation a training step on this CPU should run: whole train steps of the project's GPT
(forward, backward, AdamW, as bench/train_speed.py times them) with the layers' attention swapped between

  kernel    what model/speed/kernels.py picks for a CPU (the one train.py runs),
  textbook  the layer's own steps one by one (`attend`: q kᵀ / √d, masked_fill, softmax, dropout, @ v),
  fused     PyTorch's scaled_dot_product_attention, with its own dropout when there is dropout,
  fused32   the same kernel on q, k, v cast to fp32 (what a CPU ran in bf16 without dropout before 2026-12-04),

at each shape and dropout asked for, fp32 or (--bf16) in bf16 autocast, eager or (--compile) `torch.compile`d.
The variants run interleaved, round by round; each reports its median round, and "vs kernel" is the kernel's
speed over the variant's (above 1: the kernel is faster).

    python bench/attention_paths.py                                  # default and small, dropout 0, 0.05, 0.2
    python bench/attention_paths.py --shapes default --dropouts 0.2 --rounds 15
    python bench/attention_paths.py --shapes gpu --dropouts 0 --bf16 --compile --steps 1 --rounds 5
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_speed  # noqa: E402  (bench/train_speed.py: the shapes, the step and its timing)
from model.speed.kernels import causal_fused  # noqa: E402  (train_speed put the repository on the path)


def textbook(q, k, v, dropout_p, attend):
    return attend(q, k, v)[0]


def fused_in_fp32(q, k, v, dropout_p, attend):
    with torch.autocast("cpu", enabled=False):  # autocast would cast the fp32 inputs back to bf16
        return causal_fused(q.float(), k.float(), v.float(), dropout_p, attend).to(q.dtype)


# None: the layer keeps the kernel it chose
PATHS = {"kernel": None, "textbook": textbook, "fused": causal_fused, "fused32": fused_in_fp32}


def train_step(shape, path, bf16: bool, compile_model: bool):
    """One train step of our model at `shape` whose every attention layer runs `path`."""
    model = train_speed.build_project_model(shape)
    for block in model.blocks:
        block.attn.kernel = PATHS[path] or block.attn.kernel
    return train_speed.make_train_step(model, train_speed.project_optimizer(model), shape, bf16, compile_model)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="default,small", help="comma-separated subset of: "
                        + ", ".join(train_speed.SHAPES))
    parser.add_argument("--dropouts", default="0,0.05,0.2", help="comma-separated dropout probabilities")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per variant and round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds; each variant reports its median")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast, as train.py on a CPU with native bf16")
    parser.add_argument("--compile", action="store_true", help="torch.compile each variant")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.shapes.split(",")]
    if not set(names) <= set(train_speed.SHAPES):
        print(f"error: unknown shape in --shapes {args.shapes}; choose from {', '.join(train_speed.SHAPES)}",
              file=sys.stderr)
        sys.exit(2)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, "
          f"{'bf16 autocast' if args.bf16 else 'fp32'}, {'compiled' if args.compile else 'eager'}")
    print(f"\n{'shape':8} {'dropout':>7} {'path':9} {'ms/step':>8} {'vs kernel':>9}")
    for name in names:
        shape = train_speed.SHAPES[name]
        for dropout in (float(p) for p in args.dropouts.split(",")):
            train_speed.DROPOUT["p"] = dropout
            steps = [train_step(shape, path, args.bf16, args.compile) for path in PATHS]
            _, seconds = train_speed.time_variants(steps, args.warmup, args.steps, args.rounds)
            for path, s in zip(PATHS, seconds):
                print(f"{name:8} {dropout:7.2f} {path:9} {s * 1e3:8.1f} {s / seconds[0]:8.2f}x", flush=True)


if __name__ == "__main__":
    main()
