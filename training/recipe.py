"""The "auto" settings: a learning rate, regularisation, batch size and step count that fit the corpus and the time.

    cfg = resolve_auto(cfg, meta, saved, device, autocast, ddp)   # training/setup.py: every "auto" setting filled in
    cfg = replan(cfg, max_steps=1800)                        # a time budget's new plan, at an evaluation
    seconds = parse_duration("10m")                          # 600.0
    settings = regularisation(epochs=40.0)                   # {"lr": ..., "min_lr": ..., "dropout": ..., ...}
    steps = steps_in(seconds, seconds_per_step=0.5, eval_every=50, seconds_per_eval=3.0)

The rule keys on one number: the planned passes over the training tokens (epochs = steps x tokens per
step / training tokens). A run that sees its text once or twice overfits little and wants a high learning
rate, no dropout and light weight decay; a run that sees it a hundred times (the built-in corpus in ten
minutes) memorises it unless it is regularised hard. Between the two ends every setting moves on a log
scale of the epochs. The batch size moves sooner, between ends of its own: at a few passes a smaller batch
(more steps over the same tokens) learns more, and from about ten passes it overfits first. The ends were
measured, each setting against the others at equal time; docs/recipe.md holds the figures.

With `train.time_budget` and `max_steps = "auto"` the step count is planned before the first step from a
few timed optimisation steps (that estimate also sets the epochs above; a dropout above 0 is timed with it
on), then again at every evaluation from the run's own time per step since the last plan (evaluations and
saves included), so the cosine schedule ends when the budget does even if the machine slows down. A
plan during warmup changes nothing used yet (the learning rate only starts to fall after it); a later
one moves the end of the decay a little.

`train.compile = "auto"` on a CPU is decided by that trial too: when the budget is at least
COMPILE_TRIAL_FROM (20 minutes), a throwaway copy at the run's final dropout is compiled and timed, and the run compiles
if the steps that fit after the compile time beat the eager steps by COMPILE_GAIN. The copy's compilation
fills torch's compile cache, so the run's own compile of the same graph takes seconds. A shorter budget or
a fixed step count (a smoke run) stays eager: there is no budget to weigh the compile time against.

On a GPU, whose runs compile by default, the trial runs at any budget: its compile time (minutes on a Colab T4)
comes out of the budget and its step time plans the steps, and "auto" stays eager where compiling does not pay
within the budget. There a step takes milliseconds and an evaluation about a second, so train.eval_interval
grows, where needed, until the evaluations take about EVAL_SHARE of the time.
"""

import math
import re
import time
from dataclasses import asdict, replace

import torch

from cli.command import is_out_of_memory
from cli.messages import messages
from model import GPT
from model.speed import speed_up
from training.early_stop import planned_patience
from training.hardware import compiles, fused_adamw

# The two ends of the rule: (epochs, settings). Below the first every setting is the first's, above the
# second the second's; in between each moves linearly in log(epochs), the learning rates geometrically.
FEW_EPOCHS = (16.0, {"lr": 1e-3, "dropout": 0.0, "weight_decay": 0.3})
MANY_EPOCHS = (64.0, {"lr": 3e-4, "dropout": 0.2, "weight_decay": 0.5})
# The batch size's own ends, (epochs, batch), geometric in between: at a few passes more, smaller steps learn
# more from the same tokens (a budget buys the same tokens at either batch); from about 10 passes the
# smaller batch starts to overfit first (docs/recipe.md).
FEW_EPOCHS_BATCH, MANY_EPOCHS_BATCH = (8.0, 8), (14.0, 16)
MIN_LR_RATIO = 0.1  # the cosine floor, as a share of the peak learning rate
# A compilation takes tens of seconds on a new machine and may not pay (docs/speed.md): a trial that loses
# costs its compilation, so it is run only where that is a small share of the budget
COMPILE_TRIAL_FROM = 1200.0  # seconds of time budget
COMPILE_GAIN = 1.05  # compile when the steps that fit grow by at least this factor (the timings' noise)
EVAL_SHARE = 0.1  # on a GPU: the share of a planned run's time its evaluations take, at most (eval_every)
AUTO = {"train": ("max_steps", "batch_size", "lr", "min_lr", "weight_decay", "patience"),  # which keys take "auto"
        "model": ("dropout",)}
DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
CALIBRATION_STEPS = 3  # timed forward and backward passes before the first step (after one untimed)


def parse_duration(text: str) -> float:
    """"10m", "90s", "1h30m", "2.5m" or a bare number of seconds -> seconds; ValueError otherwise."""
    text = text.strip().lower()
    match = DURATION.fullmatch(text)
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    elif text and match:
        hours, minutes, secs = (float(g or 0) for g in match.groups())
        seconds = 3600 * hours + 60 * minutes + secs
    else:
        raise ValueError(f"cannot read the duration {text!r}")
    if seconds <= 0:
        raise ValueError(f"the duration {text!r} is not positive")
    return seconds


def mix(epochs: float, few: float = FEW_EPOCHS[0], many: float = MANY_EPOCHS[0]) -> float:
    """Where `epochs` lies between two ends of the rule on a log scale: 0 at `few` or below, 1 at `many` or above."""
    low, high = math.log(few), math.log(many)
    return min(1.0, max(0.0, (math.log(max(epochs, 1e-9)) - low) / (high - low)))


def geometric(low: float, high: float, t: float) -> float:
    """The point a share `t` of the way from `low` to `high` on a log scale."""
    return math.exp((1 - t) * math.log(low) + t * math.log(high))


def regularisation(epochs: float) -> dict:
    """The learning rate, its floor, dropout, weight decay and batch size for `epochs` passes over the text."""
    t, few, many = mix(epochs), FEW_EPOCHS[1], MANY_EPOCHS[1]
    lr = geometric(few["lr"], many["lr"], t)
    batch = geometric(FEW_EPOCHS_BATCH[1], MANY_EPOCHS_BATCH[1], mix(epochs, FEW_EPOCHS_BATCH[0], MANY_EPOCHS_BATCH[0]))
    return {
        "batch_size": round(batch),
        "lr": float(f"{lr:.3g}"),
        "min_lr": float(f"{lr * MIN_LR_RATIO:.3g}"),
        "dropout": round((1 - t) * few["dropout"] + t * many["dropout"], 3),
        "weight_decay": round((1 - t) * few["weight_decay"] + t * many["weight_decay"], 3),
    }


def steps_in(seconds: float, seconds_per_step: float, eval_every: int, seconds_per_eval: float) -> int:
    """How many steps, with an evaluation every `eval_every` of them, fit in `seconds` (at least 1)."""
    per_step = seconds_per_step + seconds_per_eval / eval_every
    return max(1, int(seconds / per_step))


