"""train.patience, by hand or "auto" (training/early_stop.py): when a run ends before its last step.

    python -m pytest tests/test_early_stop.py -q
"""

import math
from dataclasses import replace

import pytest

from cli.messages import use_language
from training.config import load_config
from training.early_stop import auto_patience, planned_patience, stop_line, stops_early
from training.recipe import plan_settings
from tests.conftest import ROOT, planned


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
    values, why = planned(cfg, train_tokens=10_000, world=1, seconds_per_micro_step=lambda dropout: 0.09)
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
    # in Korean the measure is named as every Korean text names it, 검증 loss (not "val loss")
    use_language("ko")  # train.py --lang ko
    ko = stop_line(tc, step=900, best_step=550, evals=7, seconds_per_step=0.19)
    assert ko.startswith("조기 종료: 검증 loss: step 550(best/) 이후 평가 7번 동안 나아지지 않았습니다;"), ko
    copy = stop_line(replace(tc, best_by="copy_loss"), step=900, best_step=550, evals=7, seconds_per_step=0.19)
    assert "복사본 loss" in copy and "copy" not in copy


# The validation loss at every 50 steps of two whole ten-minute default runs (bench/stop_rule.py run; the curves in
# docs/stopping.md). A quarter of the LibreOffice help (237,121 characters), whose loss rose from step 2,000 to 2,100
# and then fell for 1,250 more steps, where the stop for "memorizing" that this rule replaced lost 0.044 bits/char:
QUARTER_HELP = [
    6.4275, 5.7974, 5.4293, 5.1388, 4.9426, 4.7889, 4.6637, 4.5742, 4.5064, 4.4234, 4.397, 4.3504, 4.3156,
    4.2776, 4.2396, 4.2055, 4.1689, 4.1618, 4.1304, 4.0958, 4.0834, 4.0815, 4.0505, 4.0256, 3.9958, 3.9771,
    3.9762, 3.9446, 3.9357, 3.9343, 3.9181, 3.901, 3.9012, 3.8917, 3.8648, 3.8648, 3.8503, 3.8542, 3.8417,
    3.8454, 3.8482, 3.8576, 3.8373, 3.8183, 3.8276, 3.825, 3.8168, 3.8237, 3.7967, 3.7956, 3.7872, 3.8062,
    3.7997, 3.7954, 3.7876, 3.7779, 3.7875, 3.7887, 3.7862, 3.7902, 3.7927, 3.7861, 3.782, 3.7958, 3.8012,
    3.796, 3.7764, 3.7916, 3.8071, 3.785, 3.8036, 3.7909, 3.7981, 3.785, 3.7865, 3.7935, 3.7896, 3.7985, 3.8034,
    3.8065
]
# the built-in corpus, which the model learns by heart after step 450:
BUILT_IN = [
    6.4774, 6.0102, 5.6937, 5.4991, 5.3517, 5.2797, 5.2546, 5.2123, 5.1835, 5.1971, 5.1869, 5.213, 5.2559,
    5.2545, 5.3048, 5.3654, 5.422, 5.4008, 5.3953, 5.4409
]


@pytest.mark.parametrize("curve, plan, stop", [(QUARTER_HELP, 5_329, (3_900, 3_350)), (BUILT_IN, 4_511, (950, 450))],
                         ids=["quarter of the help", "built-in"])
def test_recorded_curves_stop_a_tenth_of_the_plan_after_their_best_and_not_at_a_rise(curve, plan, stop):
    auto = load_config(TINY, [*BUDGET, "--train.patience=auto", "--train.eval_interval=50", "--train.warmup_steps=50"])
    cfg = replace(auto, train=replace(auto.train, max_steps=plan, patience=auto_patience(plan, 50)))  # 11 and 10
    best, best_step, since, stopped = math.inf, 0, 0, None
    for i, val in enumerate(curve):  # as train.py's evaluate_and_save keeps best/
        step = 50 * (i + 1)
        best, best_step, since = (val, step, 0) if val < best else (best, best_step, since + 1)
        if stops_early(cfg, step, since):
            stopped = (step, best_step)
            break
    assert stopped == stop
