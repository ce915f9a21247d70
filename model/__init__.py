"""The network and what runs it: config, attention, GPT, KV cache, decoding, the NLL rule.

    from model import GPT, GPTConfig, KVCache

`model/` imports nothing else of the project: checkpoint files are storage/, Hugging Face conversion hf/,
the command line cli/. `model.errors.UserError` is the exception every package raises for bad input.
"""

from model.config import GPTConfig, ModelConfigError, ModelInputError
from model.gpt import GPT
from model.kv_cache import KVCache

__all__ = ["GPT", "GPTConfig", "KVCache", "ModelConfigError", "ModelInputError"]
