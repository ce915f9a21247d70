"""CPU fine-tuning speed at KoGPT2's shape: our training step against transformers' GPT2LMHeadModel.

A step is what train.py does per batch: forward with the loss, backward, gradient clipping and an AdamW
update (no decay on biases and LayerNorms), on a fixed random batch. Four variants: ours and
GPT2LMHeadModel (SDPA attention, its default), each in fp32 and in bf16 autocast, both models with
KoGPT2's settings (gelu_new, biases, tied head) and the same dropout.

Each variant lives in its own worker process, so its peak memory is that process's RSS high-water mark
(`resource.getrusage`), reported with the RSS before the model was built. The workers are driven
one at a time, round by round in turn (never two at once), and each reports the median of its rounds,
so a busy spell on shared cores falls on every variant alike. All four stay alive for the whole run:
at the 124M shape that is about 4 x 3-4 GB of memory (`--variants` runs fewer).

    python bench/finetune_speed.py                        # 124M: 12 x 12 x 768, vocab 51,200, T 256, batch 4
    python bench/finetune_speed.py --shape tiny --rounds 2 --steps 1    # a seconds-long check of the script
    python bench/finetune_speed.py --variants ours-fp32,hf-fp32 --threads 2
"""

import argparse
import contextlib
import multiprocessing as mp
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name: (n_layer, n_head, n_embd, vocab_size, T, batch)
SHAPES = {"124M": (12, 12, 768, 51_200, 256, 4), "tiny": (2, 2, 64, 512, 32, 2)}
VARIANTS = ("ours-fp32", "hf-fp32", "ours-bf16", "hf-bf16")


def build(who: str, shape: tuple, dropout: float) -> torch.nn.Module:
    """The model, callable as `model(x, y) -> (logits, loss)` for both kinds (ours also with `loss_only`)."""
    n_layer, n_head, n_embd, vocab_size, T, _ = shape
    if who == "ours":
        from model import GPT, GPTConfig
        from model.speed import speed_up

        return speed_up(GPT(GPTConfig(vocab_size=vocab_size, block_size=T, n_layer=n_layer, n_head=n_head,
                                      n_embd=n_embd, dropout=dropout, activation="gelu_new")))  # as train.py runs it
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=vocab_size, n_positions=T, n_layer=n_layer, n_head=n_head, n_embd=n_embd,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                        activation_function="gelu_new", bos_token_id=0, eos_token_id=0)  # fmt: skip
    return HFAdapter(GPT2LMHeadModel(config))


class HFAdapter(torch.nn.Module):
    """transformers' model with our calling convention and the same loss over every position."""

    def __init__(self, hf_model):
        super().__init__()
        self.hf_model = hf_model

    def forward(self, idx, targets):
        logits = self.hf_model(input_ids=idx).logits  # (B, T, V)
        return logits, torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten())


def rss_mb(which=resource.RUSAGE_SELF) -> float:
    return resource.getrusage(which).ru_maxrss / 1024  # kilobytes on Linux


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def worker(conn, variant: str, shape: tuple, dropout: float, threads: int) -> None:
    """Build one variant, then run `steps` train steps whenever the parent asks, returning seconds per step."""
    if threads:
        torch.set_num_threads(threads)
    who, precision = variant.split("-")
    # both kinds load the same code before the baseline, so "over start" counts only the model and its step
    import model  # noqa: F401
    import transformers.models.gpt2.modeling_gpt2  # noqa: F401
    torch.manual_seed(0)
    before = current_rss_mb()
    model = build(who, shape, dropout).train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr=1e-4)  # fmt: skip
    *_, vocab_size, T, B = shape
    idx = torch.randint(vocab_size, (B, T + 1))
    x, y = idx[:, :-1], idx[:, 1:]  # (B, T) each
    options = {"loss_only": True} if who == "ours" else {}  # ours as train.py calls it: the loss alone
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()

    def step():
        with autocast:
            _, loss = model(x, y, **options)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    conn.send(("ready", before))
    while (steps := conn.recv()) is not None:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        conn.send((time.perf_counter() - start) / steps)
    conn.send(rss_mb())
    conn.close()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="124M", help="124M, tiny, or L,H,C,V,T,B (layers, heads, width, "
                        "vocabulary, context, batch)")  # fmt: skip
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="a comma-separated subset of " + ", ".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each variant reports its median round")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per variant and round")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per variant first")
    parser.add_argument("--dropout", type=float, default=0.1, help="both models (KoGPT2 was trained with 0.1)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads per worker (0: torch's default)")
    args = parser.parse_args(argv)
    try:
        args.shape = SHAPES[args.shape] if args.shape in SHAPES else tuple(int(v) for v in args.shape.split(","))
        assert len(args.shape) == 6
    except (ValueError, AssertionError):
        parser.error(f"--shape {args.shape!r}: give 124M, tiny or six integers L,H,C,V,T,B")
    args.variants = [v.strip() for v in args.variants.split(",")]
    if not set(args.variants) <= set(VARIANTS):
        parser.error(f"--variants: choose from {', '.join(VARIANTS)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    n_layer, n_head, n_embd, vocab_size, T, B = args.shape
    ctx = mp.get_context("spawn")  # a fresh interpreter per variant: its RSS high-water mark is its own
    workers = {}
    for variant in args.variants:
        parent, child = ctx.Pipe()
        process = ctx.Process(target=worker, args=(child, variant, args.shape, args.dropout, args.threads))
        process.start()
        workers[variant] = (process, parent)
    baseline = {v: conn.recv()[1] for v, (_, conn) in workers.items()}
    print(f"torch {torch.__version__}, {args.threads or torch.get_num_threads()} threads per worker, CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, native bf16: {torch.ops.mkldnn._is_mkldnn_bf16_supported()}")
    print(f"shape: {n_layer} layers x {n_head} heads x {n_embd}, vocabulary {vocab_size:,}, T {T}, batch {B}; "
          f"dropout {args.dropout}; {args.rounds} rounds of {args.steps} steps after {args.warmup} warm-up")
    for _, conn in workers.values():  # warm-up, one variant at a time
        conn.send(args.warmup)
        conn.recv()
    times = {v: [] for v in workers}
    for _ in range(args.rounds):
        for variant, (_, conn) in workers.items():
            conn.send(args.steps)
            times[variant].append(conn.recv())
    peaks = {}
    for variant, (process, conn) in workers.items():
        conn.send(None)
        peaks[variant] = conn.recv()
        process.join()

    print(f"\n{'variant':10} {'tok/s':>9} {'s/step':>8} {'min..max s':>14} {'peak RSS MB':>12} {'over start MB':>14}")
    for variant in workers:
        median = statistics.median(times[variant])
        spread = f"{min(times[variant]):6.3f}..{max(times[variant]):<7.3f}"
        print(f"{variant:10} {B * T / median:9.0f} {median:8.3f} {spread} {peaks[variant]:12.0f} "
              f"{peaks[variant] - baseline[variant]:14.0f}")
    for precision in ("fp32", "bf16"):
        if f"ours-{precision}" in times and f"hf-{precision}" in times:
            ratio = statistics.median(times[f"hf-{precision}"]) / statistics.median(times[f"ours-{precision}"])
            print(f"{precision}: ours is {ratio:.2f}x transformers' speed")


if __name__ == "__main__":
    main()
