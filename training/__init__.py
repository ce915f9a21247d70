"""The pieces of `train.py` that are not the loop itself, one job a module.

config (the TOML run config and its overrides), recipe (the "auto" settings), budget (train.time_budget),
distributed (torchrun: the process group and what the ranks agree on), hardware (precision, compile and FLOP
peak of a device, the memory a run needs there), evaluation (loss estimates, samples, the final exact scores),
checkpoints (RUN/last and RUN/best, swapped in whole), run_dir (a run or empty; --resume, --overwrite and
what a resume must match), lock (one trainer per run directory), stopping (signals and divergence), metrics
(metrics.jsonl, loss.png, wandb, tokens per second).
"""