def time_training_step(model, batch_size: int, autocast, grad_clip: float, steps: int = CALIBRATION_STEPS,
                       compiled: bool = False) -> tuple[float, float]:
    """`(first, per_step)`: the seconds of the first optimisation step of one micro-batch on `model` (a
    throwaway copy, built at the dropout the run will train with: on a CPU dropout costs about a sixth of the
    speed), which holds the compilation when `compiled`, and the median of the `steps` after it, timed on
    random tokens: forward, backward, clipping and an AdamW step, as the loop does them. Draws from its own
    generator, so the run's RNGs are untouched."""
    device, T = model.tok_emb.weight.device, model.config.block_size
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused_adamw(device))
    model.train()
    step_model = torch.compile(model) if compiled else model  # as train.py compiles the model, not the step
    times = []
    for i in range(steps + 1):
        idx = torch.randint(model.config.vocab_size, (batch_size, T + 1), generator=generator).to(device)
        started = time.perf_counter()
        with autocast:
            loss = step_model(idx[:, :-1], idx[:, 1:], loss_only=True)[1]
        loss.backward()
        if grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    return times[0], sorted(times[1:])[len(times[1:]) // 2]


def evaluation_seconds(seconds_per_micro_step: float, eval_iters: int) -> float:
    """A first guess at one evaluation: 2 x eval_iters forward passes, each about a third of a training
    micro-step, and a second for the sample and the save. The second plan measures it instead."""
    return 2 * eval_iters * seconds_per_micro_step / 3 + 1.0


def eval_every(tc, per_micro: float, gpu: bool) -> int:
    """The steps between evaluations at `per_micro` seconds a micro-step: train.eval_interval; on a GPU, where a step
    takes milliseconds and an evaluation (its losses, sample, head roles and saves) about a second, more if that
    is what keeps the evaluations to EVAL_SHARE of the run's time."""
    if not gpu:
        return tc.eval_interval
    share = evaluation_seconds(per_micro, tc.eval_iters) / (EVAL_SHARE * per_micro * tc.grad_accum)
    return max(tc.eval_interval, math.ceil(share))


def fit_steps(seconds: float, tc, per_micro: float, gpu: bool) -> int:
    """The steps that fit in `seconds` at `per_micro` seconds a micro-step, with their evaluations (eval_every)."""
    return steps_in(seconds, per_micro * tc.grad_accum, eval_every(tc, per_micro, gpu),
                    evaluation_seconds(per_micro, tc.eval_iters))  # fmt: skip


def plan_settings(cfg, train_tokens: int, world: int, seconds_per_micro_step, compiled_trial=None,
                  gpu: bool = False) -> tuple[dict, list[tuple[str, dict]]]:
    """The values of cfg's "auto" settings ({"train.lr": ...}) and the reasons they were chosen, each a message key
    and its fields, in no language (`plan_line` says them).

    `seconds_per_micro_step(dropout)` times a step at cfg's batch size (the placeholder when batch_size is
    "auto") and the given dropout. It is called only when the step count has to be planned from the time
    budget: once at cfg's dropout, and when an "auto" dropout comes out above 0, once more with it on.
    `compiled_trial(dropout)`: `(seconds of the first step, compilation included; seconds per step)` of a
    compiled copy, or None if it failed to compile; given, it decides "train.compile" when that is "auto" (module
    docstring). On a `gpu` the trial runs at any budget, and a compiled run's steps are planned from it, its
    compilation counted; and the evaluations are spaced to take about EVAL_SHARE of the time ("train.eval_interval").
    """
    tc, auto = cfg.train, set(cfg.auto)
    tokens_per_sequence = cfg.model.block_size * tc.grad_accum * world
    values, why, batch = {}, [], tc.batch_size
    if "train.max_steps" in auto:
        budget = parse_duration(tc.time_budget)
        batch, steps, per_micro, timed_at = planned_steps(cfg, train_tokens, tokens_per_sequence,
                                                          seconds_per_micro_step, gpu)
        values["train.max_steps"] = steps
        why.append(reason("train.auto_fit", steps=f"{steps:,}", budget=tc.time_budget,
                       seconds=f"{per_micro * batch / tc.batch_size * tc.grad_accum:.3g}"))
    else:
        steps = tc.max_steps
        if "train.batch_size" in auto:  # here the passes grow with the batch: the largest the rule agrees with
            batch = next(b for b in range(MANY_EPOCHS_BATCH[1], FEW_EPOCHS_BATCH[1] - 1, -1)
                         if regularisation(steps * b * tokens_per_sequence / max(1, train_tokens))["batch_size"] >= b)
    if "train.batch_size" in auto:
        values["train.batch_size"] = batch
    tokens_per_step = batch * tokens_per_sequence
    epochs = steps * tokens_per_step / max(1, train_tokens)
    chosen = regularisation(epochs)
    if "train.lr" not in auto:  # a floor that follows the learning rate the user gave
        chosen["min_lr"] = float(f"{tc.lr * MIN_LR_RATIO:.3g}")
    for key in ("lr", "min_lr", "weight_decay"):
        if f"train.{key}" in auto:
            values[f"train.{key}"] = chosen[key]
    if "model.dropout" in auto:
        values["model.dropout"] = chosen["dropout"]
    why.append(reason("train.auto_passes", steps=f"{steps:,}", tokens=f"{tokens_per_step:,}", epochs=f"{epochs:.3g}",
                   train_tokens=f"{train_tokens:,}"))
    step_s = per_micro if "train.max_steps" in auto else None  # the planned run's seconds a micro-step
    if compiled_trial is not None and "train.max_steps" in auto and (gpu or budget >= COMPILE_TRIAL_FROM):
        # at the run's own dropout, so the copy compiles the graph the run will; the settings above stay
        dropout = values.get("model.dropout", cfg.model.dropout)
        eager = per_micro if dropout == timed_at else seconds_per_micro_step(dropout)
        chosen_compile, compiled_s, line = compile_choice(tc, batch, budget, eager, compiled_trial(dropout), gpu)
        values |= chosen_compile
        step_s = step_s if compiled_s is None else compiled_s  # a compiled run's steps fill the budget
        why.append(line)
    if gpu and step_s is not None and eval_every(tc, step_s * batch / tc.batch_size, gpu) != tc.eval_interval:
        every = eval_every(tc, step_s * batch / tc.batch_size, gpu)
        values["train.eval_interval"] = every
        cfg = replace(cfg, train=replace(tc, eval_interval=every))  # the patience below counts these evaluations
        why.append(reason("train.auto_eval", every=f"{every:,}", share=f"{EVAL_SHARE:.0%}"))
    for key, value in planned_patience(cfg, values.get("train.max_steps", steps)).items():  # training/early_stop.py
        values[f"train.{key}"] = value
    return values, why


def reason(key: str, **fields) -> tuple[str, dict]:
    """One reason of the plan: a message key of cli/messages.py and its fields."""
    return key, fields


def plan_line(values: dict, why: list[tuple[str, dict]]) -> str:
    """The line train.py prints of a plan: the settings chosen and the reasons."""
    say = messages()
    settings = " ".join(f"{k}={v}" for k, v in values.items())
    return say("train.auto", settings=settings, why="; ".join(say(key, **fields) for key, fields in why))


def planned_steps(cfg, train_tokens: int, tokens_per_sequence: int, seconds_per_micro_step,
                  gpu: bool) -> tuple[int, int, float, float]:
    """The batch and the steps that fit cfg's time budget (`plan_settings`), with the seconds a micro-step takes at
    cfg's batch size and the dropout that was timed."""
    tc, auto = cfg.train, set(cfg.auto)
    budget = parse_duration(tc.time_budget)

    def plan(per_micro: float) -> tuple[int, int]:  # (batch, steps that fit at it)
        def steps_at(b: int) -> int:  # a step's time taken as growing with the batch
            return fit_steps(budget, tc, per_micro * b / tc.batch_size, gpu)

        # the tokens a budget buys hardly depend on the batch (time per step grows with it), so the passes
        # are counted at the placeholder and the batch the rule picks for them just cuts them finer
        epochs = steps_at(tc.batch_size) * tc.batch_size * tokens_per_sequence / max(1, train_tokens)
        b = regularisation(epochs)["batch_size"] if "train.batch_size" in auto else tc.batch_size
        return b, steps_at(b)

    per_micro, timed_at = seconds_per_micro_step(cfg.model.dropout), cfg.model.dropout
    batch, steps = plan(per_micro)
    dropout = regularisation(steps * batch * tokens_per_sequence / max(1, train_tokens))["dropout"]
    if "model.dropout" in auto and dropout > 0:  # slower steps, so fewer of them: planned again from those
        per_micro, timed_at = seconds_per_micro_step(dropout), dropout
        batch, steps = plan(per_micro)
    return batch, steps, per_micro, timed_at


def compile_choice(tc, batch: int, budget: float, eager: float, trial,
                   gpu: bool) -> tuple[dict, float | None, tuple[str, dict]]:
    """"train.compile" (and the steps a compiled run fits) from a compiled copy's `trial` (None: it failed to
    compile; else seconds of its first step and per step) against `eager` seconds a micro-step; the compiled
    seconds a micro-step when the run compiles, and the reason (a message key and its fields)."""
    if trial is None:
        return {"train.compile": "off"}, None, reason("train.auto_compile_failed")

    def fit(per: float, seconds: float) -> int:  # steps at the planned batch
        return fit_steps(seconds, tc, per * batch / tc.batch_size, gpu)

    first, compiled = trial
    gain = fit(compiled, budget - first) / fit(eager, budget)
    choice = ("on" if gain >= COMPILE_GAIN else "off") if tc.compile == "auto" else "on"  # "on": as asked
    values = {"train.compile": choice} if tc.compile == "auto" else {}
    if choice == "on":  # its steps and its compilation, not the eager steps', fill the budget
        values["train.max_steps"] = fit(compiled, budget - first)
    line = reason("train.auto_compile", choice=choice, gain=f"{gain:.2f}", compiled=f"{compiled:.3g}",
               eager=f"{eager:.3g}", first=f"{first:.0f}")
    return values, compiled if choice == "on" else None, line


def apply_settings(cfg, values: dict):
    """cfg with `values` ({"train.lr": 3e-4, "model.dropout": 0.1, ...}) put in their sections."""
    sections = {}
    for name, value in values.items():
        section, key = name.split(".")
        sections.setdefault(section, {})[key] = value
    return replace(cfg, **{s: replace(getattr(cfg, s), **kv) for s, kv in sections.items()})


def resolved_values(cfg) -> dict:
    """What the "auto" settings came to ({"train.lr": 0.001, ...}), as a resume must take them back."""
    sections = asdict(cfg)
    return {name: sections[name.split(".")[0]][name.split(".")[1]] for name in cfg.auto}


def resolve_auto(cfg, meta: dict, saved: dict | None, device, autocast, ddp):
    """cfg with its "auto" settings filled in: a resumed run takes back the values its start chose (`saved`:
    its train state); a new one plans them on rank 0 (timing a throwaway model when the steps must fit a
    time budget), prints how, and every rank takes rank 0's values (`ddp`: training.distributed)."""
    if not cfg.auto:
        return cfg
    if saved and "resolved" in saved:
        return with_values(cfg, saved["resolved"])

    def timing(dropout: float, compiled: bool = False) -> tuple[float, float]:  # a throwaway model, so the
        model = GPT(replace(cfg.model, dropout=dropout)).to(device)           # run's weights and RNGs are untouched
        if cfg.train.speed_up:  # the code the run will step
            speed_up(model)
        return time_training_step(model, cfg.train.batch_size, autocast, cfg.train.grad_clip, compiled=compiled)

    def compiled_trial(dropout: float) -> tuple[float, float] | None:
        try:
            return timing(dropout, compiled=True)
        except Exception as e:  # noqa: BLE001 (no C compiler, an operator inductor lacks: the run stays eager)
            if is_out_of_memory(e):  # not the compiler's failure: its own one line (cli/command.py)
                raise
            say = messages()
            print(say("warning", text=say("train.compile_failed", error=type(e).__name__)))
            return None

    # the trial decides where compiles() leaves it open (a CPU's "auto"), and on a GPU it times what compiles
    setting, gpu = compiles(device, cfg.train.compile), device.type == "cuda"
    trial = compiled_trial if setting is None or (gpu and setting) else None
    values, why = ddp.from_master(lambda: plan_settings(cfg, meta["splits"]["train"]["tokens"], ddp.world,
                                                        lambda dropout: timing(dropout)[1], trial, gpu))
    if ddp.master:
        print(plan_line(values, why))
    return with_values(cfg, values)


def with_values(cfg, values: dict):
    """apply_settings, and "train.compile" and "train.eval_interval" among the settings the run chose when the plan
    set them (resolved_values then saves them, so a resume compiles and evaluates as the start did)."""
    cfg = apply_settings(cfg, values)
    chosen = tuple(k for k in ("train.compile", "train.eval_interval") if k in values and k not in cfg.auto)
    return replace(cfg, auto=cfg.auto + chosen)


def replan(cfg, max_steps: int):
    """cfg with a time budget's new plan of `max_steps` (at an evaluation) and the patience that follows it."""
    return replace(cfg, train=replace(cfg.train, max_steps=max_steps, **planned_patience(cfg, max_steps)))
