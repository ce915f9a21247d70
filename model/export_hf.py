"""Export a checkpoint to the Hugging Face GPT-2 format, so transformers loads it and computes the same logits.

    python -m model.export_hf runs/small exports/small              # run dir: its best/, else last/
    python -m model.export_hf runs/small/last exports/small --force # a checkpoint dir; replace OUT_DIR

    from transformers import AutoTokenizer, GPT2LMHeadModel
    model = GPT2LMHeadModel.from_pretrained("exports/small")
    tok = AutoTokenizer.from_pretrained("exports/small")

Our network is GPT-2's shape (learned positions, pre-LN blocks, fused Q·K·V, tied head), so the export is a
renaming plus one transpose: GPT-2 keeps its projections as `Conv1D` with weight (in, out), where
`nn.Linear` keeps (out, in). GPT-2 always has biases, so a model trained with `bias = false` gets zero
biases, which compute the same thing. The tokenizer.json is copied unchanged and wrapped as a
`PreTrainedTokenizerFast`, with the end-of-text token (`<|endoftext|>` for a run's own tokenizer) as its
bos, eos and pad token.

Only json and safetensors are needed: transformers is an optional extra (`pip install -e .[hf]`) and is
never imported here. OUT_DIR is written as a hidden temporary directory and renamed into place, so a
failed export leaves nothing behind.
"""

import json
import os
import secrets
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import safetensors.torch
import torch
import torch.nn as nn
from tokenizers import Tokenizer

from model.errors import ArgumentParser, UserError, print_error
from model.gpt import GPT
from model.io import CheckpointError, end_of_text_id, find_checkpoint, load_tokenizer

# GPTConfig fields that GPT-2 can express; any other field is an option the export must refuse
EXPRESSIBLE = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout", "bias", "layer_norm_eps")
NORMS = ("ln_1", "ln_2")
LINEARS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # nn.Linear here, Conv1D in GPT-2
GELU_NAMES = {"none": "gelu", "tanh": "gelu_pytorch_tanh"}  # nn.GELU(approximate=...) -> transformers' name
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


class ExportError(UserError):
    """The checkpoint cannot be written as GPT-2, or OUT_DIR cannot be written."""


def check_expressible(config) -> None:
    """Refuse a config with fields GPT-2 has no equivalent for, naming them."""
    extra = {k: v for k, v in asdict(config).items() if k not in EXPRESSIBLE}
    if extra:
        named = ", ".join(f"model.{k} = {v!r}" for k, v in extra.items())
        raise ExportError(
            f"GPT-2 cannot express {named}; only {', '.join(EXPRESSIBLE)} can be exported "
            "(train without these options, or teach model/export_hf.py how to map them)"
        )


def activation_name(model: GPT) -> str:
    """The transformers name of the MLP activation, read from the modules themselves."""
    kinds = {m.approximate for m in model.modules() if isinstance(m, nn.GELU)}
    if len(kinds) != 1 or next(iter(kinds)) not in GELU_NAMES:
        raise ExportError(
            f"the MLP activation is not one kind of nn.GELU (found {sorted(kinds)}); "
            "GPT-2 can only express gelu (exact) or gelu_pytorch_tanh"
        )
    return GELU_NAMES[kinds.pop()]


