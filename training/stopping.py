"""How a run stops early: Ctrl-C or SIGTERM (finish the step, save, exit 130/143) and a loss that diverged.

    with StopSignals() as signals:
        ...
        if signals.caught: ...               # the signal's number, or None
    check_finite("the training loss", loss, step, out_dir)   # TrainingDiverged (exit code 3) for NaN/inf
"""

import math
import signal
import sys
from pathlib import Path

from model.errors import UserError


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
    """While open, SIGINT and SIGTERM set `caught` (the first signal's number), which the loop checks after
    each step; a second Ctrl-C aborts at once (KeyboardInterrupt). The previous handlers come back on exit."""

    def __init__(self):
        self.caught: int | None = None
        self.previous = {}

    def handle(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.caught is not None:
            raise KeyboardInterrupt
        if self.caught is None:
            self.caught = signum
        print(f"\n{signal.Signals(signum).name}: finishing this step, then saving (Ctrl-C again aborts)", file=sys.stderr)

    def __enter__(self) -> "StopSignals":
        self.previous = {s: signal.signal(s, self.handle) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
