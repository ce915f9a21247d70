"""The live inspector's latency: from a keystroke to the redrawn maps, split into model and drawing.

    python bench/live_speed.py                          # the most recent run under runs/, a text of 128 tokens
    python bench/live_speed.py --ckpt runs/small --tokens 64,128 --keystrokes 15

A LiveServer (inspection/live_server.py) runs in this process; headless Chromium opens its page (driven over the
DevTools protocol by tests/conftest.py's Browser), and for each keystroke the page records, in its own
clock: the time from the keystroke to the drawn view ("total"), the server's time in the model
("model": the forward with its maps, the traced tensors of the walkthrough, the roles' frame, the next
token), the request and its JSON ("fetch", which holds "model"), and the drawing ("draw": the page taking
in the view and redrawing). The page asks DEBOUNCE_MS after the last keystroke, so "total" holds that
wait too. Each keystroke types (or, every other one, deletes) the last character of a text of about N tokens; medians over
--keystrokes, after one to warm up.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from data.sources import builtin_files  # noqa: E402
from inference.runs import load_run  # noqa: E402
from inspection.live import DEBOUNCE_MS  # noqa: E402
from inspection.live_server import LiveServer  # noqa: E402
from tests.conftest import CHROMIUM, Browser  # noqa: E402


def text_of(run, tokens: int) -> str:
    """The longest start of the built-in corpus that is at most `tokens` tokens with <|endoftext|>."""
    corpus = builtin_files()[0].read_text(encoding="utf-8")[: 20 * tokens]
    lo, hi = 1, len(corpus)
    while lo < hi:  # the most characters that fit
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(run.encode(corpus[:mid])) + 1 <= tokens else (lo, mid - 1)
    return corpus[:lo]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ckpt", help="run or checkpoint dir (default: the most recent run under runs/)")
    p.add_argument("--tokens", default="128", help="comma list: text lengths in tokens, <|endoftext|> included (at most block_size)")
    p.add_argument("--keystrokes", type=int, default=10)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = p.parse_args(argv)
    if CHROMIUM is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    if args.threads:
        torch.set_num_threads(args.threads)
    run = load_run(args.ckpt, device="cpu")
    server = LiveServer(run, "127.0.0.1", 0).start_in_thread()
    c = run.model.config
    print(f"{run.ckpt_dir}: {c.n_layer} layers x {c.n_head} heads x {c.n_embd}, block {c.block_size}; "
          f"torch threads {torch.get_num_threads()}; debounce {DEBOUNCE_MS} ms; medians of {args.keystrokes} keystrokes")
    print(f"{'tokens':>6} {'total ms':>9} {'model ms':>9} {'fetch ms':>9} {'draw ms':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        page = Browser("about:blank", Path(tmp) / "profile")
        try:
            page.evaluate(f"location.href = 'http://127.0.0.1:{server.port}/'")
            page.wait_for("document.getElementById('live-text') && !document.getElementById('live').hidden")
            for n in [int(t) for t in args.tokens.split(",")]:
                text = text_of(run, n)
                page.evaluate(f"{{ const b = document.getElementById('live-text'); b.value = {json.dumps(text[:-1])}; b.focus();"
                              "b.setSelectionRange(b.value.length, b.value.length); }")
                figures = []
                for k in range(args.keystrokes + 1):
                    page.evaluate("document.body.dataset.shownText = ''")
                    if k % 2 == 0:  # alternate, so every keystroke changes the text and its length stays
                        page.type(text[-1])
                    else:
                        page.backspace()
                    page.wait_for("document.body.dataset.shownText")
                    d = page.evaluate("Object.assign({}, document.body.dataset)")
                    if k:  # the first warms up
                        figures.append([float(d[name]) for name in ("totalMs", "modelMs", "fetchMs", "drawMs")])
                tokens = page.evaluate("document.querySelectorAll('#tokens .tok').length")
                medians = [statistics.median(f[i] for f in figures) for i in range(4)]
                print(f"{tokens:>6} " + " ".join(f"{m:>{w}.1f}" for m, w in zip(medians, (9, 9, 9, 8))))
        finally:
            page.close()
            server.shutdown()


if __name__ == "__main__":
    main()
