"""The live training page's pictures in docs/: the lesson run watched before, while and after its heads form.

    python bench/watch_shots.py                       # trains configs/heads.toml into a temporary dir -> docs/watch_*.png
    python bench/watch_shots.py --lang ko --max-steps 3000

It runs what a learner types, `python train.py --config configs/heads.toml --watch 0`, opens the printed address in
headless Chromium and takes the first 1280x1600 of the page at three moments the page itself reports: a few
evaluations in with no head of the circuit formed ("before"), the first evaluation that marks one ("while"), and
three evaluations after the induction mark, or the last one seen ("after"). Nothing here draws anything itself.
"""

import argparse
import base64
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import CHROMIUM, Browser  # noqa: E402  (headless Chromium over its DevTools pipe)

WIDTH, HEIGHT = 1280, 1600
STATE = """(() => { const r = window.watched && window.watched.runs[0];
  if (!r) return null;
  const induction = r.formed.find((f) => f.role === "induction");
  return {evals: r.evals.length, formed: r.formed.length, induction: induction ? induction.step : null,
          last: r.evals.length ? r.evals[r.evals.length - 1].step : null}; })()"""


def take(browser: Browser, out: Path) -> None:
    time.sleep(1.0)  # the maps of the evaluation just shown arrive after its numbers
    data = browser.call("Page.captureScreenshot", session=browser.session, format="png", captureBeyondViewport=True,
                        clip={"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT, "scale": 1})["data"]
    out.write_bytes(base64.b64decode(data))
    print(f"{out} {out.stat().st_size // 1024} KB", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs", help="where the PNGs go")
    parser.add_argument("--lang", default="en", choices=("en", "ko"))
    parser.add_argument("--max-steps", type=int, default=6000, help="the lesson run's steps (default: its config's)")
    args = parser.parse_args()
    if CHROMIUM is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    work, out, end = Path(tempfile.mkdtemp()), Path(args.out), "" if args.lang == "en" else "_ko"
    command = [sys.executable, "train.py", "--config", "configs/heads.toml", "--out", str(work / "heads"), "--watch",
               "0", "--lang", args.lang, f"--train.max_steps={args.max_steps}"]
    trainer = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    port = next(int(m.group(1)) for line in trainer.stdout if (m := re.search(r"http://localhost:(\d+)/", line)))
    blank = work / "blank.html"
    blank.write_text("<html></html>")
    browser = Browser(blank.as_uri(), work / "profile")
    browser.call("Emulation.setDeviceMetricsOverride", session=browser.session, width=WIDTH, height=HEIGHT,
                 deviceScaleFactor=1, mobile=False)
    browser.evaluate(f"location.href = 'http://127.0.0.1:{port}/'")
    taken, seen = set(), None
    try:
        while trainer.poll() is None:
            try:
                state = browser.evaluate(STATE)
            except AssertionError:  # the page is loading
                state = None
            if state:
                seen = state
                if "before" not in taken and state["evals"] >= 3 and not state["formed"]:
                    take(browser, out / f"watch_before{end}.png")
                    taken.add("before")
                if "while" not in taken and state["formed"]:
                    take(browser, out / f"watch_while{end}.png")
                    taken.add("while")
                every = (state["last"] or 0) // max(1, state["evals"])  # steps between two evaluations
                if state["induction"] is not None and state["last"] >= state["induction"] + 3 * every:
                    take(browser, out / f"watch_after{end}.png")
                    taken.add("after")
                    break
            time.sleep(0.5)
        if "after" not in taken:
            take(browser, out / f"watch_after{end}.png")  # the run ended before: its last evaluation seen
        print("last state seen:", seen)
    finally:
        trainer.kill()
        browser.proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
