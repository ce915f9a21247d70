"""The network and everything needed to run it: config, attention, GPT, KV cache, decoding, checkpoints.

    from model import GPT, GPTConfig, KVCache, CheckpointError

`model/` imports nothing from `data/`, `training/` or the top level; `model.errors.UserError` is the
exception every package raises for bad input.
"""

from model.config import GPTConfig, ModelConfigError, ModelInputError
from model.gpt import GPT
from model.io import CheckpointError
from model.kv_cache import KVCache

__all__ = ["GPT", "CheckpointError", "GPTConfig", "KVCache", "ModelConfigError", "ModelInputError"]