def gpt2_weights(model: GPT) -> dict[str, torch.Tensor]:
    """Our state dict under GPT-2's names and layouts: Linear weights transposed, absent biases as zeros."""
    state = {k: t.detach().cpu() for k, t in model.state_dict().items()}
    if not torch.equal(state.pop("lm_head.weight"), state["tok_emb.weight"]):
        raise ExportError("lm_head is not tied to tok_emb; GPT-2's head always shares the embedding matrix")
    names = {"tok_emb.weight": "transformer.wte.weight", "pos_emb.weight": "transformer.wpe.weight"}
    parts = ["ln_f"] + [f"blocks.{i}.{part}" for i in range(model.config.n_layer) for part in NORMS + LINEARS]
    for part in parts:
        hf_part = "transformer." + part.replace("blocks.", "h.")
        names |= {f"{part}.weight": f"{hf_part}.weight", f"{part}.bias": f"{hf_part}.bias"}
    tensors = {}
    for ours, theirs in names.items():
        if ours.endswith(".bias") and ours not in state:  # bias = false: GPT-2 adds zero instead
            weight = state[ours.removesuffix("bias") + "weight"]
            tensors[theirs] = torch.zeros(weight.size(0), dtype=weight.dtype)  # (out,) for Linear and LayerNorm
        elif ours.removesuffix(".weight").endswith(LINEARS):
            tensors[theirs] = state[ours].t().contiguous()  # nn.Linear (out, in) -> Conv1D (in, out)
        else:
            tensors[theirs] = state[ours].contiguous()
    left = sorted(state.keys() - names.keys())
    if left:
        raise ExportError(f"GPT-2 has no place for the weights {', '.join(left)}; they cannot be exported")
    return tensors


def gpt2_config(model: GPT, eot_id: int) -> dict:
    """config.json for transformers.GPT2LMHeadModel, every setting that changes the output spelled out."""
    c = model.config
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": c.vocab_size,
        "n_positions": c.block_size,
        "n_embd": c.n_embd,
        "n_layer": c.n_layer,
        "n_head": c.n_head,
        "n_inner": model.blocks[0].mlp.c_fc.out_features,
        "activation_function": activation_name(model),
        "layer_norm_epsilon": c.layer_norm_eps,
        "resid_pdrop": c.dropout,
        "embd_pdrop": c.dropout,
        "attn_pdrop": c.dropout,
        "scale_attn_weights": True,  # scores / sqrt(head_dim), as in model/attention.py
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "add_cross_attention": False,
        "tie_word_embeddings": True,
        "initializer_range": 0.02,
        "bos_token_id": eot_id,
        "eos_token_id": eot_id,
        "use_cache": True,
        "torch_dtype": DTYPE_NAMES.get(model.tok_emb.weight.dtype, "float32"),
    }


def read_tokenizer(ckpt: Path, vocab_size: int) -> tuple[Tokenizer, int]:
    """The checkpoint's tokenizer.json and its end-of-text id, checked against the model."""
    file = ckpt / "tokenizer.json"
    tok = load_tokenizer(file, hint="a checkpoint keeps its tokenizer.json beside model.safetensors (copy it back)")
    eot_id = end_of_text_id(ckpt, tok)
    if eot_id is None:
        raise CheckpointError(f"{file} has no end-of-text token (meta.json names none, and it has no special token)")
    if tok.get_vocab_size() > vocab_size:
        raise CheckpointError(
            f"{file} has {tok.get_vocab_size()} tokens but the model only {vocab_size}; "
            "the tokenizer belongs to another run"
        )
    return tok, eot_id


