"""Export a checkpoint to the Hugging Face GPT-2 format, so transformers loads it and computes the same logits.

    python -m hf.export_gpt2 runs/small exports/small               # run dir: its best/, else last/
    python -m hf.export_gpt2 runs/small/last exports/small --force  # a checkpoint dir; replace OUT_DIR

    from transformers import AutoTokenizer, GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained("exports/small")
    tok = AutoTokenizer.from_pretrained("exports/small")

Our network is GPT-2's shape, so the export is a renaming plus one transpose (the table lives in
hf/gpt2_names.py, which hf/import_gpt2.py reads the other way). GPT-2 always has biases, so a model
trained with `bias = false` gets zero biases, which compute the same thing. The tokenizer.json is copied
unchanged and wrapped as a `PreTrainedTokenizerFast`, with the checkpoint's end-of-text token (meta.json's
"eot_id": `<|endoftext|>` for a run's own tokenizer, the model's own for an imported one) as its bos, eos
and pad token. transformers reads that token written in text as the special token (its convention:
`tok.bos_token + text`), where kogpt-mini's own commands read it as text (data.tokenizer.load_tokenizer).
An OUT_DIR that is a symbolic link to a directory keeps the link; the directory it points to is replaced.

Only json and safetensors are needed: transformers is an optional extra (`pip install -e .[hf]`) and is
never imported here. OUT_DIR is written as a hidden temporary directory and renamed into place, so a
failed export leaves nothing behind.
"""

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import safetensors.torch
import torch
import torch.nn as nn
from tokenizers import Tokenizer

from cli.command import directory_command
from cli.errors import UserError
from hf import gpt2_names
from model import GPT
from model.config import ACTIVATIONS
from storage.atomic import check_out_dir, write_directory, write_json
from storage.checkpoint import TOKENIZER, WEIGHTS, checkpoint_tokenizer, find_checkpoint, load_kept_off, load_model

# GPTConfig fields that GPT-2 can express; any other field is an option the export must refuse
EXPRESSIBLE = (*gpt2_names.CONFIG, "dropout", "bias", "mlp")
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
# what an export holds: --force replaces a directory of these names only
WRITES = (WEIGHTS, "config.json", "generation_config.json", TOKENIZER, "tokenizer_config.json", "special_tokens_map.json")


class ExportError(UserError):
    """The checkpoint cannot be written as GPT-2, or OUT_DIR cannot be written."""


def check_expressible(config) -> None:
    """Refuse a config with fields GPT-2 has no equivalent for, naming them."""
    extra = {k: v for k, v in asdict(config).items() if k not in EXPRESSIBLE}
    if extra:
        named = ", ".join(f"model.{k} = {v!r}" for k, v in extra.items())
        raise ExportError(
            f"GPT-2 cannot express {named}; only {', '.join(EXPRESSIBLE)} can be exported "
            "(train without these options, or teach hf/export_gpt2.py how to map them)"
        )


def activation_name(model: GPT) -> str:
    """The transformers name of the MLP activation: the config's, checked against the modules themselves."""
    kinds = {m.approximate for m in model.modules() if isinstance(m, nn.GELU)}
    name = model.config.activation
    if kinds != ({ACTIVATIONS[name]} if model.config.mlp else set()):
        raise ExportError(
            f"the MLP activations are nn.GELU(approximate={sorted(kinds)}) but model.activation is {name!r}; "
            "GPT-2 needs every layer to use the one activation its config names"
        )
    return name


def gpt2_weights(model: GPT) -> dict[str, torch.Tensor]:
    """Our state dict under GPT-2's names and layouts: Linear weights transposed, absent biases as zeros."""
    state = {k: t.detach().cpu() for k, t in model.state_dict().items()}
    if not torch.equal(state.pop("lm_head.weight"), state["tok_emb.weight"]):
        raise ExportError("lm_head is not tied to tok_emb; GPT-2's head always shares the embedding matrix")
    tensors = gpt2_names.to_gpt2(state, model.config.n_layer)
    left = sorted(state.keys() - {ours for ours, _, _ in gpt2_names.weight_names(model.config.n_layer)})
    if left:
        raise ExportError(f"GPT-2 has no place for the weights {', '.join(left)}; they cannot be exported")
    return tensors


