"""train.time_budget: the seconds a run may take, from the start of train.py to its final score.

    budget = TimeBudget("10m", started, spent_before=0.0, final_read=9_728)
    budget.start_loop(step)                        # when the loop begins
    budget.evaluated(seconds_total, seconds_scoring, tokens_scored)   # after each evaluation and save
    max_steps = budget.steps_that_fit(step)        # the plan again, at each evaluation

The budget counts every process of the run (a resume takes over what the ones before it spent) and all
of each: data preparation, set-up, steps, evaluations, saves and the final scoring. `max_steps = "auto"`
is planned before the first step from a timed trial (training/recipe.py), then again at every evaluation
from the run's own time per step since the last plan, evaluations and saves included, so the cosine
schedule ends when the budget does, also on a machine that slows down. Each plan keeps time for the end:
the evaluation and save at the last step, the final scoring of best/ and last/, the plot and the exit.
"""

import time

from training.recipe import parse_duration

AFTER_SCORING_S = 3.0  # kept for loss.png and the exit (2-3 s on a 2-core CPU)


class TimeBudget:
    def __init__(self, budget: str, started: float, spent_before: float, final_read: int):
        """`started`: when this process began (perf_counter); `spent_before`: seconds the run's earlier
        processes used; `final_read`: tokens this rank reads to score the validation split once."""
        self.seconds = parse_duration(budget) if budget else None
        self.started, self.spent_before, self.final_read = started, spent_before, final_read
        self.t_plan, self.plan_step = started, 0
        self.seconds_per_eval = 0.0  # the whole of the last evaluation: both estimates, the save, the sample
        self.seconds_per_scored_token = 0.0  # its forward passes per token
        self.seconds_per_step = 0.0  # since the plan before the last, evaluations and saves included

    def used(self) -> float:
        """Seconds of the budget spent so far, over all the run's processes."""
        return self.spent_before + time.perf_counter() - self.started

    def start_loop(self, step: int) -> None:
        self.t_plan, self.plan_step = time.perf_counter(), step

    def evaluated(self, seconds: float, scoring_seconds: float, tokens: int) -> None:
        """An evaluation (with its save and sample) took `seconds`, of which `scoring_seconds` ran `tokens`
        through the model."""
        self.seconds_per_eval, self.seconds_per_scored_token = seconds, scoring_seconds / max(1, tokens)

    def steps_that_fit(self, step: int) -> int:
        """max_steps: `step` plus the steps that fit in what is left, at the time per step since the last plan."""
        now = time.perf_counter()
        per_step = self.seconds_per_step = (now - self.t_plan) / max(1, step - self.plan_step)
        self.t_plan, self.plan_step = now, step
        # the last evaluation comes whole however few steps are left (per_step spreads them over eval_interval
        # steps); the final scoring reads the validation split once for best/ and once for last/
        end = self.seconds_per_eval + 2 * self.final_read * self.seconds_per_scored_token + AFTER_SCORING_S
        left = self.seconds - self.used() - end
        return step + max(0, int(left / per_step))
