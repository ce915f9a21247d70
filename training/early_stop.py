"""When a run stops before its last step: train.patience, a number of evaluations without a better best/.

    patience = auto_patience(max_steps=2937, eval_interval=50)    # "auto": 6 evaluations
    if stops_early(cfg, step, evals_since_best): print(stop_line(cfg.train, step, best_step, evals_since_best, s))

A number set by hand is used as it is (0: never). `patience = "auto"` (configs/small.toml) follows the plan of
a time budget: the run stops once best/ is PATIENCE_SHARE of the planned steps behind, and never before the
warm-up and a first stretch of decay (EARLIEST_SHARE of the plan). A time budget that outlasts what the corpus
can teach then ends when the model stops improving: on the built-in corpus the ten-minute plan found its best
step at 550-650 of about 2,900 and spent the rest getting worse (docs/benchmarks.md), while a large corpus,
whose validation loss keeps falling, runs its whole budget. A fixed max_steps is never cut by "auto".
"""

import math

# "auto" waits this share of the planned steps past the best evaluation. Not less: a twentieth (2 evaluations on
# a 2-core CPU) cut the built-in corpus's run by 100 steps, but a run on 3.9 million characters, whose loss fell
# to its last step, had two evaluations in a row without a better best/ at a third of its plan (docs/benchmarks.md)
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
    """Whether the run ends here: patience evaluations without a better best/ (and, for "auto", past the start)."""
    tc = cfg.train
    if not tc.patience or evals_since_best < tc.patience:
        return False
    return "train.patience" not in cfg.auto or step >= max(2 * tc.warmup_steps, EARLIEST_SHARE * tc.max_steps)


def stop_line(tc, step: int, best_step: int, evals: int, seconds_per_step: float) -> str:
    """The line that says why the run stopped (`evals` evaluations without a better best/), where best/ is and
    what stopping saved."""
    left = tc.max_steps - step
    saved = f", about {left * seconds_per_step / 60:.1f} minutes of train.time_budget" if tc.time_budget else ""
    return (f"early stop: no better {tc.best_by.replace('_', ' ')} in {evals} evaluations since step "
            f"{best_step:,} (best/); stopped at step {step:,} of {tc.max_steps:,} planned{saved}")
