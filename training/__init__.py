"""The pieces of `train.py` that are not the loop itself, one job a module.

config (the TOML run config and its overrides), recipe (the "auto" settings), budget (train.time_budget),
distributed (torchrun: the process group and what the ranks agree on), hardware (precision, compile and FLOP
peak of a device, the memory a run needs there), evaluation (loss estimates, samples, head roles, final scores),
checkpoints (RUN/last, RUN/best and RUN/snapshots, swapped in whole), run_dir (a run or empty; --resume,
--overwrite and what a resume must match), lock (one trainer per run directory), stopping (signals and
divergence), metrics (metrics.jsonl, wandb, tokens per second), plots (loss.png and heads.png).
"""
