"""The network and what runs it: config, attention, GPT, KV cache, decoding, the NLL rule.

    from model import GPT, GPTConfig, KVCache

`model/` imports nothing else of the project but the error a user is shown and the checks of what a user passes
(cli/errors.py, cli/arguments.py): checkpoint files are storage/, Hugging Face conversion hf/, the rest of the
command line cli/.
"""

from model.config import GPTConfig
from model.gpt import GPT
from model.kv_cache import KVCache

__all__ = ["GPT", "GPTConfig", "KVCache"]
