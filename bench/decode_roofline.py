"""Batch-1 decoding against this machine's memory: each mode's tokens/s beside its roofline, and where a step's time goes.

    python bench/decode_roofline.py                        # 6 x 384, block 1024, 500 new tokens, 2 threads
    python bench/decode_roofline.py --shape default --new 100 --repeat 5 --record

At batch 1 a decoded token reads every weight once (two FLOPs per weight read) and the KV cache of the
tokens before it, so the step's floor is bytes per token / bytes per second. Two read rates bound it:
- memory: a sum over GB_READ of floats, far past every cache (this CPU's last level holds hundreds of MB);
- cache: a sum over a buffer the size of the model's fp32 matrices, read again and again. A small model's
  weights stay in the last-level cache between two tokens, so this is the rate a decoding step can reach.
Per mode: tok/s (median of --repeat runs, the modes taking turns), the bytes a token reads (the matrices in
their stored format, the tied head once, plus the KV cache at the mean position, fp32), and the share of
each roofline. Then torch.profiler's self time per operator group for `--profile-tokens` tokens of `ours` and
of `ours-bf16`, and the step's time the operators do not account for (Python and dispatch).

Modes: ours (fp32, generate.py's default), ours-bf16, ours-int8 (generate.py --weights), hf (transformers'
GPT2LMHeadModel.generate with its cache, fp32), hf-bf16 (its bf16 copy). Random weights, greedy.
"""

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.generate_speed import (FORMAT, ITEMSIZE, PROMPT, SHAPES, decode, make_hf, matrix_params,  # noqa: E402
                                  model_of, sizes)
from bench.record import append_result  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from model.sampling import generate  # noqa: E402
from model.speed import speed_up  # noqa: E402

GB_READ = 2 * 2**30  # bytes summed for the memory rate: four times the 480 MB last-level cache of this machine
MODES = ("ours", "ours-bf16", "ours-int8", "hf", "hf-bf16")
MATVEC = ("addmv", "addmv_", "mv", "addmm", "mm", "linear", "matmul", "_weight_int8pack_mm")
VIEWS = ("empty", "empty_strided", "select", "as_strided", "transpose", "slice", "narrow", "view", "unsqueeze", "t",
         "expand", "unbind", "reshape", "alias", "detach", "stack", "squeeze", "resize_", "_unsafe_view")
GROUPS = {  # operator name (aten::...) -> the group the profile prints it under
    **dict.fromkeys(MATVEC, "matrix-vector products"), **dict.fromkeys(VIEWS, "views and allocations"),
    "scaled_dot_product_attention": "attention", "_scaled_dot_product_flash_attention_for_cpu": "attention",
    "layer_norm": "LayerNorm", "native_layer_norm": "LayerNorm", "gelu": "GELU", "add_": "residual and bias adds",
    "add": "residual and bias adds", "copy_": "casts and copies (the KV cache's writes too)",
    "to": "casts and copies (the KV cache's writes too)", "_to_copy": "casts and copies (the KV cache's writes too)",
    "embedding": "embedding", "index_select": "embedding", "argmax": "sampling", "max": "sampling",
    "cat": "sampling", "fill_": "the cache's allocation (once)", "zeros": "the cache's allocation (once)",
    "zero_": "the cache's allocation (once)",
}  # fmt: skip


