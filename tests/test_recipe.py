"""training/recipe.py and the "auto" settings: the rule's numbers, the time budget (training/budget.py), resume,
the config."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch

import train
from data.config import DataConfig, auto_vocab_size
from data.prepare import prepare
from training.config import ConfigError, load_config
from cli.messages import use_language
from training.recipe import parse_duration, plan_line, plan_settings, regularisation, resolve_auto, resolved_values, steps_in
from model.nll import windows_read
from tests.conftest import ROOT, TINY, hooked_train, planned, tiny
from training.budget import TimeBudget


AUTO_ALL = ["--train.batch_size=auto", "--train.lr=auto", "--train.min_lr=auto", "--train.weight_decay=auto", "--model.dropout=auto"]


@pytest.mark.parametrize("text, seconds", [("10m", 600), ("90s", 90), ("1h30m", 5400), ("2.5m", 150), ("45", 45),
                                           (" 1h ", 3600), ("1m30s", 90)])  # fmt: skip
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("given, kept, seconds", [("90", "90s", 90), ("2.5", "2.5s", 2.5), ("1000000", "1000000s", 1e6),
                                                  ("10m", "10m", 600)])  # fmt: skip
def test_a_time_budget_can_be_a_bare_number_of_seconds(given, kept, seconds):
    cfg = load_config(TINY, ["--train.max_steps=auto", f"--train.time_budget={given}"])
    assert cfg.train.time_budget == kept and parse_duration(cfg.train.time_budget) == seconds


@pytest.mark.parametrize("text", ["", "10x", "m", "0s", "-5", "5 m", "1s1h"])
def test_parse_duration_refuses(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_regularisation_at_the_ends_and_between():
    few = {"batch_size": 8, "lr": 1e-3, "min_lr": 1e-4, "dropout": 0.0, "weight_decay": 0.3}
    many = {"batch_size": 16, "lr": 3e-4, "min_lr": 3e-5, "dropout": 0.2, "weight_decay": 0.5}
    assert regularisation(0.3) == regularisation(8.0) == few  # up to 8 passes: small steps, no dropout
    assert regularisation(64.0) == regularisation(500.0) == many  # the built-in corpus for ten minutes
    # the batch moves first, between 8 and 14 passes: halfway on their log scale, sqrt(8 x 14) = 10.58 passes,
    # it is sqrt(8 x 16) = 11.3; the rest has not moved yet, and at 14 and 16 passes only the batch has
    assert regularisation(10.583) == {**few, "batch_size": 11}
    assert regularisation(14.0) == regularisation(16.0) == {**few, "batch_size": 16}
    middle = regularisation(32.0)  # halfway on the log scale between 16 and 64 passes: sqrt(1e-3 * 3e-4)
    assert middle == {"batch_size": 16, "lr": 0.000548, "min_lr": 5.48e-05, "dropout": 0.1, "weight_decay": 0.4}


def test_steps_in_counts_the_evaluations():
    assert steps_in(600, 0.5, eval_every=50, seconds_per_eval=5.0) == 1000  # 0.5 s + 5 s / 50 a step
    assert steps_in(1, 10.0, eval_every=50, seconds_per_eval=0.0) == 1  # at least one


def test_auto_vocab_size_grows_with_the_training_text():
    assert auto_vocab_size(57_006) == 2048  # the built-in corpus
    assert auto_vocab_size(299_999) == 2048 and auto_vocab_size(300_000) == 4096
    assert auto_vocab_size(50_000_000) == 4096  # larger was not measured


def test_plan_settings_keys_on_the_passes_over_the_text():
    cfg = load_config(TINY, ["--train.max_steps=1000", "--train.batch_size=8", *AUTO_ALL[1:]])  # 8 x 16 = 128 tokens a step
    values, why = planned(cfg, train_tokens=2000, world=1, seconds_per_micro_step=lambda dropout: pytest.fail("no timing"))
    assert values == {"train.lr": 3e-4, "train.min_lr": 3e-5, "train.weight_decay": 0.5, "model.dropout": 0.2}  # 64 passes
    assert "64 passes over 2,000 training tokens" in why
    _, reasons = plan_settings(cfg, train_tokens=2000, world=1, seconds_per_micro_step=None)  # the plan says no language
    assert reasons == [("train.auto_passes", {"steps": "1,000", "tokens": "128", "epochs": "64",
                                              "train_tokens": "2,000"})]
    use_language("ko")  # train.py --lang ko: the reasons said in Korean, with the same numbers
    line = plan_line(values, reasons)
    assert "2,000" in line and "64" in line and re.search("[가-힣]", line), line
    values, _ = plan_settings(cfg, train_tokens=16_000, world=2, seconds_per_micro_step=None)  # 16 passes on 2 ranks
    assert values == {"train.lr": 1e-3, "train.min_lr": 1e-4, "train.weight_decay": 0.3, "model.dropout": 0.0}
    given_lr = load_config(TINY, ["--train.max_steps=10", "--train.lr=2e-3", "--train.min_lr=auto"])
    assert plan_settings(given_lr, 3200, 1, None)[0] == {"train.min_lr": 2e-4}  # the floor follows a given lr


def test_plan_settings_fits_the_steps_to_the_budget():
    cfg = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=1m", "--train.eval_interval=10",
                             "--train.eval_iters=3"])  # fmt: skip
    values, why = planned(cfg, train_tokens=10_000, world=1, seconds_per_micro_step=lambda dropout: 0.09)
    # a step 0.09 s; an evaluation 2 x 3 x 0.09 / 3 + 1 = 1.18 s, every 10 steps: 0.208 s a step, 288 in 60 s
    assert values == {"train.max_steps": 288} and "288 steps fit in 1m" in why


def test_an_auto_batch_size_cuts_the_same_tokens_finer_at_few_passes():
    budget = ["--train.max_steps=auto", "--train.time_budget=1m", "--train.eval_interval=10", "--train.eval_iters=3"]
    cfg = load_config(TINY, [*budget, "--train.batch_size=auto"])
    assert cfg.train.batch_size == 16  # the placeholder the timing runs at
    values, why = planned(cfg, train_tokens=10_000, world=1, seconds_per_micro_step=lambda dropout: 0.08)
    # at 16: 0.08 s + (2 x 3 x 0.08 / 3 + 1) / 10 = 0.196 s a step, 306 steps x 256 tokens = 7.8 passes: batch 8,
    # whose steps take 0.04 s + (2 x 3 x 0.04 / 3 + 1) / 10 = 0.148 s: 405 steps
    assert values == {"train.max_steps": 405, "train.batch_size": 8} and "405 steps x 128 tokens" in why
    values, _ = plan_settings(cfg, train_tokens=1_000, world=1, seconds_per_micro_step=lambda dropout: 0.08)
    assert values == {"train.max_steps": 306, "train.batch_size": 16}  # 78 passes: the batch stays
    # with the steps given, the passes grow with the batch: 1,000 steps x 16 tokens x b over 200,000 tokens
    # is 0.08 b passes, under 8 for every b from 8 to 16, so 8; over 2,000 tokens 8 b: 16 (128 passes)
    fixed = load_config(TINY, ["--train.max_steps=1000", "--train.batch_size=auto"])
    assert plan_settings(fixed, 200_000, 1, None)[0] == {"train.batch_size": 8}
    assert plan_settings(fixed, 2_000, 1, None)[0] == {"train.batch_size": 16}
    assert plan_settings(fixed, 12_800, 1, None)[0] == {"train.batch_size": 16}  # 20 passes at 16
    # over 20,000 tokens: 16 gives 12.8 passes, whose rule says 8 x 2^(log(1.6) / log(1.75)) = 14.3; 14 gives
    # 11.2 passes, whose rule says 12.2; each batch down to 9 asks for less than itself; 8 is the largest that agrees
    assert plan_settings(fixed, 20_000, 1, None)[0] == {"train.batch_size": 8}


def test_a_dropout_the_plan_turns_on_is_timed_before_the_steps_are_counted():
    cfg = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=1m", "--train.eval_interval=10",
                             "--train.eval_iters=3", "--train.batch_size=auto", "--model.dropout=auto"])  # fmt: skip
    timed = []

    def timing(dropout):  # steps with dropout on take twice as long here
        timed.append(dropout)
        return 0.09 if dropout == 0 else 0.18

    values, why = planned(cfg, train_tokens=1_000, world=1, seconds_per_micro_step=timing)
    # at 0.09 s (batch 16, the placeholder): 288 steps x 256 tokens = 73.7 passes, past the many-passes end, so
    # dropout 0.2 is timed: 0.18 s + (2 x 3 x 0.18 / 3 + 1) / 10 = 0.316 s a step, 189 steps, 48.4 passes: dropout 0.16
    assert timed == [0.0, 0.2]
    assert values == {"train.max_steps": 189, "train.batch_size": 16, "model.dropout": 0.16} and "0.18 s a step" in why
    # over 100,000 tokens the 288 steps are 0.74 passes: no dropout, so no second timing, and batch 8, whose
    # steps take 0.045 s + (2 x 3 x 0.045 / 3 + 1) / 10 = 0.154 s: 389 of them
    timed.clear()
    assert plan_settings(cfg, 100_000, 1, timing)[0] == {"train.max_steps": 389, "train.batch_size": 8, "model.dropout": 0.0}
    assert timed == [0.0]


def test_config_takes_auto_only_where_the_recipe_resolves_it(tmp_path):
    cfg = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=10m", *AUTO_ALL])
    assert set(cfg.auto) == {"train.max_steps", "train.batch_size", "train.lr", "train.min_lr", "train.weight_decay",
                             "model.dropout"}
    assert load_config(TINY).auto == ()
    with pytest.raises(ConfigError, match=r'train.max_steps = "auto" needs train.time_budget'):
        load_config(TINY, ["--train.max_steps=auto"])
    with pytest.raises(ConfigError, match=r"train.warmup_steps = 'auto' must be an integer"):
        load_config(TINY, ["--train.warmup_steps=auto"])
    with pytest.raises(ConfigError, match=r'train.time_budget = "ten minutes".*like "10m"'):
        load_config(TINY, ["--train.time_budget=ten minutes"])


def test_auto_vocabulary_is_resolved_before_the_cache_is_named(data_cache):
    auto = prepare(DataConfig(vocab_size="auto", cache_dir=str(data_cache)), verbose=False)
    given = prepare(DataConfig(vocab_size=2048, cache_dir=str(data_cache)), verbose=False)
    assert auto.dir == given.dir and auto.meta["vocab_size"] == 2048  # 57,006 training characters
    assert auto.meta["data"]["vocab_size"] == 2048


def test_auto_settings_are_resolved_printed_and_saved(tmp_path, data_cache, capsys):
    final = train.train(tiny(data_cache, *AUTO_ALL), tmp_path / "run")
    out = capsys.readouterr().out
    # 20 steps x 16 x 16 tokens over the 37,696 training tokens: far under 16 passes, so the few-passes end
    assert ("auto: train.batch_size=8 train.lr=0.001 train.min_lr=0.0001 train.weight_decay=0.3 model.dropout=0.0 "
            "(20 steps x 128 tokens") in out
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["train"]["lr"], config["train"]["min_lr"], config["train"]["weight_decay"]) == (1e-3, 1e-4, 0.3)
    assert config["model"]["dropout"] == 0.0 and config["train"]["batch_size"] == 8
    assert set(config["auto"]) == {"train.batch_size", "train.lr", "train.min_lr", "train.weight_decay", "model.dropout"}
    assert final["step"] == 20


def test_max_steps_wins_over_the_time_budget(tmp_path, data_cache):
    final = train.train(tiny(data_cache, "--train.max_steps=7", "--train.time_budget=1s"), tmp_path / "run")
    assert final["step"] == 7


@pytest.mark.slow
def test_a_time_budget_plans_the_steps_and_ends_the_schedule_with_it(tmp_path, data_cache, capsys):
    budget = 10.0  # 3 s of it are kept for the plot and the exit
    cfg = tiny(data_cache, "--train.max_steps=auto", f"--train.time_budget={budget}s", "--train.sample_tokens=0")
    final = train.train(cfg, tmp_path / "run")
    out = capsys.readouterr()
    planned = json.loads((tmp_path / "run" / "config.json").read_text())["train"]["max_steps"]
    assert "plan: " in out.err + out.out
    assert final["step"] == planned > 20  # the run ends where the second plan put the end of the schedule
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last_logged = [r for r in records if "lr" in r][-1]
    peak, floor = cfg.train.lr, cfg.train.min_lr
    assert last_logged["step"] == final["step"] and (last_logged["lr"] - floor) / (peak - floor) < 0.05  # decayed
    assert 0.5 * budget < final["budget_used_s"] < 2 * budget  # the plan is a measurement, so only roughly


def test_a_plan_keeps_the_last_evaluation_and_the_final_scoring_out_of_the_steps():
    # 100.25 s budget, 40 s used (30 by this process, 10 by the one before it); 20 steps in the last 10 s
    # (0.5 s a step, evaluations spread over them); kept back: the whole last evaluation (3 s), the final
    # scoring of best/ and last/ (1,009 val tokens in 125 windows of 16 every 8 = 2,000 tokens read, twice,
    # x 1 ms: 4 s), and 3 s for the plot and the exit. Left: 100.25 - 40 - 3 - 4 - 3 = 50.25 s, 100 more
    # steps after the 120 done.
    assert windows_read(1_009, 16) == 2_000
    now = time.perf_counter()
    budget = TimeBudget("100.25s", started=now - 30.0, spent_before=10.0, final_read=windows_read(1_009, 16))
    budget.t_plan, budget.plan_step = now - 10.0, 100
    budget.evaluated(seconds=3.0, scoring_seconds=0.5, tokens=500)  # 1 ms a scored token
    assert budget.steps_that_fit(120) == 120 + 100
    assert budget.seconds_per_step == pytest.approx(0.5, rel=1e-3)


@pytest.mark.slow
def test_a_resumed_auto_run_keeps_the_values_its_start_chose(tmp_path, data_cache):
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.max_steps=auto",
            "--train.time_budget=10s", "--train.sample_tokens=0", *AUTO_ALL, "--out", str(tmp_path / "run")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.run(hooked_train(args, "--signal-after", "25:TERM"), cwd=ROOT, env=env, capture_output=True,
                           text=True)  # fmt: skip
    assert first.returncode == 143, first.stderr[-2000:]
    chosen = json.loads((tmp_path / "run" / "last" / "config.json").read_text())
    assert chosen["step"] == 25
    second = subprocess.run([sys.executable, "train.py", *args, "--resume"], cwd=ROOT, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "auto:" not in second.stdout  # nothing planned again
    final = json.loads((tmp_path / "run" / "config.json").read_text())
    for section, key in [("train", "batch_size"), ("train", "lr"), ("train", "min_lr"), ("train", "weight_decay"), ("model", "dropout")]:
        assert final[section][key] == chosen[section][key], key
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["step"] == final["train"]["max_steps"] > 25  # it went on to the end its plans set
    assert 5 < last["budget_used_s"] < 20  # both processes together, about the 10 s budget


def test_a_cpu_run_compiles_when_a_timed_trial_says_the_budget_buys_more_steps():
    cfg = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=30m", "--train.eval_interval=100",
                             "--train.eval_iters=10", "--train.compile=auto"])  # fmt: skip
    eager = lambda dropout: 0.1  # noqa: E731
    # eager: 0.1 s + (2 x 10 x 0.1 / 3 + 1) / 100 = 0.11667 s a step, 15,428 in 1,800 s; compiled after 20 s of
    # compilation: 0.08 + (2 x 10 x 0.08 / 3 + 1) / 100 = 0.09533 s a step, 18,671 in the 1,780 s left: 1.21x
    values, why = planned(cfg, 10_000, 1, eager, compiled_trial=lambda dropout: (20.0, 0.08))
    assert values == {"train.max_steps": 18671, "train.compile": "on"} and "compile on: 1.21x the steps" in why
    # a slow compilation for little gain: 0.098 + (0.6533 + 1) / 100 = 0.11453 s a step, 15,192 in 1,740 s: 0.98x
    values, why = planned(cfg, 10_000, 1, eager, compiled_trial=lambda dropout: (60.0, 0.098))
    assert values == {"train.max_steps": 15428, "train.compile": "off"} and "compile off: 0.98x" in why
    values, why = planned(cfg, 10_000, 1, eager, compiled_trial=lambda dropout: None)  # it failed to compile
    assert values == {"train.max_steps": 15428, "train.compile": "off"} and "trial compilation failed" in why
    short = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=10m", "--train.compile=auto"])
    values, _ = plan_settings(short, 10_000, 1, eager, compiled_trial=lambda dropout: pytest.fail("no trial under 20 minutes"))
    assert "train.compile" not in values


def test_on_a_gpu_evaluations_take_a_tenth_of_the_time_and_a_compiled_run_plans_with_its_compile():
    cfg = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=10m", "--train.eval_interval=50",
                             "--train.eval_iters=10", "--train.compile=auto"])  # fmt: skip
    eager = lambda dropout: 0.003  # noqa: E731  (3 ms a step: a small model on a GPU)
    # a CPU: an evaluation (2 x 10 x 0.003 / 3 + 1 = 1.02 s) every 50 steps: 600 / (0.003 + 1.02 / 50) = 25,641
    assert plan_settings(cfg, 10_000, 1, eager)[0] == {"train.max_steps": 25641}
    # a GPU, eager: every ceil(1.02 / (0.1 x 0.003)) = 3,400 steps instead, 600 / (0.003 + 1.02 / 3400) = 181,818
    off = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=10m", "--train.eval_interval=50",
                             "--train.eval_iters=10", "--train.compile=off"])  # fmt: skip
    values, why = planned(off, 10_000, 1, eager, gpu=True)
    assert values == {"train.max_steps": 181818, "train.eval_interval": 3400}
    assert "an evaluation every 3,400 steps, about 10% of the time on this GPU" in why
    # compiled in 60 s, then 2 ms a step: an evaluation (1.0133 s) every 5,067 steps, 540 / (0.002 + 1.0133 / 5067)
    # = 245,456 steps in the 540 s the compilation leaves, 1.35 times the eager steps
    values, why = planned(cfg, 10_000, 1, eager, compiled_trial=lambda dropout: (60.0, 0.002), gpu=True)
    assert values == {"train.max_steps": 245456, "train.compile": "on", "train.eval_interval": 5067}
    assert "compile on: 1.35x the steps" in why
    on = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=10m", "--train.eval_interval=50",
                            "--train.eval_iters=10", "--train.compile=on"])  # fmt: skip
    values, _ = plan_settings(on, 10_000, 1, eager, compiled_trial=lambda dropout: (60.0, 0.002), gpu=True)
    assert values == {"train.max_steps": 245456, "train.eval_interval": 5067}  # "on" as asked, its compile counted
    # a Colab T4 with a 2-minute budget and 150 s of compilation: eager, 120 / (0.03 + 1.2 / 400) = 3,636 steps
    short = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=2m", "--train.eval_interval=50",
                               "--train.eval_iters=10", "--train.compile=auto"])  # fmt: skip
    values, _ = plan_settings(short, 10_000, 1, lambda dropout: 0.03, compiled_trial=lambda dropout: (150.0, 0.02),
                              gpu=True)  # fmt: skip
    assert values == {"train.max_steps": 3636, "train.compile": "off", "train.eval_interval": 400}


def test_a_run_planned_on_a_gpu_times_its_compiled_step_and_spaces_its_evaluations(data_cache, monkeypatch, capsys):
    """resolve_auto on a stand-in GPU (tests/fake_device.py; torch.compile stubbed, so the "compiled" copy is timed
    eager): the trial runs though the budget is 10 minutes, and eval_interval grows past 10, its value a setting
    the run chose (a resume takes it back)."""
    from training.distributed import Distributed
    from tests.fake_device import stand_in_cuda

    monkeypatch.setattr(torch, "compile", lambda model: model)
    cfg = load_config(TINY, [f"--data.cache_dir={data_cache}", "--train.max_steps=auto", "--train.time_budget=10m",
                             "--train.compile=auto", "--train.threads=1", "--train.device=cuda"])  # fmt: skip
    with stand_in_cuda():
        device = torch.device("cuda", 0)
        resolved = resolve_auto(cfg, {"splits": {"train": {"tokens": 100_000}}}, None, device,
                                torch.autocast("cuda", enabled=False), Distributed("cuda"))
    out = capsys.readouterr().out
    assert "compile on" in out or "compile off" in out  # the trial ran and decided
    assert resolved.train.eval_interval > cfg.train.eval_interval == 10
    assert {"train.eval_interval", "train.compile"} <= set(resolved.auto)
    assert resolved_values(resolved)["train.eval_interval"] == resolved.train.eval_interval


def test_a_trial_compilation_out_of_gpu_memory_is_not_taken_for_a_compiler_that_failed(data_cache, monkeypatch):
    """The CPU's trial with torch.compile stubbed to run out of memory as a GPU would: no "compile off" and a
    run planned eager, but the out-of-memory error itself, which cli/command.py prints as its one line."""
    from training.distributed import Distributed

    def compile_out_of_memory(model):
        def forward(*args, **kwargs):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB.")

        return forward

    monkeypatch.setattr(torch, "compile", compile_out_of_memory)
    cfg = load_config(TINY, [f"--data.cache_dir={data_cache}", "--train.max_steps=auto", "--train.time_budget=30m",
                             "--train.compile=auto", "--train.threads=1"])  # fmt: skip
    autocast = torch.autocast("cpu", enabled=False)
    with pytest.raises(torch.OutOfMemoryError):
        resolve_auto(cfg, {"splits": {"train": {"tokens": 100_000}}}, None, torch.device("cpu"), autocast,
                     Distributed("cpu"))


def test_a_resume_compiles_as_its_start_did():
    cfg = load_config(TINY, ["--train.max_steps=auto", "--train.time_budget=10m", "--train.compile=auto"])
    chosen = {"train.max_steps": 900, "train.compile": "on"}  # what the start's trial decided, in its train state
    resumed = resolve_auto(cfg, meta={}, saved={"resolved": chosen}, device=None, autocast=None, ddp=None)
    assert resumed.train.compile == "on" and resolved_values(resumed) == chosen  # and the next save keeps it