def gpt2_config(model: GPT, eot_id: int) -> dict:
    """config.json for transformers.GPT2LMHeadModel, every setting that changes the output spelled out."""
    c = model.config
    activation_name(model)  # the modules agree with c.activation
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        **{theirs: getattr(c, ours) for ours, theirs in gpt2_names.CONFIG.items()},
        "n_inner": 4 * c.n_embd,  # an attention-only model is exported with MLPs of zeros,
        **({} if c.mlp else {"mlp": False}),  # and says so, for the import (transformers keeps the key, unused)
        **{name: c.dropout for name in gpt2_names.DROPOUTS},
        "scale_attn_weights": True,  # scores / sqrt(head_dim), as in model/attention.py
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "add_cross_attention": False,
        "tie_word_embeddings": True,
        "bos_token_id": eot_id,
        "eos_token_id": eot_id,
        "use_cache": True,
        "torch_dtype": DTYPE_NAMES.get(model.tok_emb.weight.dtype, "float32"),
    }


def tokenizer_config(tok: Tokenizer, eot: str, block_size: int) -> dict:
    """tokenizer_config.json: a plain fast tokenizer over our tokenizer.json, decoding without cleanup."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",  # not GPT2Tokenizer, whose byte-level rules differ from ours
        "bos_token": eot,
        "eos_token": eot,
        "pad_token": eot,  # batches need one; the attention mask hides padding, so reusing EOT is safe
        "model_max_length": block_size,
        "clean_up_tokenization_spaces": False,  # it would delete spaces before punctuation: not lossless
    }
    unk = getattr(tok.model, "unk_token", None)
    if unk is not None and tok.token_to_id(unk) is not None:
        config["unk_token"] = unk
    return config


def export(path, out_dir, force: bool = False) -> Path:
    """Write the checkpoint at `path` (a run or checkpoint dir) as a transformers GPT-2 directory; returns it."""
    ckpt = find_checkpoint(path)
    model = load_model(ckpt)
    kept = load_kept_off(model, ckpt)
    if kept is not None:  # train.heads_off: GPT-2 has no hooks, so into the weights
        kept.fold(model)
    check_expressible(model.config)
    tok, eot_id = checkpoint_tokenizer(ckpt, model.config.vocab_size, need_eot=True)
    eot = tok.id_to_token(eot_id)
    tensors = gpt2_weights(model)
    config = gpt2_config(model, eot_id)
    out = Path(out_dir)
    out = check_out_dir(out, ckpt, force, ExportError, WRITES)

    def fill(tmp: Path) -> None:
        safetensors.torch.save_file(tensors, tmp / WEIGHTS, metadata={"format": "pt"})
        write_json(tmp / "config.json", config)
        generation = {"bos_token_id": eot_id, "eos_token_id": eot_id, "pad_token_id": eot_id}
        write_json(tmp / "generation_config.json", generation)
        shutil.copyfile(ckpt / TOKENIZER, tmp / TOKENIZER)
        write_json(tmp / "tokenizer_config.json", tokenizer_config(tok, eot, model.config.block_size))
        write_json(tmp / "special_tokens_map.json", {"bos_token": eot, "eos_token": eot, "pad_token": eot})

    write_directory(out, fill, ExportError)
    return out


def main(argv=None) -> int:
    def run(run_dir, out_dir, force):
        out = export(run_dir, out_dir, force=force)
        return (f"exported {find_checkpoint(run_dir)} to {out}; "
                f"load it with transformers.GPT2LMHeadModel.from_pretrained({str(out)!r})")

    return directory_command(
        argv, "python -m hf.export_gpt2",
        "Export a run or checkpoint to the Hugging Face GPT-2 format (GPT2LMHeadModel + tokenizer).",
        ("run_dir", "a run dir (runs/<name>: best/, else last/) or a checkpoint dir"), "out_dir", run,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