def read_rate(nbytes: int, repeat: int) -> float:
    """Bytes per second of a sum over `nbytes` of floats (median of `repeat`, after one warm-up read)."""
    data = torch.ones(nbytes // 4)
    data.sum()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        data.sum()
        times.append(time.perf_counter() - start)
    return nbytes / statistics.median(times)


def token_bytes(params: int, weights: str, config, new: int) -> tuple[int, int]:
    """(bytes of the matrices in `weights`' format, bytes of the KV cache at the mean position) a token reads."""
    positions = PROMPT + new / 2
    kv = 2 * config.n_layer * positions * config.n_embd * 4  # k and v, every layer, fp32
    return params * ITEMSIZE[weights], int(kv)


def profile(model, idx, tokens: int, weights: str) -> dict:
    """ms per token by operator group (self CPU time), and the step's time no operator accounts for."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    if weights != "fp32":
        speed_up(model, weights)  # restored to fp32 below
    generate(model, idx, 8, temperature=0)  # warm-up
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        generate(model, idx, tokens, temperature=0)
        wall = time.perf_counter() - start
    speed_up(model)
    groups = defaultdict(float)
    for event in prof.key_averages():
        name = event.key.removeprefix("aten::")
        groups[GROUPS.get(name, "other operators")] += event.self_cpu_time_total / 1000  # µs -> ms
    ms = {group: round(total / tokens, 4) for group, total in sorted(groups.items(), key=lambda kv: -kv[1])}
    ms["step (wall, under the profiler)"] = round(1000 * wall / tokens, 4)
    ms["outside the operators"] = round(1000 * wall / tokens - sum(groups.values()) / tokens, 4)
    return ms


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="small", choices=list(SHAPES), help="small: 6 x 384 (the issue's shape)")
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--new", type=int, default=500)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--profile-tokens", type=int, default=100, help="0: no profile")
    p.add_argument("--record", action="store_true", help="append to bench/results/decode_roofline.jsonl")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    block, others = sizes(args.shape)
    config = GPTConfig(vocab_size=args.vocab, block_size=block, **others)
    textbook = GPT(config).eval()
    models = {"ours": speed_up(textbook), "hf": make_hf(args.shape, args.vocab)}
    if models["hf"] is not None:
        models["hf-bf16"] = make_hf(args.shape, args.vocab).to(torch.bfloat16)
    params = matrix_params(textbook)
    memory, cache = read_rate(GB_READ, 5), read_rate(params * 4, 20)
    bf16 = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    print(f"{args.shape} ({others}), vocab {args.vocab}, block {block}, batch 1, {PROMPT}+{args.new} tokens, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}, native bf16: {bf16}")
    print(f"read rates: memory {memory / 1e9:.1f} GB/s (a {GB_READ / 2**30:.0f} GB sum), "
          f"cache {cache / 1e9:.1f} GB/s (a {params * 4 / 2**20:.0f} MB sum, the fp32 matrices' size, read again)")
    idx = torch.randint(0, args.vocab, (1, PROMPT))
    modes = [m for m in args.modes.split(",") if models.get(model_of(m)) is not None]
    runs = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode in modes:  # taking turns: a burst of load hits every mode alike
            decode(mode, models[model_of(mode)], idx, 8)
            runs[mode].append(decode(mode, models[model_of(mode)], idx, args.new)[0])
    rows = []
    print(f"\n{'mode':10s} {'tok/s':>8s} {'MB/token':>9s} {'memory roofline':>16s} {'cache roofline':>15s}")
    for mode in modes:
        rate = args.new / statistics.median(runs[mode])
        weights = FORMAT.get(mode, "fp32")
        w, kv = token_bytes(params, weights, config, args.new)
        row = {"mode": mode, "tok_s": round(rate, 1), "mb_per_token": round((w + kv) / 1e6, 2),
               "memory_roofline_tok_s": round(memory / (w + kv), 1), "cache_roofline_tok_s": round(cache / (w + kv), 1)}
        row["of_memory"], row["of_cache"] = round(rate / row["memory_roofline_tok_s"], 3), round(
            rate / row["cache_roofline_tok_s"], 3)
        rows.append(row)
        print(f"{mode:10s} {rate:8.1f} {row['mb_per_token']:9.2f} {row['memory_roofline_tok_s']:8.1f} ({row['of_memory']:4.0%})"
              f" {row['cache_roofline_tok_s']:8.1f} ({row['of_cache']:4.0%})")
    rates = {row["mode"]: row["tok_s"] for row in rows}
    for ours, theirs in (("ours", "hf"), ("ours-bf16", "hf-bf16"), ("ours-int8", "hf-bf16")):
        if ours in rates and theirs in rates:
            print(f"{ours} / {theirs}: {rates[ours] / rates[theirs]:.2f}x")
    profiles = {}
    if args.profile_tokens:
        for mode in ("ours", "ours-bf16"):
            profiles[mode] = profile(models["ours"], idx, args.profile_tokens, FORMAT.get(mode, "fp32"))
            print(f"\nprofile of {mode}, ms per token:")
            for group, ms in profiles[mode].items():
                print(f"  {group:34s} {ms:7.3f}")
    if args.record:
        append_result("decode_roofline", {"shape": args.shape, "vocab": args.vocab, "new": args.new,
                                          "threads": args.threads, "repeat": args.repeat,
                                          "memory_gb_s": round(memory / 1e9, 2), "cache_gb_s": round(cache / 1e9, 2),
                                          "rows": rows, "profiles": profiles})  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
