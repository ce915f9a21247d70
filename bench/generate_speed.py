"""Decoding speed: our generate with and without the KV cache, next to transformers' GPT-2.

    python bench/generate_speed.py            # the whole grid (the uncached 1000-token runs take many minutes)
    python bench/generate_speed.py --quick    # batch 1; uncached only at 240 tokens
    python bench/generate_speed.py --shapes small --batch 1 --new 1000 --modes ours,hf --repeat 3
    python bench/generate_speed.py --device cuda --dtype bf16 --shapes gpt2 --vocab 50257 --new 1000 --modes ours,hf
    python bench/generate_speed.py --plot docs/decode_time.png --shapes tiny --new 1000 --repeat 1 --threads 1
    python bench/generate_speed.py --shapes default --vocab 2048 --batch 1 --new 1000 --modes ours,ours-modules --repeat 5
    python bench/generate_speed.py --shapes small --batch 1 --new 1000 --modes ours,ours-bf16,ours-int8,hf,hf-bf16 --repeat 3

Random weights, fp32 (or --dtype bf16 for every model), greedy, a 16-token prompt, vocabulary 8192
(--vocab; 50257 makes `gpt2` GPT-2 small's 124M), block 1024 (`default` is configs/small.toml's [model]
table, block 128 included, so 1000 tokens slide its window). tok/s counts every generated token of the
batch (B x new tokens / wall seconds). Each figure is the median of --repeat runs, the modes taking turns
(the best is printed too): CPU seconds well below the wall seconds mean other processes had the cores (on
a busy 2-core machine, --threads 1 gives steadier figures). `ours-modules` is the cached decoding without
model/speed/fast_gpt.py's module-free step: `--modes ours,ours-modules` is the benchmark that keeps that step.
`ours-bf16` and `ours-int8` store the cached step's weights in that format (generate.py --weights); the
ratio that compares like with like is ours-bf16 against `hf-bf16`, transformers' model in bf16. At batch 1 a
step reads every weight once, so each line also gives the weights' bytes read per second against the
memory's read rate (a 256 MB sum), the peak a batch-1 CPU decoder can approach. GPT2LMHeadModel.generate
(its own cache, do_sample=False) is timed when transformers is installed. Issue 3's targets: cached
>= 20x uncached at 1000 tokens, and >= 2.5x transformers' cached tok/s. Time transformers in a run of
its own (--modes ours,hf): after the long uncached runs in the same process its figures drop by half.
On --device cuda each timed run ends with a synchronize; --json prints one JSON object per figure.

--plot FILE.png times every step of one greedy generation (the first shape, batch 1, the largest --new)
with and without the KV cache and draws the time per token against its position, and the total time:
with the cache each step attends over the cached keys (cost grows linearly with the position, and is
small), without it each step recomputes the whole context (linear per token, so quadratic in total).
"""

import argparse
import copy
import json
import os
import statistics
import sys
import time
import tomllib

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from model import GPT, GPTConfig  # noqa: E402
from model.sampling import generate, stream  # noqa: E402
from model.speed import speed_up  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "configs", "small.toml"), "rb") as f:
    DEFAULT = {k: v for k, v in tomllib.load(f)["model"].items() if k in ("block_size", "n_layer", "n_head", "n_embd")}
SHAPES = {
    "default": DEFAULT,  # configs/small.toml: 4 layers, 6 heads, 192 wide, block 128
    "tiny": {"n_layer": 4, "n_head": 4, "n_embd": 128},
    "small": {"n_layer": 6, "n_head": 6, "n_embd": 384},
    "gpt2": {"n_layer": 12, "n_head": 12, "n_embd": 768},  # GPT-2 small: 124M parameters at --vocab 50257
}
BLOCK, PROMPT = 1024, 16
MODES = ("ours", "ours-nocache", "ours-modules", "ours-textbook", "ours-bf16", "ours-int8", "hf", "hf-nocache",
         "hf-bf16")
# ours: with the speed layer, as generate.py decodes; ours-modules: cached, the speed layer's modules without its
# DecodeStep; ours-textbook: cached, without the speed layer (generate.py --no-speed-up); ours-bf16/-int8: the
# cached step's weights in that format (generate.py --weights); hf-bf16: a bf16 copy of transformers' model.
FORMAT = {"ours-bf16": "bf16", "ours-int8": "int8", "hf-bf16": "bf16"}  # the modes whose weights are not --dtype
ITEMSIZE = {"fp32": 4, "bf16": 2, "int8": 1}
PAIRS = (  # (ours, theirs, what the pair compares) for the ratios
    ("ours", "ours-nocache", "fp32, cache vs none"), ("ours", "ours-modules", "fp32, step vs modules"),
    ("ours", "ours-textbook", "fp32, speed layer on vs off"),
    ("ours", "hf", "fp32 weights both"), ("ours", "hf-nocache", "fp32, theirs uncached"),
    ("ours-bf16", "hf-bf16", "bf16 weights both"), ("ours-bf16", "ours", "bf16 vs fp32 weights, ours"),
    ("ours-int8", "ours-bf16", "int8 vs bf16 weights, ours"),
    ("ours-int8", "hf-bf16", "int8 vs bf16 weights: not the same precision"),
)