def tokenizer_config(tok: Tokenizer, block_size: int, eot: str) -> dict:
    """tokenizer_config.json: a plain fast tokenizer over our tokenizer.json, decoding without cleanup."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",  # not GPT2Tokenizer, whose byte-level rules differ from ours
        "bos_token": eot,
        "eos_token": eot,
        "pad_token": eot,  # batches need one; the attention mask hides padding, so reusing it is safe
        "model_max_length": block_size,
        "clean_up_tokenization_spaces": False,  # it would delete spaces before punctuation: not lossless
    }
    unk = getattr(tok.model, "unk_token", None)
    if unk is not None and tok.token_to_id(unk) is not None:
        config["unk_token"] = unk
    return config


def write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check_out_dir(out: Path, ckpt: Path, force: bool) -> None:
    """Refuse an OUT_DIR that is a file, holds files (unless force) or would swallow the checkpoint."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file; give a directory path for the export")
    target, source = out.resolve(), ckpt.resolve()
    if target == source or target in source.parents:
        raise ExportError(f"{out} contains the checkpoint {ckpt}; export to another directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"{out} exists and is not empty; choose a new directory or pass --force to replace it")


def move_into_place(tmp: Path, out: Path) -> None:
    """Rename the finished tmp dir to out; an old non-empty out is renamed aside first, then deleted."""
    if out.is_dir() and any(out.iterdir()):
        old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
        os.rename(out, old)
        os.rename(tmp, out)
        shutil.rmtree(old)
    else:
        os.replace(tmp, out)  # also replaces an empty directory, atomically


def export(path, out_dir, force: bool = False) -> Path:
    """Write the checkpoint at `path` (a run or checkpoint dir) as a transformers GPT-2 directory; returns it."""
    ckpt = find_checkpoint(path)
    model = GPT.load(ckpt)
    check_expressible(model.config)
    tok, eot_id = read_tokenizer(ckpt, model.config.vocab_size)
    tensors = gpt2_weights(model)
    config = gpt2_config(model, eot_id)
    out = Path(out_dir)
    if out.is_symlink():  # write into the directory it points to, and keep the link
        if not out.exists():
            raise ExportError(f"{out} is a symbolic link to {os.readlink(out)}, which does not exist; create that "
                              f"directory or give another OUT_DIR")
        out = out.resolve()
    check_out_dir(out, ckpt, force)

    try:
        write_export(out, tensors, config, ckpt / "tokenizer.json", tokenizer_config(tok, model.config.block_size, tok.id_to_token(eot_id)))
    except OSError as e:  # a read-only or full disk, a parent that is a file: the user's to fix
        raise ExportError(f"cannot write {out} ({e.strerror or e}); check the path and free space") from e
    return out


def write_export(out: Path, tensors: dict, config: dict, tokenizer_json: Path, tok_config: dict) -> None:
    """Write every file into a hidden temporary sibling of out, sync them, then rename it to out."""
    eot_id = config["eos_token_id"]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp"  # same filesystem, so the rename is atomic
    tmp.mkdir()
    try:
        safetensors.torch.save_file(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        write_json(tmp / "config.json", config)
        generation = {"bos_token_id": eot_id, "eos_token_id": eot_id, "pad_token_id": eot_id}
        write_json(tmp / "generation_config.json", generation)
        shutil.copyfile(tokenizer_json, tmp / "tokenizer.json")
        write_json(tmp / "tokenizer_config.json", tok_config)
        eot = tok_config["eos_token"]
        write_json(tmp / "special_tokens_map.json", {"bos_token": eot, "eos_token": eot, "pad_token": eot})
        umask = os.umask(0)  # the only way to read the umask is to set it, so put it back at once
        os.umask(umask)
        for file in tmp.iterdir():
            os.chmod(file, 0o666 & ~umask)  # safetensors writes 0600; the export is meant to be shared
            with open(file, "rb") as f:
                os.fsync(f.fileno())
        move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main(argv=None) -> None:
    parser = ArgumentParser(
        prog="python -m model.export_hf",
        description="Export a run or checkpoint to the Hugging Face GPT-2 format (GPT2LMHeadModel + tokenizer).",
    )
    parser.add_argument("run_dir", help="a run dir (runs/<name>: best/, else last/) or a checkpoint dir")
    parser.add_argument("out_dir", help="the directory to write; must not exist or be empty unless --force")
    parser.add_argument("--force", action="store_true", help="replace OUT_DIR if it already holds files")
    try:
        args = parser.parse_args(argv)
        out = export(args.run_dir, args.out_dir, force=args.force)
    except UserError as e:
        print_error(e)
        sys.exit(2)
    print(f"exported {find_checkpoint(args.run_dir)} to {out}; "
          f"load it with transformers.GPT2LMHeadModel.from_pretrained({str(out)!r})")


if __name__ == "__main__":
    main()
