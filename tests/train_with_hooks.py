"""train.py's command line with its test hooks, for tests that stop or kill a real training process.

    python tests/train_with_hooks.py --signal-after 7:TERM -- --config configs/tiny.toml --out RUN
    python tests/train_with_hooks.py --pause-in-save 20:best -- ARGS      # 20 alone: the save of last/

--signal-after STEP:INT|TERM: the process signals itself after that step, as Ctrl-C or `kill` would.
--step-seconds S: each step sleeps S seconds after it (a run slow enough for a page to follow).
--pause-in-save STEP[:NAME]: the save of last/ (or NAME) at that step prints `SAVE_PAUSED STEP NAME` and
sleeps halfway (the weights written, the train state not), so a test can kill -9 it. --nan-after STEP:RANK:
that rank's summed training loss becomes NaN after that step, as a diverging rank's would. --compile-fails-on
RANK: torch.compile gives that rank a model whose first forward raises what a compiler that cannot build its
kernels raises, and every other rank its model as it is (no compilation: seconds). Runs under torchrun
too (every rank takes the hooks). The hooks replace seams that do nothing in a real run, train.after_step and
training.checkpoints.during_save, or wrap train.optimisation_step: train.py itself reads no test setting from the
environment.
"""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import train  # noqa: E402  (after the path: the repository's train.py)
from training import checkpoints  # noqa: E402


def main() -> int:
    ours, rest = sys.argv[1:], []
    if "--" in ours:
        ours, rest = ours[: ours.index("--")], ours[ours.index("--") + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--signal-after", metavar="STEP:INT|TERM")
    parser.add_argument("--pause-in-save", metavar="STEP[:NAME]")
    parser.add_argument("--nan-after", metavar="STEP:RANK")
    parser.add_argument("--compile-fails-on", metavar="RANK", type=int)
    parser.add_argument("--step-seconds", metavar="S", type=float)
    args = parser.parse_args(ours)
    if args.compile_fails_on is not None:
        import torch

        def compile_fails(model):
            if int(os.environ.get("RANK", 0)) != args.compile_fails_on:
                return model

            def forward(*a, **k):
                raise RuntimeError("BackendCompilerFailed: backend='inductor' raised:\nCalledProcessError: gcc not found")

            return forward

        torch.compile = compile_fails
    if args.nan_after:
        nan_step, nan_rank = (int(x) for x in args.nan_after.split(":"))
        step_once = train.optimisation_step

        def diverging_step(run, p, lr):
            step_once(run, p, lr)
            if p.step == nan_step and run.ddp.rank == nan_rank:
                p.loss_sum.fill_(float("nan"))

        train.optimisation_step = diverging_step
    if args.signal_after:
        at, _, name = args.signal_after.partition(":")
        signum = getattr(signal, f"SIG{name or 'INT'}")

        def after_step(step: int) -> None:
            if step == int(at):
                os.kill(os.getpid(), signum)

        train.after_step = after_step

    if args.step_seconds:  # a slow run, whose evaluations a page sees one by one

        def after_step(step: int) -> None:
            time.sleep(args.step_seconds)

        train.after_step = after_step

    if args.pause_in_save:
        at, _, which = args.pause_in_save.partition(":")

        def during_save(step: int, name: str) -> None:
            if step == int(at) and name == (which or "last"):
                print(f"SAVE_PAUSED {step} {name}", flush=True)
                time.sleep(60)

        checkpoints.during_save = during_save

    sys.argv[1:] = rest  # train.main reads them as its own command line (and counts a budget from the start)
    return train.main()


if __name__ == "__main__":
    sys.exit(main())
