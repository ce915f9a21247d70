"""When a run stops before its last step: train.patience, a number of evaluations without a better best/.

    patience = auto_patience(max_steps=2937, eval_interval=50)    # "auto": 6 evaluations
    overfit = overfitting(cfg.train, losses, previous_val, best_val, evals_since_best)  # or "": not memorizing
    if stops_early(cfg, step, evals_since_best, overfit):
        print(stop_line(cfg.train, step, best_step, evals_since_best, seconds_per_step, overfit))

A number set by hand is used as it is (0: never). `patience = "auto"` (configs/small.toml) follows the plan of
a time budget: the run stops once best/ is PATIENCE_SHARE of the planned steps behind, and never before the
warm-up and a first stretch of decay (EARLIEST_SHARE of the plan). A time budget that outlasts what the corpus
can teach then ends when the model stops improving, while a corpus whose validation loss keeps falling runs its
whole budget. A fixed max_steps is never cut by "auto".

"auto" also stops sooner when the model is plainly learning its training text by heart: two evaluations
without a better best/, the second higher than the first and OVERFIT_RISE above best/'s, with the training loss
OVERFIT_GAP below the validation loss. A curve that may still fall gets the tenth; one that climbs while the
model memorizes is taken not to fall again. The runs these thresholds come from: docs/benchmarks.md.
"""

import math

from cli.messages import messages

# "auto" waits this share of the planned steps past the best evaluation: a loss that still falls can pause for
# two evaluations in a row (docs/benchmarks.md)
PATIENCE_SHARE = 0.1
EARLIEST_SHARE = 0.2  # and never stops in the first share of the plan (nor in the first two warm-ups)
# Memorizing, by three measures at once: one evaluation up is not enough, nor two above best/ (a curve can rise
# and then find a better best/), but a second rise together with a training loss far below (docs/benchmarks.md)
OVERFIT_RISE = 0.002
OVERFIT_GAP = 0.2


def auto_patience(max_steps: int, eval_interval: int) -> int:
    """The evaluations an "auto" patience waits for a better best/, at a plan of max_steps (at least 2)."""
    return max(2, math.ceil(PATIENCE_SHARE * max_steps / eval_interval))


def planned_patience(cfg, max_steps: int) -> dict:
    """{"patience": ...} for a plan of max_steps when patience is "auto" and the steps are planned from a time
    budget ("auto" too); 0 (never) for a fixed max_steps; {} when patience was set by hand."""
    if "train.patience" not in cfg.auto:
        return {}
    return {"patience": auto_patience(max_steps, cfg.train.eval_interval) if "train.max_steps" in cfg.auto else 0}


def overfitting(tc, losses: dict, previous_val: float, best_val: float, evals_since_best: int,
                lang: str = "en") -> str:
    """What shows this evaluation's model learning its training text by heart, in `lang` ("" when nothing does): a
    second evaluation without a better best/, its validation loss above the one before (`previous_val`) and
    OVERFIT_RISE above best/'s (`best_val`), with the training loss OVERFIT_GAP below it. Only when best/ is chosen
    by the validation loss."""
    val, train = losses["val"], losses["train"]
    if (tc.best_by != "val_loss" or evals_since_best < 2 or val <= previous_val or val < (1 + OVERFIT_RISE) * best_val
            or train > (1 - OVERFIT_GAP) * val):
        return ""
    return messages(lang)("train.overfit", previous=f"{previous_val:.4f}", val=f"{val:.4f}",
                          rise=f"{val / best_val - 1:.2%}", train=f"{train:.4f}", gap=f"{1 - train / val:.0%}")


def stops_early(cfg, step: int, evals_since_best: int, overfit: str = "") -> bool:
    """Whether the run ends here: patience evaluations without a better best/ or, for "auto" (and only past
    the start), that or `overfit` (from `overfitting`)."""
    tc = cfg.train
    if "train.patience" not in cfg.auto:
        return bool(tc.patience) and evals_since_best >= tc.patience
    if not tc.patience or step < max(2 * tc.warmup_steps, EARLIEST_SHARE * tc.max_steps):
        return False
    return evals_since_best >= tc.patience or bool(overfit)


def stop_line(tc, step: int, best_step: int, evals: int, seconds_per_step: float, overfit: str = "",
              lang: str = "en") -> str:
    """The line that says why the run stopped (`evals` evaluations without a better best/, or what `overfit`
    says), where best/ is and what stopping saved, in `lang`."""
    say, left = messages(lang), tc.max_steps - step
    saved = say("train.stop_saved", minutes=f"{left * seconds_per_step / 60:.1f}") if tc.time_budget else ""
    why = (say("train.stop_overfit", why=overfit, best=f"{best_step:,}") if overfit else
           say("train.stop_patience", what=tc.best_by.replace("_", " "), evals=evals, best=f"{best_step:,}"))
    return say("train.stop", why=why, step=f"{step:,}", planned=f"{tc.max_steps:,}", saved=saved)
