"""A run trained in the background of a notebook, and its live page in a cell (train.py --watch's page).

    training = nb.train("configs/heads.toml", "runs/heads")     # python train.py in a process of its own
    nb.watch(training)                                          # the page, updating at each evaluation
    training.wait()                                             # its lines, until the run ends
    nb.watch("runs/heads", "runs/heads-off")                    # two runs side by side, finished or training

The trainer is `python train.py`, not a function call: the kernel stays free while it trains, its numbers are the
command line's, and a stop of the kernel (or `wait` interrupted) ends it as Ctrl-C does (it saves, then ends). The
page is served by inspection.watch_server in a process of its own bound to 127.0.0.1, which ends with the kernel;
the cell shows it in an iframe, so it needs a browser on the kernel's machine (Jupyter, JupyterLab, VS Code). Colab's
browser cannot reach the kernel's ports: there the cell says so, and `nb.heads_over_training` and `nb.over_training`
show the same run after it ends.
"""

import atexit
import html
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inspection.live_server import listen
from inspection.watch import check_run
from inspection.watch_server import CHILD
from cli.arguments import need_int, need_type
from cli.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
HEIGHT = 900  # pixels of the live page's frame
EVERY = 0.5  # seconds between two looks at a training's printed lines while waiting for it
trainers: list[subprocess.Popen] = []  # every trainer this kernel started: stopped with it
pages: dict[tuple, tuple] = {}  # (runs, lang) -> (process, address): one page per set of runs


def end_all() -> None:
    """The kernel ends: each page's process is killed (it only reads; nothing of a run is left half-done, as with
    train.py --watch), each trainer stopped as Ctrl-C stops it (it saves its weights, then ends)."""
    for process, _ in pages.values():
        process.kill()
    for process in trainers:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    for process in [*trainers, *(p for p, _ in pages.values())]:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


atexit.register(end_all)


class Training:
    """`python train.py --config CONFIG --out OUT --lang LANG SETTINGS` running in a process of its own."""

    def __init__(self, config, out, settings: tuple, lang: str):
        self.out = Path(out)
        handle, self.log = tempfile.mkstemp(prefix="train-", suffix=".log")
        errors, self.errors = tempfile.mkstemp(prefix="train-", suffix=".err")
        self.shown = 0  # characters of the log printed so far
        command = [sys.executable, str(ROOT / "train.py"), "--config", str(config), "--out", str(out), "--lang", lang,
                   *settings]  # fmt: skip
        # a session of its own: the kernel's interrupt reaches it once, through `wait`, never twice
        self.process = subprocess.Popen(command, stdout=handle, stderr=errors, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        os.close(handle)
        os.close(errors)
        trainers.append(self.process)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def print_new(self) -> None:
        """What train.py printed since the last look (its progress bar goes to its own stderr, unread: the page
        shows the progress)."""
        text = Path(self.log).read_text(encoding="utf-8", errors="replace")
        if len(text) > self.shown:
            print(text[self.shown :], end="", flush=True)
            self.shown = len(text)

    def wait(self) -> None:
        """Print train.py's lines as they come until the run ends. Interrupted (the kernel's stop), the trainer is
        stopped as Ctrl-C stops it: it saves, then ends. A run that failed raises its one line."""
        try:
            while self.process.poll() is None:
                self.print_new()
                time.sleep(EVERY)
        except KeyboardInterrupt:
            self.process.send_signal(signal.SIGINT)
            self.process.wait()
            self.print_new()
            raise
        self.print_new()
        if self.process.returncode != 0:
            said = Path(self.errors).read_text(encoding="utf-8", errors="replace").strip().splitlines()
            last = said[-1] if said else f"train.py ended with exit code {self.process.returncode}"
            raise UserError(last.removeprefix("error: "))

    def __repr__(self) -> str:
        state = "training" if self.running else f"ended (exit code {self.process.returncode})"
        return f"Training({str(self.out)!r}, {state})"


def train(config, out, *settings: str, lang: str = "en") -> Training:
    """Start `python train.py --config CONFIG --out OUT SETTINGS` in the background ("--train.seed=7", ...)."""
    need_type("config", config, (str, os.PathLike), "a config file's path (configs/heads.toml)")
    need_type("out", out, (str, os.PathLike), "the run's folder (runs/NAME)")
    for setting in settings:
        need_type("a setting", setting, str, 'a string as train.py takes it, e.g. "--train.seed=7"')
    return Training(config, out, settings, lang)


class Live:
    """The live page at `address`, shown in an iframe `height` pixels tall."""

    def __init__(self, address: str, runs: list[Path], height: int):
        self.address, self.runs, self.height = address, runs, height

    def _repr_html_(self) -> str:
        return (f'<iframe src="{html.escape(self.address, quote=True)}" style="width: 100%; height: {self.height}px; '
                'border: 1px solid #ddd"></iframe>')

    def __repr__(self) -> str:
        return f"the live page of {' | '.join(map(str, self.runs))}: {self.address} (open it in a browser)"


class Unreachable(str):
    """What a notebook shows where its browser cannot reach the kernel's ports (Colab)."""

    def __repr__(self) -> str:
        return str(self)


def watch(run, run2=None, *, lang: str = "en", height: int = HEIGHT):
    """The live page of a run (a Training, or a run's folder: finished or being trained by another process), or of
    two side by side on one step axis."""
    need_int("height", height, lo=1, what="pixels")
    runs = []
    for name, given in (("run", run), ("run2", run2)):
        if given is None and name == "run2":
            continue
        if isinstance(given, Training):
            runs.append(given.out)  # its folder may not exist yet: the page waits for it
            continue
        need_type(name, given, (str, os.PathLike), "a Training (nb.train) or a run's folder (a str or a Path)")
        check_run(Path(given), f"nb.watch({name}=...)")
        runs.append(Path(given))
    if len(runs) == 2 and runs[0].resolve() == runs[1].resolve():
        raise UserError(f"nb.watch names {runs[0]} twice; pass two runs to compare, or one")
    if "google.colab" in sys.modules:
        return Unreachable(f"The live page of {' | '.join(map(str, runs))} needs a browser on the kernel's machine, "
                           "which Colab's is not; once the run ends, nb.heads_over_training(RUN) and "
                           "nb.over_training(RUN, TEXT) show how its heads formed.")
    key = (tuple(str(r.resolve()) for r in runs), lang)
    process, address = pages.get(key, (None, None))
    if process is None or process.poll() is not None:
        sock = listen("127.0.0.1", 0, "port")
        process = subprocess.Popen([sys.executable, "-c", CHILD, *key[0], "--socket", str(sock.fileno()),
                                    "--parent", str(os.getpid()), "--lang", lang], cwd=ROOT, pass_fds=[sock.fileno()],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        address = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        sock.close()  # the page's process holds it now
        pages[key] = (process, address)
    return Live(address, runs, height)
