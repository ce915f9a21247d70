"""When a run stops before its last step: train.patience, a number of evaluations without a better best/.

    patience = auto_patience(max_steps=2937, eval_interval=50)    # "auto": 6 evaluations
    if stops_early(cfg, step, evals_since_best):
        print(stop_line(cfg.train, step, best_step, evals_since_best, seconds_per_step))

A number set by hand is used as it is (0: never). `patience = "auto"` (configs/small.toml) follows the plan of
a time budget: the run stops once best/ is PATIENCE_SHARE of the planned steps behind, and never before the
warm-up and a first stretch of decay (EARLIEST_SHARE of the plan). A time budget that outlasts what the corpus
can teach then ends when the model stops improving, while a corpus whose validation loss keeps falling runs its
whole budget. A fixed max_steps is never cut by "auto".

There is no faster stop for a model that "learns its text by heart": one was tried (a validation loss that
rises twice while the training loss is far below) and cost 0.044 bits per character on a quarter of the
LibreOffice help, whose validation loss rose for a few evaluations and then fell for 1,200 more steps as the
learning rate decayed. On six corpora the rule above lost at most 0.007 (docs/stopping.md).
"""

import math

from cli.messages import messages

# "auto" waits this share of the planned steps past the best evaluation: a loss that still falls can pause for
# two evaluations in a row (docs/benchmarks.md)
PATIENCE_SHARE = 0.1
EARLIEST_SHARE = 0.2  # and never stops in the first share of the plan (nor in the first two warm-ups)


def auto_patience(max_steps: int, eval_interval: int) -> int:
    """The evaluations an "auto" patience waits for a better best/, at a plan of max_steps (at least 2)."""
    return max(2, math.ceil(PATIENCE_SHARE * max_steps / eval_interval))


def planned_patience(cfg, max_steps: int) -> dict:
    """{"patience": ...} for a plan of max_steps when patience is "auto" and the steps are planned from a time
    budget ("auto" too); 0 (never) for a fixed max_steps; {} when patience was set by hand."""
    if "train.patience" not in cfg.auto:
        return {}
    return {"patience": auto_patience(max_steps, cfg.train.eval_interval) if "train.max_steps" in cfg.auto else 0}


def stops_early(cfg, step: int, evals_since_best: int) -> bool:
    """Whether the run ends here: patience evaluations without a better best/ (for "auto", only past the start)."""
    tc = cfg.train
    if "train.patience" not in cfg.auto:
        return bool(tc.patience) and evals_since_best >= tc.patience
    if not tc.patience or step < max(2 * tc.warmup_steps, EARLIEST_SHARE * tc.max_steps):
        return False
    return evals_since_best >= tc.patience


def stop_line(tc, step: int, best_step: int, evals: int, seconds_per_step: float) -> str:
    """The line that says why the run stopped (`evals` evaluations without a better best/), where best/ is and
    what stopping saved."""
    say, left = messages(), tc.max_steps - step
    saved = say("train.stop_saved", minutes=f"{left * seconds_per_step / 60:.1f}") if tc.time_budget else ""
    why = say("train.stop_patience", what=say("train.best_by." + tc.best_by), evals=evals, best=f"{best_step:,}")
    return say("train.stop", why=why, step=f"{step:,}", planned=f"{tc.max_steps:,}", saved=saved)
