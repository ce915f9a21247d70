"""A model to start from: a checkpoint of this project (a run, a checkpoint dir, an import) or a Hugging
Face GPT-2 (a directory or a hub id already in the local cache), opened the same way.

    p = open_pretrained("ckpt/kogpt2")                       # or "kogpt2/" (transformers' layout)
    p.config, p.tokenizer, p.eot_token, p.eot_id              # read and checked now
    config = p.model_config({"block_size": 256, "dropout": 0.1})   # a [model] table on top of its shape
    p.copy_into(GPT(config))                                  # the weights, read and checked only now

train.py's `train.init_from` and data/prepare.py's `data.tokenizer` open their models here.
"""

from pathlib import Path

from hf.import_gpt2 import open_hf
from storage.checkpoint import Pretrained, is_checkpoint, open_checkpoint


def open_pretrained(path) -> Pretrained:
    """A checkpoint of this project, else a Hugging Face GPT-2 directory or cached hub id."""
    local = Path(path).expanduser()
    return open_checkpoint(local) if is_checkpoint(local) else open_hf(path)
