"""The pieces of `train.py` that are not the loop itself.

Modules: config (the TOML run config and its overrides), hardware (precision, compile and FLOP peak of a
device), checkpoints (RUN/last and RUN/best, swapped in whole; the train state), evaluation (loss
estimates and samples during training), metrics (metrics.jsonl, loss.png, wandb).
"""
