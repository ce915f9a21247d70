"""train.patience, by hand or "auto" (training/early_stop.py): when a run ends before its last step.

    python -m pytest tests/test_early_stop.py -q
"""

import math
from dataclasses import replace

import pytest

from training.config import load_config
from training.early_stop import auto_patience, overfitting, planned_patience, stop_line, stops_early
from training.recipe import plan_settings
from tests.conftest import ROOT

TINY = ROOT / "configs" / "tiny.toml"
BUDGET = ["--train.max_steps=auto", "--train.time_budget=1m", "--train.eval_interval=10", "--train.eval_iters=3"]


def test_an_auto_patience_waits_a_tenth_of_the_plan_and_at_least_two_evaluations():
    assert auto_patience(2937, 50) == 6  # the default run's plan: 294 steps, 6 evaluations of 50
    assert auto_patience(3000, 50) == 6 and auto_patience(3001, 50) == 7
    assert auto_patience(100, 50) == 2  # never fewer than two


def test_an_auto_patience_outwaits_the_bump_of_a_curve_that_keeps_falling():
    # a ten-minute run on 3.9 million characters of LibreOffice's help (docs/benchmarks.md): best 4.0279 at step 850,
    # then 4.0363 and 4.0334, then 3.9658 at step 1,000 and still falling at its last step. Its plan on a 2-core CPU
    # was 1,700-2,900 steps; a twentieth of that (2 evaluations) would have ended it at step 950 of 2,833
    auto = load_config(TINY, [*BUDGET, "--train.patience=auto", "--train.eval_interval=50"])
    for plan in (1_700, 2_833):
        cfg = replace(auto, train=replace(auto.train, max_steps=plan, patience=auto_patience(plan, 50)))
        assert not stops_early(cfg, step=950, evals_since_best=2), plan


def test_the_budget_plans_the_patience_and_a_fixed_step_count_is_never_cut():
    cfg = load_config(TINY, [*BUDGET, "--train.patience=auto"])
    assert "train.patience" in cfg.auto and cfg.train.patience == 0  # a placeholder until planned
    values, why = plan_settings(cfg, train_tokens=10_000, world=1, seconds_per_micro_step=lambda dropout: 0.09)
    assert values == {"train.max_steps": 288, "train.patience": 3} and "train.patience=3" in why  # 28.8 steps / 10
    fixed = load_config(TINY, ["--train.max_steps=500", "--train.patience=auto"])
    assert plan_settings(fixed, 10_000, 1, None)[0] == {"train.patience": 0}
    assert planned_patience(load_config(TINY, [*BUDGET, "--train.patience=4"]), 5000) == {}  # by hand: kept
    assert "train.patience" in load_config(ROOT / "configs" / "small.toml", []).auto  # the default run's


def test_auto_stops_only_past_the_warm_up_and_the_first_fifth_of_the_plan():
    cfg = load_config(TINY, [*BUDGET, "--train.patience=auto", "--train.warmup_steps=50"])
    cfg = replace(cfg, train=replace(cfg.train, max_steps=1000, patience=3))  # as a plan of 1,000 steps sets it
    assert not stops_early(cfg, step=150, evals_since_best=5)  # before 20% of 1,000 planned steps
    assert not stops_early(cfg, step=250, evals_since_best=2)  # not yet 3 evaluations
    assert stops_early(cfg, step=200, evals_since_best=3)
    by_hand = load_config(TINY, ["--train.max_steps=1000", "--train.patience=3", "--train.warmup_steps=50"])
    assert stops_early(by_hand, step=40, evals_since_best=3)  # a number by hand stops where it says
    assert not stops_early(load_config(TINY, ["--train.max_steps=1000"]), step=900, evals_since_best=50)  # 0: never


def test_the_stop_line_says_where_best_is_and_what_stopping_saved():
    cfg = load_config(TINY, [*BUDGET])
    tc = replace(cfg.train, max_steps=2937, patience=6)
    line = stop_line(tc, step=900, best_step=550, evals=7, seconds_per_step=0.19)  # a plan that shrank: 7 of 6
    assert line == ("early stop: no better val loss in 7 evaluations since step 550 (best/); stopped at step 900 of "
                    "2,937 planned, about 6.5 minutes of train.time_budget")


