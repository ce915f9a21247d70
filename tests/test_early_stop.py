"""train.patience, by hand or "auto" (training/early_stop.py): when a run ends before its last step.

    python -m pytest tests/test_early_stop.py -q
"""

from dataclasses import replace

from training.config import load_config
from training.early_stop import auto_patience, planned_patience, stop_line, stops_early
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
