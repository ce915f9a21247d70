"""How a run stops early: Ctrl-C or SIGTERM (finish the step, save, exit 130/143) and a loss that diverged.

    with StopSignals(out_dir, resume, overwrite, command) as signals:
        ...                                  # preparing the data, building the model: a signal aborts at once
        signals.defer()                      # the loop: a signal waits for the end of its step
        if signals.caught: ...               # the signal's number, or None
        stop = signals.stopped(stop)         # the loop is over: the final scores abort at once again
    check_finite("the training loss", loss, step, out_dir)   # TrainingDiverged (exit code 3) for NaN/inf

Every way a signal ends a run ends with one line and the one command that carries on: `--resume` when
last/ holds this run's checkpoint, else the same command again (with `--overwrite` when the directory now
holds the start of a run).
"""

import math
import shlex
import signal
import sys
import time
from pathlib import Path

from cli.command import Interrupted
from cli.errors import UserError
from storage.checkpoint import checkpoint_step
from training.run_dir import run_content


class TrainingDiverged(UserError):
    """The loss became NaN or infinite; nothing bad was saved."""

    exit_code = 3


def check_finite(what: str, value: float, step: int, out_dir: Path) -> None:
    """Stop before a NaN/inf reaches a checkpoint: last/ keeps the last good weights."""
    if not math.isfinite(value):
        kept = f"{out_dir}/last keeps the last good weights" if (out_dir / "last").exists() else "nothing was saved"
        raise TrainingDiverged(
            f"{what} is {value} at step {step}, so training stopped ({kept}); "
            "lower train.lr or raise train.warmup_steps, then resume with --resume or start again"
        )


class StopSignals:
    """While open, SIGINT and SIGTERM stop the run. In the loop (after `defer()`) the first sets `caught`,
    which the loop checks after each step, then saves and stops; a second Ctrl-C aborts at once. Anywhere
    else (the data, the model, the final scores) there is nothing to finish, so a signal aborts at once.
    An abort raises cli.command.Interrupted (exit 128 + the signal) with the line to print. `command`: the
    command line without --resume and --overwrite (None: "(the same command)"). The previous handlers come
    back on exit."""

    def __init__(self, out_dir: Path, resume: bool = False, overwrite: bool = False, command: list[str] | None = None):
        self.out_dir, self.resume, self.overwrite, self.base = Path(out_dir), resume, overwrite, command
        self.caught: int | None = None
        self.deferring = False
        self.started = time.time() - 1  # a last/ written since then is this run's (mtimes may be whole seconds)
        self.previous = {}

    def defer(self) -> None:
        """From now until `stopped`, the first signal waits for the end of the step."""
        self.deferring = True

    def stopped(self, stop: int | None) -> int | None:
        """The loop is over: `stop` (what it stopped for), or a signal it caught after its last check."""
        self.deferring = False
        return stop or self.caught

    def handle(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        if self.deferring and self.caught is None:
            self.caught = signum
            print(f"\n{name}: finishing this step, then saving (Ctrl-C again aborts)", file=sys.stderr)
        elif not self.deferring or signum == signal.SIGINT:
            how = "aborted by a second Ctrl-C without saving" if self.deferring else f"stopped by {name}"
            raise Interrupted(f"{how}; {self.advice()}", signum)

    def command(self, flag: str = "") -> str:
        """The command line again, with `flag` (--resume, --overwrite or nothing)."""
        if self.base is None:
            return f"(the same command) {flag}".strip()
        return shlex.join(self.base + ([flag] if flag else []))

    def advice(self) -> str:
        """What was kept and the one command that carries on from it."""
        last = self.out_dir / "last"
        ours = (last / "model.safetensors").exists() and (self.resume or last.stat().st_mtime >= self.started)
        if ours:
            return f"{last} keeps step {checkpoint_step(last)}; resume with: {self.command('--resume')}"
        again = self.command("--overwrite" if self.overwrite or run_content(self.out_dir) else "")
        return f"no checkpoint of this run was saved; start it again with: {again}"

    def __enter__(self) -> "StopSignals":
        self.previous = {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
