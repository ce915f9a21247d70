"""A model to start from: a checkpoint of this project (a run, a checkpoint dir, an import) or a Hugging
Face GPT-2 (a directory or a hub id already in the local cache), opened the same way.

    p = open_pretrained("ckpt/kogpt2")                       # or "kogpt2/" (transformers' layout)
    p.config, p.tokenizer, p.eot_token, p.eot_id              # read and checked now
    config = p.model_config({"block_size": 256, "dropout": 0.1})   # a [model] table on top of its shape
    state = p.state_for(config)                               # our names; the position table cropped

Opening reads only the small files; the weights are read (and checked) by `state_for`. train.py's
`train.init_from` and data/prepare.py's `data.tokenizer` use this.
"""

from collections.abc import Callable
import json
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from model.config import GPTConfig, ModelConfigError
from model.errors import UserError
from model.io import CONFIG, TIED, WEIGHTS, CheckpointError, end_of_text_id, find_checkpoint, load_tokenizer
from model.io import read_model_config

FREE = ("dropout",)  # settings a fine-tune may change; block_size may shrink; the rest is the weights' shape


class PretrainedError(UserError):
    """A setting contradicts the weights it should start from."""


@dataclass
class Pretrained:
    dir: Path  # the directory the files are in
    origin: str  # what to record: a path, or hub id @ revision
    config: GPTConfig  # the shape of the weights
    tokenizer: object  # tokenizers.Tokenizer, used as it is
    tokenizer_file: Path
    eot_token: str  # the model's own end-of-text token
    eot_id: int
    load_state: Callable[[], dict[str, torch.Tensor]]  # our names, float32, tied head left out

    def model_config(self, table: dict) -> GPTConfig:
        """This model's config with the keys of a [model] table applied: dropout freely, block_size up
        to the positions the weights have, any other key only with the weights' own value."""
        for key, value in table.items():
            ours = getattr(self.config, key, None)
            if key == "block_size" and isinstance(value, int) and value > self.config.block_size:
                raise PretrainedError(
                    f"model.block_size = {value} exceeds the {ours} positions of {self.origin}; "
                    f"set at most {ours} (a smaller value crops the position table)"
                )
            if key not in FREE + ("block_size",) and value != ours:
                raise PretrainedError(
                    f"model.{key} = {value!r} contradicts {self.origin}, whose weights have {key} = {ours!r}; "
                    "drop the setting (the shape comes from the weights)"
                )
        try:
            return replace(self.config, **table)
        except (TypeError, ModelConfigError) as e:
            raise PretrainedError(f"the [model] table does not fit {self.origin} ({e})") from e

    def state_for(self, config: GPTConfig) -> dict[str, torch.Tensor]:
        """The weights for a model of `config` (from `model_config`): the first block_size positions."""
        state = self.load_state()
        state["pos_emb.weight"] = state["pos_emb.weight"][: config.block_size].clone()  # (block_size, C)
        return state


def is_checkpoint(path: Path) -> bool:
    """A run or checkpoint dir of this project: model.safetensors beside a config.json with a "model" table."""
    for candidate in (path, path / "best", path / "last"):
        if (candidate / WEIGHTS).is_file() and (candidate / CONFIG).is_file():
            try:
                config = json.loads((candidate / CONFIG).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                return True  # ours or not, GPT.load's rules give the clearer message
            return isinstance(config, dict) and "model" in config and "model_type" not in config
    return False


def open_checkpoint(path) -> Pretrained:
    """A run or checkpoint dir of this project (GPT.load's rules) as a Pretrained."""
    from model.gpt import GPT  # here: model.gpt is heavier than what opening needs

    ckpt = find_checkpoint(path)
    try:
        config = GPTConfig(**read_model_config(ckpt))
    except (TypeError, ModelConfigError) as e:
        raise CheckpointError(f'{ckpt / CONFIG} has bad "model" settings ({e}); restore the file') from e
    tok = load_tokenizer(ckpt / "tokenizer.json", hint="a checkpoint keeps its tokenizer.json beside the weights")
    eot_id = end_of_text_id(ckpt, tok)
    if eot_id is None:
        raise CheckpointError(f"{ckpt} names no end-of-text token (no meta.json eot_id, no special token)")

    if tok.get_vocab_size() > config.vocab_size:
        raise CheckpointError(f"{ckpt}/tokenizer.json has {tok.get_vocab_size()} tokens but the model only "
                              f"{config.vocab_size}; they come from different runs")  # fmt: skip

    def load_state():
        return {k: t for k, t in GPT.load(ckpt).state_dict().items() if k != TIED}

    return Pretrained(ckpt, str(ckpt.resolve()), config, tok, ckpt / "tokenizer.json", tok.id_to_token(eot_id),
                      eot_id, load_state)  # fmt: skip


def open_pretrained(path) -> Pretrained:
    """A checkpoint of this project, else a Hugging Face GPT-2 directory or cached hub id."""
    if is_checkpoint(Path(path).expanduser()):
        return open_checkpoint(Path(path).expanduser())
    from model.import_hf import open_hf  # here: model.import_hf imports this module

    return open_hf(path)
