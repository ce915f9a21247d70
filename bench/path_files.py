"""The files a reader opens to follow one path through the code: the project's files whose functions run.

    python bench/path_files.py                 # trains configs/tiny.toml into a temporary folder first (~30 s)
    python bench/path_files.py --run runs/x    # a run of yours (the speed layer on, as every command loads it)

Each path runs once to warm up, then again under `sys.setprofile`, which records the file of every Python function
called. Counted as docs/layout.md counts them: the project's own files, without the checks that only pass their
arguments through (cli/arguments.py, cli/errors.py, cli/command.py, cli/console.py's printing) and without the
files that loading a run opens, which every command shares: the run is loaded once before, and inference/runs.py
(`load_run`, the door every command opens it by) is counted in its place. A command generates no text
(--max-new-tokens 0: a decoded token is a path of its own). "To open" leaves out, besides, the files where only
checks of the options ran (a check's name starts with check or need_) and the tokenizer's files (a token's
text and bytes, for the labels and the prompt: the tokenizer's own path). A live keystroke is the model side of
the page's request (inspection/live.py's `inspect` of the body the page sends for a keystroke, run as the model
thread runs it: no walkthrough tensors, which a click asks for) plus the two files that carry it there, the
server's route and the model thread (inspection/live_server.py, inspection/live_worker.py). With --functions, each
file's functions that ran.
"""

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PASS_THROUGH = {"cli/arguments.py", "cli/errors.py", "cli/command.py", "cli/console.py"}
# a token's text and bytes, which every path reads for its labels and its prompt: the tokenizer's own path
TOKENIZER = {"data/jamo.py", "data/token_bytes.py", "data/tokenizer.py"}
PROMPT = "대한민국 국회는"  # within the tiny config's 16 tokens


def files_run(work) -> dict[str, set[str]]:
    """{the project's file (relative): its functions} called while `work()` runs, after a warm-up call."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        work()
    found: dict[str, set[str]] = {}

    def record(frame, event, arg):
        path = frame.f_code.co_filename
        if event == "call" and path.startswith(str(ROOT)):
            found.setdefault(str(Path(path).relative_to(ROOT)), set()).add(frame.f_code.co_name)

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        sys.setprofile(record)
        try:
            work()
        finally:
            sys.setprofile(None)
    this = str(Path(__file__).relative_to(ROOT))
    return {f: names for f, names in found.items() if f not in PASS_THROUGH and f != this}


def checking(function: str) -> bool:
    """Whether a function that ran is a check of what it was given (or a comprehension, which any function has)."""
    return function.startswith(("check", "need_", "<")) or function in ("__post_init__", "put")


def paths(run_dir: Path) -> dict:
    """Each path's work, as a user starts it."""
    import generate
    from inference import load_run
    from inspection import notebook as nb
    from inspection.live import LiveInspector
    from model.sampling import TEMPERATURE

    run = load_run(run_dir)
    inspector = LiveInspector(run)
    generate.load_run = lambda *args, **kwargs: run  # loaded once, above

    def command(*options):
        return lambda: generate.main(["--ckpt", str(run_dir), "--prompt", PROMPT, "--max-new-tokens", "0", *options])

    def keystroke():  # the body live.js's settings() sends for a keystroke: no walkthrough tensors until a click
        body = {"text": PROMPT, "temperature": TEMPERATURE, "top_k": None, "top_p": None, "explain": False, "ablate": []}
        for _ in inspector.inspect(body):
            pass

    return {"--why": command("--why"), "--explain L.H": command("--explain", "1.0"),
            "--explain path": command("--explain", "path"), "one live keystroke": keystroke,
            "nb.page": lambda: nb.page(run, PROMPT)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, help="a run dir (default: configs/tiny.toml trained into a temporary folder)")
    p.add_argument("--functions", action="store_true", help="name each file's functions that ran")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = args.run
        if run_dir is None:
            run_dir = Path(tmp) / "run"
            subprocess.run([sys.executable, "train.py", "--config", "configs/tiny.toml", "--out", str(run_dir),
                            f"--data.cache_dir={Path(tmp) / 'cache'}"], cwd=ROOT, check=True, capture_output=True)
        os.chdir(ROOT)
        for name, work in paths(run_dir).items():
            found = {"inference/runs.py": {"load_run"}, **files_run(work)}
            if name == "one live keystroke":
                found |= {"inspection/live_server.py": {"(the route)"}, "inspection/live_worker.py": {"(the thread)"}}
            python = sorted(f for f in found if f.endswith(".py"))
            checks = [f for f in python if all(checking(function) for function in found[f])]
            aside = checks + sorted(TOKENIZER & set(python))
            print(f"{name}: {len(python)} Python files ran; to open {len(python) - len(aside)}, without "
                  f"{', '.join(aside) or 'none'}: {', '.join(f for f in python if f not in aside)}")
            if args.functions:
                for f in python:
                    print(f"    {f}: {', '.join(sorted(found[f]))}")

if __name__ == "__main__":
    main()