def sizes(shape) -> tuple[int, dict]:
    """(block_size, the other sizes) of a shape."""
    found = dict(SHAPES[shape])
    return found.pop("block_size", BLOCK), found


def make_hf(shape, vocab):
    """transformers' GPT-2 at the same shape, or None when transformers is not installed."""
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
    except ImportError:
        return None
    block, others = sizes(shape)
    config = GPT2Config(
        vocab_size=vocab,
        n_positions=block,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=None,
        eos_token_id=None,
        **others,
    )
    return GPT2LMHeadModel(config).eval()


def decode(mode, model, idx, new):
    """Generate `new` tokens greedily; return (wall seconds, CPU seconds of this process)."""
    sync(idx.device)
    start, cpu_start = time.perf_counter(), time.process_time()
    if mode == "ours-modules":
        model.__class__ = GPT  # this instance decodes with its (sped-up) modules, without the module-free step
        try:
            out = generate(model, idx, new, temperature=0)
        finally:
            speed_up(model)
    elif mode in ("ours-bf16", "ours-int8"):
        try:
            out = generate(speed_up(model, FORMAT[mode]), idx, new, temperature=0)
        finally:
            speed_up(model)  # fp32 again
    elif mode.startswith("ours"):
        out = generate(model, idx, new, temperature=0, use_cache=(mode == "ours"))
    else:
        out = model.generate(
            idx, attention_mask=torch.ones_like(idx), max_new_tokens=new, min_new_tokens=new,
            do_sample=False, use_cache=(mode != "hf-nocache"), pad_token_id=0,
        )  # fmt: skip
    sync(idx.device)  # CUDA runs ahead of the host: the tokens exist only once the queue is drained
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    assert out.shape == (idx.size(0), idx.size(1) + new), out.shape
    return seconds, cpu_seconds


def model_of(mode) -> str:
    """The key in `models` of the model a mode runs."""
    return mode if mode in ("hf-bf16", "ours-textbook") else mode.split("-")[0]


def matrix_params(model) -> int:
    """Parameters of the matrices a cached step reads and a training step multiplies by (the tied head once; not
    the position table, which is only looked up)."""
    return sum(p.numel() for name, p in model.named_parameters() if p.dim() == 2 and "pos_emb" not in name)


def weight_bytes(model, weights: str) -> int:
    """Bytes of the matrices one cached batch-1 step reads (the tied head once), stored as `weights`."""
    return matrix_params(model) * ITEMSIZE[weights]


def read_bandwidth(repeat=7) -> float:
    """Bytes per second this machine reads from memory: the median time to sum 256 MB of floats."""
    data = torch.ones(64 * 2**20)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        data.sum()
        times.append(time.perf_counter() - start)
    return data.numel() * 4 / statistics.median(times)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def skipped(args, mode, batch, new):
    """--quick: batch 1 only, and the slow uncached runs only at the shortest length."""
    return args.quick and (batch != 1 or (mode.endswith("nocache") and new != min(args.new)))


def time_modes(models, modes, idx, new, repeat):
    """Every run's (wall, cpu) seconds per mode; the modes take turns, so a burst of load hits them alike."""
    runs = {mode: [] for mode in modes}
    for _ in range(repeat):
        for mode in modes:
            model = models[model_of(mode)]
            decode(mode, model, idx, 8)  # warm-up
            runs[mode].append(decode(mode, model, idx, new))
    return runs


def step_times(model, idx, new, use_cache) -> list[float]:
    """Seconds of each step of one greedy generation: step 0 includes the prefill."""
    times, last = [], time.perf_counter()
    for _ in stream(model, idx, new, temperature=0, use_cache=use_cache):
        now = time.perf_counter()
        times.append(now - last)
        last = now
    return times


