"""The pictures of the page in docs/, remade from a lesson run in headless Chromium, in English and Korean.

    python train.py --config configs/heads.toml --out runs/heads      # the lesson run (minutes on a CPU)
    python bench/screenshots.py --run runs/heads                      # -> docs/page_*.png, docs/page_*_ko.png

Each picture is what a learner sees: the first 1280x800 screen of the page (it opens on the run's induction head),
the Q·K·V cells of that head, the lines and the overview of every head, a head switched off before and after, the
token line's surprise at the first and the last snapshot, and the KV cache of a decoding. The pages are made by the
commands a learner types (generate.py); nothing here draws anything itself.
"""

import argparse
import base64
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import CHROMIUM, Browser  # noqa: E402  (headless Chromium over its DevTools pipe)

PROMPT = "대한민국 국회는 법률을 제정한다. 대한민국 국회는 법률을"  # a phrase and its copy: the lesson shows
WIDTH, HEIGHT = 1280, 800


def generate(*argv: str) -> None:
    subprocess.run([sys.executable, "generate.py", *argv], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


class Shots:
    """A page in Chromium at WIDTH x HEIGHT and what to take of it."""

    def __init__(self, page: Path, fragment: str = ""):
        self.browser = Browser(page.resolve().as_uri() + fragment, tempfile.mkdtemp())
        self.browser.call("Emulation.setDeviceMetricsOverride", session=self.browser.session, width=WIDTH,
                          height=HEIGHT, deviceScaleFactor=1, mobile=False)
        time.sleep(0.8)  # the embedded font's labels, drawn again once it has loaded
        errors = self.browser.evaluate("document.getElementById('errors').textContent")
        assert not errors, errors

    def run(self, js: str):
        result = self.browser.evaluate(js)
        time.sleep(0.3)
        return result

    def take(self, out: Path, selectors: tuple[str, ...] = ()) -> None:
        """The first screen, or the box around `selectors` (the whole page scrolled as needed)."""
        params = {"format": "png"}
        if selectors:
            box = self.browser.evaluate("""(() => { const rs = %s.map((s) => document.querySelector(s).getBoundingClientRect());
                const x = Math.min(...rs.map((r) => r.left)), y = Math.min(...rs.map((r) => r.top));
                return [x + scrollX, y + scrollY, Math.max(...rs.map((r) => r.right)) - x,
                        Math.max(...rs.map((r) => r.bottom)) - y]; })()""" % list(selectors))
            x, y, w, h = box
            params |= {"clip": {"x": max(0, x - 8), "y": max(0, y - 8), "width": w + 16, "height": h + 16, "scale": 1},
                       "captureBeyondViewport": True}
        data = self.browser.call("Page.captureScreenshot", session=self.browser.session, **params)["data"]
        out.write_bytes(base64.b64decode(data))
        print(f"{out} {out.stat().st_size // 1024} KB")

    def close(self):
        self.browser.proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="runs/heads", help="a lesson run (configs/heads.toml) with snapshots")
    parser.add_argument("--out", default="docs", help="where the PNGs go")
    parser.add_argument("--off", default=None, help="the head switched off before and after (default: the page's)")
    args = parser.parse_args()
    if CHROMIUM is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    run, out, work = Path(args.run), Path(args.out), Path(tempfile.mkdtemp())
    for lang in ("en", "ko"):
        end = "" if lang == "en" else "_ko"
        generate("--ckpt", str(run), "--prompt", PROMPT, "--attention", str(work / f"page{end}"), "--lang", lang)
        shots = Shots(work / f"page{end}" / "attention.html")
        shots.take(out / f"page_first{end}.png")
        head = shots.run("document.getElementById('layer').selectedOptions[0].textContent.split(' ')[1] + '.' + "
                         "document.getElementById('head').value")
        shots.take(out / f"page_qkv{end}.png", ("#explain",))
        shots.run("document.getElementById('head').value = 'all'; document.getElementById('head')"
                  ".dispatchEvent(new Event('change'))")
        shots.take(out / f"page_lines{end}.png", ("#lines", "#overview-section"))
        shots.close()
        off = args.off or head
        generate("--ckpt", str(run), "--prompt", PROMPT, "--attention", str(work / f"off{end}"), "--lang", lang,
                 "--ablate", off)
        shots = Shots(work / f"off{end}" / "attention.html", f"#layer={off.split('.')[0]}&head=all")
        shots.take(out / f"page_off{end}.png", ("#maps", "#sampling"))
        shots.close()
        generate("--prompt", PROMPT, "--attention", str(work / f"over{end}"), "--over-training", str(run),
                 "--lang", lang)
        shots = Shots(work / f"over{end}" / "over_training.html", "#step=")
        for which, js in (("first", "setFrame(0)"), ("last", "setFrame(FRAMES.length - 1)")):
            shots.run(js)
            shots.take(out / f"page_surprise_{which}{end}.png", ("#controls", "#tokens", "#surprise-note"))
        shots.close()
        generate("--ckpt", str(run), "--prompt", PROMPT[:12], "--max-new-tokens", "8", "--seed", "0", "--attention",
                 str(work / f"kv{end}"), "--lang", lang)
        shots = Shots(work / f"kv{end}" / "attention.html")
        shots.run("setStep(3)")
        if shots.run("!!document.getElementById('kv-section') && !document.getElementById('kv-section').hidden"):
            shots.take(out / f"page_kv{end}.png", ("#kv-section",))  # its caption names the step
        shots.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
