"""The attention page at long inputs: its size and how long headless Chromium takes to load and draw it.

    python bench/page_speed.py                       # 128, 512 and 1,024 tokens, a random 4-layer, 4-head model
    python bench/page_speed.py --tokens 1024 --layers 0 --repeat 5
    python bench/page_speed.py --snapshots 8 --n-layer 4 --n-head 6 --n-embd 192 --tokens 32,128   # --over-training

Random weights (n_embd 64, block 1024, seed 0) over random Hangul tokens: the page's cost depends on
the shape, not on what the model learned. Each page holds every weight of the chosen layers and the
walkthrough's tensors (explain.npz's q, k, v, y), as `generate.py --attention` writes it; with --snapshots N,
N such frames of N models (seeds 0..N-1), as `generate.py --over-training` writes them. "ready" is
the page's own clock when its script has drawn the first view (all heads of the first layer: their
heatmaps on canvases, their token strips), read from `data-ready-ms` in the dumped DOM; "wall" is the
whole Chromium run, start-up included. The figures are medians of --repeat runs, sizes taken in turn.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from inspection.html import frame, frames_page  # noqa: E402
from inspection.views import Look, Settings, maps, walkthrough  # noqa: E402
from inspection.trace import trace_ids  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402


def load_in_chromium(chromium: str, page: Path, profile: Path) -> tuple[float, float]:
    """(the page's ready time in ms, Chromium's wall seconds) for one headless load."""
    start = time.perf_counter()
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--window-size=1200,900", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=600).stdout
    wall = time.perf_counter() - start
    ready = re.search(r'data-ready-ms="(\d+)"', dom)
    if ready is None or 'id="errors"></pre>' not in dom:
        raise SystemExit(f"{page} did not load cleanly in Chromium")
    return float(ready.group(1)), wall


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", default="128,512,1024", help="comma list of token counts (at most 1024)")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--layers", help="comma list of the layers the page keeps (default: all)")
    p.add_argument("--repeat", type=int, default=3, help="loads per size; the median is printed")
    p.add_argument("--threads", type=int, default=1, help="torch threads for the forward pass")
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--snapshots", type=int, default=1, help="frames on the page, one model each (a slider over them)")
    args = p.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    torch.set_num_threads(args.threads)
    config = GPTConfig(vocab_size=2048, block_size=1024, n_layer=args.n_layer, n_head=args.n_head, n_embd=args.n_embd)
    models = []
    for seed in range(args.snapshots):
        torch.manual_seed(seed)
        models.append(GPT(config).eval())
    layers = [int(x) for x in args.layers.split(",")] if args.layers else list(range(args.n_layer))
    sizes = [int(t) for t in args.tokens.split(",")]
    ids = torch.randint(0, 2048, (max(sizes),), generator=torch.Generator().manual_seed(0)).tolist()
    labels = [chr(0xAC00 + i) for i in ids]  # a Hangul syllable per token
    print(f"{args.n_layer} layers x {args.n_head} heads, n_embd {args.n_embd}, {args.snapshots} snapshot(s), layers on "
          f"the page: {layers}; {chromium}, median of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        pages = {}
        for T in sizes:
            frames = []
            for step, model in enumerate(models):
                trace = trace_ids(model, ids[:T])
                look = Look(None, ids[:T], labels[:T], trace, trace.att, None, T - 1, str)
                records = {"maps": {"att": trace.att, "stats": maps.head_stats(trace.att), "off": trace.off.tolist()},
                           "walkthrough": walkthrough.record(look, Settings(layers=layers))}
                frames.append(frame(records, layers, step if len(models) > 1 else None))
            pages[T] = Path(tmp) / f"page_{T}.html"
            pages[T].write_text(frames_page(frames, labels[:T], f"{T} tokens", layers), encoding="utf-8")
        times = {T: [] for T in sizes}
        for r in range(args.repeat):
            for T in sizes:  # in turn, so a burst of load on the machine hits every size alike
                times[T].append(load_in_chromium(chromium, pages[T], Path(tmp) / f"profile{r}"))
        print(f"{'tokens':>6} {'page MB':>8} {'ready ms':>9} {'wall s':>7}")
        for T in sizes:
            ready = statistics.median(t[0] for t in times[T])
            wall = statistics.median(t[1] for t in times[T])
            print(f"{T:>6} {pages[T].stat().st_size / 1e6:>8.1f} {ready:>9.0f} {wall:>7.2f}")


if __name__ == "__main__":
    main()
