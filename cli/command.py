"""The command-line plumbing of every entry point: train.py, generate.py, `python -m data.prepare`,
`python -m hf.import_gpt2` and `python -m hf.export_gpt2`.

    parser = ArgumentParser(prog="python train.py", description="...")   # a bad argument: UserError
    return run_command(lambda: work(parser.parse_args(argv)))            # the exit code

`run_command` turns what can end a command into its exit code: a `UserError` prints `error: <message>` on
one line and gives its exit_code (2 for bad input); Ctrl-C gives 130; a reader that went away (`| head`)
ends it quietly with 0, as other Unix tools do. Anything else is a bug and keeps its traceback.
"""

import argparse
import os
import sys
from collections.abc import Callable

from model.errors import UserError


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad argument raises UserError (one line) instead of printing the usage and exiting."""

    def error(self, message):
        raise UserError(f"{message}; see {self.prog} --help")


def print_error(error: Exception | str) -> None:
    """`error: <message>` as one line on stderr, whatever the message holds: a byte that was not UTF-8
    (a lone surrogate from sys.argv) shows as \\xNN, a line break as \\n."""
    text = str(error)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no byte produced
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    print("error: " + text.replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr)


def run_command(work: Callable[[], int | None], interrupted: str = "") -> int:
    """work()'s exit code (None is 0), or the exit code of what ended it (module docstring). `interrupted`:
    the error line to print after Ctrl-C (else a bare line break)."""
    try:
        return work() or 0
    except UserError as e:
        print_error(e)
        return e.exit_code
    except KeyboardInterrupt:
        if interrupted:
            print_error(interrupted)
        else:
            print(file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0


def directory_command(argv, prog: str, description: str, src: tuple[str, str], out: str, run) -> int:
    """A command `prog SRC OUT [--force]` (the Hugging Face import and export): `src` is the first argument's
    (name, help), `out` the second's name; `run(src, out, force)` does the work and returns the line to print."""
    parser = ArgumentParser(prog=prog, description=description)
    parser.add_argument(src[0], help=src[1])
    parser.add_argument(out, help="the directory to write; must not exist or be empty unless --force")
    parser.add_argument("--force", action="store_true", help=f"replace {out.upper()} if it already holds files")

    def work():
        args = vars(parser.parse_args(argv))
        print(run(args[src[0]], args[out], args["force"]))

    return run_command(work)
