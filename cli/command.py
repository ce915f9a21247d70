"""The command-line plumbing of every entry point: train.py, generate.py, `python -m data.prepare`,
`python -m hf.import_gpt2` and `python -m hf.export_gpt2`.

    parser = ArgumentParser(prog="python train.py", description="...")   # a bad argument: UserError
    return run_command(lambda: work(parser.parse_args(argv)))            # the exit code

`run_command` turns what can end a command into its exit code: a `UserError` prints `error: <message>` on
one line (under torchrun, on rank 0 alone) and gives its exit_code (2 for bad input); Ctrl-C gives 130 and SIGTERM 143, each after the
`finally` blocks on the way out have removed what was half-written, with one line (an `Interrupted`
names what to do next); a reader that went away (`| head`) ends it quietly with 0, as other Unix tools
do; a GPU out of memory is one line too, naming the settings that need less. Anything else is a bug and
keeps its traceback. `integer` reads every whole number of an argument (`--seed 1`, `--head 1.0`,
`--layers 0-3`): ASCII digits within 64 bits, before anything is built from it.
"""

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable

from cli import says_errors
from cli.console import safe_console
from cli.errors import UserError


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended the command; the message (if any) says what was kept and what to run next.
    A KeyboardInterrupt, so no `except Exception` on the way out swallows it and every `finally` runs."""

    def __init__(self, message: str = "", signum: int = signal.SIGINT):
        super().__init__(message)
        self.exit_code = 128 + signum


def raise_interrupted(signum, frame) -> None:
    raise Interrupted(signum=signum)


@contextlib.contextmanager
def stop_signals_raise():
    """While open (in the main thread), SIGTERM raises `Interrupted` as Ctrl-C raises KeyboardInterrupt,
    so both unwind through the `finally` blocks that clean up (a signal the shell ignores for a background
    job stays ignored). The previous handlers come back on exit."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    wanted = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: raise_interrupted}
    previous = {s: signal.signal(s, h) for s, h in wanted.items() if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


INT_RANGE = (-(1 << 63), (1 << 64) - 1)  # what torch and numpy hold (a seed is an unsigned 64-bit number)


class OutOfRange(argparse.ArgumentTypeError, ValueError):
    """A number too large for what reads it: argparse prints its message, callers catch a ValueError."""


def integer(text: str) -> int:
    """A whole number in ASCII digits (str.isdigit also takes "²", which int() refuses) that fits in 64 bits,
    else ValueError; argparse's `type` for whole numbers, so it reports "invalid integer value"."""
    if not re.fullmatch(r"\s*-?[0-9]+\s*", text):
        raise ValueError(f"{text!r} is not a whole number")
    value = int(text)
    if not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise OutOfRange(f"{value} does not fit in 64 bits")
    return value


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
    the error line to print after Ctrl-C or SIGTERM, unless the `Interrupted` says more (else a bare line
    break, which ends a line of streamed text)."""
    safe_console()  # a terminal that cannot print Korean gets "?", not a UnicodeEncodeError
    try:
        with stop_signals_raise():
            return work() or 0
    except UserError as e:
        if says_errors() or e.own_rank:  # under torchrun, rank 0 alone, or the rank whose own failure it is
            print_error(e)
        return e.exit_code
    except KeyboardInterrupt as e:
        message = str(e) if isinstance(e, Interrupted) and str(e) else interrupted
        if message:
            print_error(message)
        else:
            print(file=sys.stderr)
        return getattr(e, "exit_code", 130)
    except RuntimeError as e:
        if not is_out_of_memory(e):
            raise
        print_error(out_of_memory_line(e))
        return 2
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


def is_out_of_memory(error: BaseException) -> bool:
    """A GPU that ran out of memory: torch's OutOfMemoryError (CUDA), or MPS's RuntimeError saying so."""
    return type(error).__name__ == "OutOfMemoryError" or "MPS backend out of memory" in str(error)


def out_of_memory_line(error: BaseException) -> str:
    """The one line for an out-of-memory error: what ran out, and the settings that need less."""
    first = " ".join(". ".join(str(error).split(". ")[:2]).split())  # "CUDA out of memory. Tried to allocate 2.00 GiB"
    return (f"the GPU ran out of memory ({first}); lower train.batch_size (raise train.grad_accum to keep the batch), "
            f"model.block_size or the model's size, or generate fewer --num-samples at once")