def plot_step_times(path, shape, new, repeat, vocab):
    """Time per token against position, cached and not (medians over repeat alternating runs), as a PNG."""
    import statistics

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    torch.manual_seed(0)
    block, others = sizes(shape)
    model = speed_up(GPT(GPTConfig(vocab_size=vocab, block_size=block, **others)).eval())
    idx = torch.randint(0, vocab, (1, PROMPT))
    runs = {True: [], False: []}
    for _ in range(repeat):
        for use_cache in (True, False):
            step_times(model, idx, 8, use_cache)  # warm-up
            runs[use_cache].append(step_times(model, idx, new, use_cache))
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    per_token, total = fig.subplots(1, 2)
    positions = list(range(PROMPT, PROMPT + new))
    for use_cache, name in ((True, "KV cache"), (False, "no cache: whole context each step")):
        ms = [1000 * statistics.median(r[i] for r in runs[use_cache]) for i in range(new)]
        per_token.plot(positions[1:], ms[1:], lw=0.8, label=name)  # step 0 is the prefill
        cumulative = [sum(ms[: i + 1]) / 1000 for i in range(new)]
        total.plot(range(1, new + 1), cumulative, label=name)
        print(f"{name:34s} ms per token at position {PROMPT + 1}: {ms[1]:.2f}, at {PROMPT + new - 1}: "
              f"{statistics.median(ms[-20:]):.2f} (median of the last 20); total {cumulative[-1]:.2f} s")
    per_token.set(xlabel="position of the token", ylabel="ms per generated token", title="one step")
    total.set(xlabel="tokens generated", ylabel="seconds", title="the whole generation")
    per_token.legend(fontsize=8)
    total.legend(fontsize=8)
    fig.suptitle(f"{shape} model ({SHAPES[shape]['n_layer']} layers, n_embd {SHAPES[shape]['n_embd']}), batch 1, "
                 f"fp32, {torch.get_num_threads()} thread(s)", fontsize=10)
    fig.savefig(path, dpi=80)
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="tiny,small", help="comma list of: " + ", ".join(SHAPES))
    p.add_argument("--batch", default="1,8", help="comma list of batch sizes")
    p.add_argument("--new", default="240,1000", help="comma list of new-token counts")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of: " + ", ".join(MODES))
    p.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is kept")
    p.add_argument("--quick", action="store_true", help="batch 1 only; uncached only at the shortest length")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="weights of every model (default fp32)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size of every model")
    p.add_argument("--json", action="store_true", help="one JSON object per figure instead of the table")
    p.add_argument("--plot", metavar="FILE.png", help="draw the time per token against position instead")
    args = p.parse_args(argv)
    args.new = [int(n) for n in args.new.split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    device = torch.device(args.device)
    bandwidth = read_bandwidth()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.device} {args.dtype} greedy, "
          f"prompt {PROMPT}, block {BLOCK} (default: {DEFAULT['block_size']}), vocab {args.vocab}, medians of {args.repeat}; "
          f"memory read {bandwidth / 1e9:.1f} GB/s (a 256 MB sum)")
    if args.plot:
        return plot_step_times(args.plot, args.shapes.split(",")[0], max(args.new), args.repeat, args.vocab)

    rates = {}  # (shape, batch, new, mode) -> generated tokens per second
    for shape in args.shapes.split(","):
        torch.manual_seed(0)
        block, others = sizes(shape)
        textbook = GPT(GPTConfig(vocab_size=args.vocab, block_size=block, **others)).eval().to(device, dtype)
        models = {"ours": speed_up(copy.deepcopy(textbook)), "ours-textbook": textbook}  # the same weights
        models["hf"] = make_hf(shape, args.vocab)
        models = {name: m if m is None else m.to(device, dtype) for name, m in models.items()}
        if models["hf"] is not None and "hf-bf16" in args.modes.split(","):
            models["hf-bf16"] = make_hf(shape, args.vocab).to(device, torch.bfloat16)
        for batch in (int(b) for b in args.batch.split(",")):
            idx = torch.randint(0, args.vocab, (batch, PROMPT)).to(device)
            for new in args.new:
                modes = [m for m in args.modes.split(",") if models.get(model_of(m)) is not None]
                modes = [m for m in modes if not skipped(args, m, batch, new)]
                for mode, runs in time_modes(models, modes, idx, new, args.repeat).items():
                    seconds, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
                    rates[shape, batch, new, mode] = rate = batch * new / seconds
                    best = batch * new / min(w for w, _ in runs)
                    weights = FORMAT.get(mode, args.dtype)
                    weights_gb_s = weight_bytes(models[model_of(mode)], weights) * rate / batch / 1e9  # per step
                    if args.json:
                        figure = {"shape": shape, "batch": batch, "new": new, "mode": mode, "tok_s": round(rate, 1),
                                  "best_tok_s": round(best, 1), "runs": len(runs), "seconds": round(seconds, 3),
                                  "threads": torch.get_num_threads(), "device": args.device, "dtype": args.dtype,
                                  "weights": weights,
                                  "vocab": args.vocab, "block": block, "weights_gb_s": round(weights_gb_s, 2),
                                  "read_gb_s": round(bandwidth / 1e9, 2), **others}  # fmt: skip
                        print(json.dumps(figure), flush=True)
                        continue
                    line = f"{shape:7s} B={batch} new={new:4d} {mode:13s} {rate:9.1f} tok/s (best {best:.1f}) {seconds:8.2f} s"
                    share = f"weights read at {weights_gb_s:5.1f} GB/s ({weights_gb_s * 1e9 / bandwidth:4.0%} of memory's)"
                    print(f"{line}  (cpu {cpu:.2f} s)  {share}", flush=True)

    print("\nratios")
    for shape, batch, new in dict.fromkeys(key[:3] for key in rates):
        for ours, theirs, what in PAIRS:
            if (shape, batch, new, ours) in rates and (shape, batch, new, theirs) in rates:
                ratio = rates[shape, batch, new, ours] / rates[shape, batch, new, theirs]
                print(f"{shape:7s} B={batch} new={new:4d}  {ours:10s} / {theirs:13s} {ratio:5.2f}x  ({what})")


if __name__ == "__main__":
    main()