def test_overfitting_takes_a_second_climbing_evaluation_above_best_with_a_train_loss_far_below():
    tc = load_config(TINY, []).train
    # the built-in corpus (docs/benchmarks.md): best/ 5.1730 at step 550, then 5.1995 at 600 and 5.2163 at 650
    said = overfitting(tc, {"val": 5.2163, "train": 2.6576}, previous_val=5.1995, best_val=5.1730, evals_since_best=2)
    assert said == "val loss 5.1995, then 5.2163 (0.84% above best/'s), with the train loss 2.6576 49% below it"
    assert overfitting(tc, {"val": 5.1995, "train": 2.80}, 5.1730, 5.1730, evals_since_best=1) == ""  # one is not two
    # seed 7: best/ 5.2252 at 450, then 5.2500 and 5.2427, then 5.2063 at 600: the second fell back
    assert overfitting(tc, {"val": 5.2427, "train": 3.0209}, 5.2500, 5.2252, evals_since_best=2) == ""
    assert overfitting(tc, {"val": 5.1850, "train": 2.66}, 5.1800, 5.1775, evals_since_best=2) == ""  # 0.14% up
    assert overfitting(tc, {"val": 4.0363, "train": 4.063}, 4.0300, 4.0279, evals_since_best=2) == ""  # no gap
    assert overfitting(replace(tc, best_by="copy_loss"), {"val": 5.2163, "train": 2.6576}, 5.1995, 5.1730, 2) == ""


def test_auto_stops_at_the_first_evaluation_that_overfits_and_a_number_by_hand_waits():
    cfg = load_config(TINY, [*BUDGET, "--train.patience=auto", "--train.warmup_steps=50"])
    cfg = replace(cfg, train=replace(cfg.train, max_steps=1456, patience=auto_patience(1456, 50)))  # 3 evaluations
    assert stops_early(cfg, step=600, evals_since_best=1, overfit="val loss ...")
    assert not stops_early(cfg, step=600, evals_since_best=1)
    assert not stops_early(cfg, step=250, evals_since_best=1, overfit="val loss ...")  # in the plan's first fifth
    by_hand = load_config(TINY, ["--train.max_steps=1456", "--train.patience=3"])
    assert not stops_early(by_hand, step=600, evals_since_best=1, overfit="val loss ...")
    fixed = load_config(TINY, ["--train.max_steps=1456", "--train.patience=auto"])
    assert not stops_early(replace(fixed, train=replace(fixed.train, patience=0)), 600, 1, "val loss ...")


@pytest.mark.parametrize("curve, plan, stop", [
    # (step, train loss, val loss) of ten-minute default runs (docs/benchmarks.md). The built-in corpus, seed 1337:
    ([(400, 3.4249, 5.2120), (450, 3.2392, 5.1868), (500, 3.0846, 5.1925), (550, 2.9367, 5.1730),
      (600, 2.7997, 5.1995), (650, 2.6576, 5.2163), (700, 2.5455, 5.2351)], 1_602, (650, 550)),
    # seed 7, whose bumps at 400 and 500-550 came before better best/s:
    ([(350, 3.7035, 5.2367), (400, 3.5220, 5.2642), (450, 3.3422, 5.2252), (500, 3.1620, 5.2500),
      (550, 3.0209, 5.2427), (600, 2.8881, 5.2063), (650, 2.7758, 5.2168), (700, 2.6868, 5.2357),
      (750, 2.5938, 5.2280)], 1_616, (700, 600)),
    # 3.9 million characters of LibreOffice's help, whose loss fell to its last step:
    ([(750, 4.182, 4.1220), (800, 4.137, 4.0960), (850, 4.111, 4.0279), (900, 4.063, 4.0363), (950, 4.038, 4.0334),
      (1000, 3.988, 3.9658), (1050, 3.926, 3.9400)], 2_833, None),
], ids=["built-in", "built-in seed 7", "3.9M characters"])  # fmt: skip
def test_recorded_curves_stop_where_memorizing_begins_and_not_at_a_bump(curve, plan, stop):
    auto = load_config(TINY, [*BUDGET, "--train.patience=auto", "--train.eval_interval=50"])
    cfg = replace(auto, train=replace(auto.train, max_steps=plan, patience=auto_patience(plan, 50)))  # 4 or 6
    best, best_step, previous, since, stopped = math.inf, 0, math.inf, 0, None
    for step, train, val in curve:  # as train.py's evaluate_and_save keeps best/
        best, best_step, since = (val, step, 0) if val < best else (best, best_step, since + 1)
        overfit = overfitting(cfg.train, {"val": val, "train": train}, previous, best, since)
        if stops_early(cfg, step, since, overfit):
            stopped = (step, best_step)
            break
        previous = val
    assert stopped == stop


def test_the_stop_line_says_the_model_is_memorizing():
    tc = replace(load_config(TINY, [*BUDGET]).train, max_steps=1456, patience=3)
    said = "val loss 5.1995, then 5.2163 (0.84% above best/'s), with the train loss 2.6576 49% below it"
    assert stop_line(tc, step=650, best_step=550, evals=2, seconds_per_step=0.33, overfit=said) == (
        f"early stop: {said}: the model is learning its training text by heart; best/ is step 550; stopped at step "
        "650 of 1,456 planned, about 4.4 minutes of train.time_budget")
