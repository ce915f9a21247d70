"""Import a Hugging Face GPT-2 (KoGPT2, OpenAI's gpt2, one exported by hf/export_gpt2.py) as a checkpoint.

    python -m hf.import_gpt2 kogpt2 ckpt/kogpt2                # a local directory in the Hugging Face layout
    python -m hf.import_gpt2 skt/kogpt2-base-v2 ckpt/kogpt2    # a hub id already in the local cache
    python -m hf.import_gpt2 kogpt2 ckpt/kogpt2 --force        # replace OUT if it holds files

SRC holds `config.json` (model_type gpt2), the weights (`model.safetensors`, or `pytorch_model.bin` read
with `torch.load(weights_only=True)`, which refuses anything but tensors and plain values), `tokenizer.json`,
and optionally `tokenizer_config.json` / `special_tokens_map.json`. A hub id is looked up in the cache
(`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`); nothing is ever downloaded.

OUT is a checkpoint directory like a run's: `config.json` ({"model": asdict(GPTConfig)}, block_size =
n_positions), `model.safetensors` (our names, float32, the tied head stored once), `tokenizer.json`
copied unchanged and `meta.json` (vocab_size, eot_id, eot_token, tokenizer_hash, dtype, imported_from),
so generate.py, hf.export_gpt2 and training take it as they take a run's. The end-of-text token is
the model's own (config.json's eos_token_id, else the tokenizer files' eos_token), not `<|endoftext|>`.
The name mapping is hf/gpt2_names.py's, the one hf/export_gpt2.py writes with. `open_hf(SRC)` reads
the same files without writing anything (train.init_from goes through it, via hf/pretrained.py).

Settings the network does not implement are refused with one line naming them: another model_type,
scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, add_cross_attention, scale_attn_weights =
false, an untied head, n_inner other than 4·n_embd, an unknown activation. OUT is written as a hidden
temporary directory and renamed into place, so a failed import leaves nothing behind.
"""

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import json
import os
import pickle
import re
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

import safetensors.torch
import torch
from tokenizers import Tokenizer

from cli.command import directory_command
from cli.errors import ModelConfigError, UserError
from data.tokenizer import check_fits, load_tokenizer, tokenizer_hash
from hf import gpt2_names
from model.config import ACTIVATIONS, GPTConfig
from storage.atomic import check_out_dir, write_directory, write_json
from storage.checkpoint import (CONFIG, META, TOKENIZER, WEIGHTS, Pretrained, check_finite_weights, check_utf8_path,
                                expected_shapes, read_json, read_safetensors)  # fmt: skip

SIZES = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")  # no default we would trust
# GPT2Config's defaults for the settings a config.json may leave out (transformers fills them the same way)
DEFAULTS = {
    "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "initializer_range": 0.02, "n_inner": None, "resid_pdrop": 0.1,
    "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
    "add_cross_attention": False, "tie_word_embeddings": True,
}  # fmt: skip
# settings whose other value changes what the network computes, and the value we implement
FIXED = {
    "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
    "add_cross_attention": False, "tie_word_embeddings": True,
}  # fmt: skip
DOWNLOAD = "download it again"
HUB_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")


class HFImportError(UserError):
    """SRC is not a GPT-2 this project can run, or OUT cannot be written."""


def hub_cache() -> Path:
    """The Hugging Face hub cache directory, found as huggingface_hub finds it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return cache / "huggingface" / "hub"


def find_source(src: str) -> tuple[Path, str]:
    """SRC as a directory and as the words to record in meta.json: a path, or hub id @ cached revision."""
    path = Path(src).expanduser()
    if path.is_dir():
        check_utf8_path(path)
        return path, str(path.resolve())
    if path.exists():
        raise HFImportError(f"{src} is a file; give the directory that holds config.json and the weights")
    if not HUB_ID.fullmatch(src):
        raise HFImportError(f"{src} does not exist; give a Hugging Face GPT-2 directory or a cached hub id")
    repo = hub_cache() / ("models--" + src.replace("/", "--"))  # the cache's layout: models--ORG--NAME
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    revs = sorted(p.name for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    rev = ref.read_text(encoding="utf-8").strip() if ref.is_file() else (revs[0] if len(revs) == 1 else None)
    if rev is None or not (snapshots / rev).is_dir():
        found = f"{len(revs)} snapshots and no refs/main in {repo}" if revs else f"nothing at {repo}"
        raise HFImportError(
            f"{src} is no directory, nor a hub id in the Hugging Face cache ({found}); nothing is downloaded: "
            f"give a model directory (when online, `huggingface-cli download {src} --local-dir DIR` fetches one)"
        )
    return snapshots / rev, f"{src}@{rev}"


def model_config(hf: dict, file: Path) -> GPTConfig:
    """transformers' GPT-2 config.json -> GPTConfig, refusing what the network does not compute."""
    if hf.get("model_type") != "gpt2":
        raise HFImportError(
            f"{file} has model_type {hf.get('model_type')!r}; only GPT-2 (model_type 'gpt2') can be imported"
        )
    missing = [k for k in SIZES if k not in hf]
    if missing:
        raise HFImportError(f"{file} lacks {', '.join(missing)}; a GPT-2 config.json names its sizes")
    hf = DEFAULTS | hf
    for key, ours in FIXED.items():
        if hf[key] != ours:
            raise HFImportError(
                f"{file} sets {key} = {json.dumps(hf[key])}; this GPT-2 implements only {key} = {json.dumps(ours)}"
            )
    if not isinstance(hf["activation_function"], str) or hf["activation_function"] not in ACTIVATIONS:
        raise HFImportError(
            f"{file} sets activation_function = {hf['activation_function']!r}; "
            f"only {', '.join(ACTIVATIONS)} are implemented"
        )
    try:
        # GPT-2 has three dropout rates; ours is one (fine-tuning sets its own anyway). GPTConfig checks every
        # value's type and range (sizes bounded) before any of them reaches arithmetic.
        config = GPTConfig(**{ours: hf[theirs] for ours, theirs in gpt2_names.CONFIG.items()},
                           dropout=hf["resid_pdrop"], bias=True, mlp=hf.get("mlp", True))  # fmt: skip
    except (TypeError, ModelConfigError) as e:
        raise HFImportError(f"{file} has settings this model cannot take ({e})") from e
    if hf["n_inner"] is not None and hf["n_inner"] != 4 * config.n_embd:
        raise HFImportError(
            f"{file} sets n_inner = {hf['n_inner']!r}; this GPT-2's MLP is 4 * n_embd = {4 * config.n_embd} wide"
        )
    return config


def read_hf_weights(src: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """The tensors of a Hugging Face directory's model.safetensors, else of its pytorch_model.bin (tensors
    only: nothing is unpickled), under transformers' names, and the file they came from."""
    safe, pt = src / "model.safetensors", src / "pytorch_model.bin"
    if safe.is_file():
        return read_safetensors(safe, DOWNLOAD, HFImportError), safe
    if pt.is_file():
        try:
            tensors = torch.load(pt, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            raise HFImportError(
                f"{pt} holds objects other than tensors, which are never unpickled here (torch.load refused it "
                "with weights_only=True); get the model.safetensors of this model instead"
            ) from e
        except Exception as e:  # a truncated zip, not a torch file at all
            raise HFImportError(f"{pt} is damaged or not a PyTorch file ({' '.join(str(e).split())[:200]})") from e
        if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
            raise HFImportError(f"{pt} is not a dict of tensors (a state_dict); get the model.safetensors instead")
        check_finite_weights(tensors, pt, HFImportError)
        return tensors, pt
    sharded = [p.name for p in src.glob("*.index.json")]
    hint = f" (sharded weights, {sharded[0]}, are not supported)" if sharded else ""
    raise HFImportError(f"{src} has no model.safetensors or pytorch_model.bin{hint}; download the weights too")


def gpt2_tensors(tensors: dict[str, torch.Tensor], file: Path, config: GPTConfig) -> dict[str, torch.Tensor]:
    """The tensors under model/gpt2_names.py's names, checked: all there, shaped as config.json says, head tied."""
    tensors = {(k if k.startswith("transformer.") or k == "lm_head.weight" else "transformer." + k): t
               for k, t in tensors.items()}  # fmt: skip  # OpenAI's original files leave out the prefix
    # older transformers saved each layer's causal-mask buffers; they are not weights
    tensors = {k: t for k, t in tensors.items() if not re.fullmatch(r"transformer\.h\.\d+\.attn\.(masked_)?bias", k)}
    head = tensors.pop("lm_head.weight", None)
    if not config.mlp:  # our export of an attention-only model: its MLPs (and their ln_2) are zeros, and go
        for name in [k for k in tensors if re.fullmatch(r"transformer\.h\.\d+\.(mlp\.\w+|ln_2)\.(weight|bias)", k)]:
            if bool(tensors[name].any()):
                raise HFImportError(f"{file} says mlp = false, but {name} is not zeros; the weights and config.json "
                                    "come from different models")
            del tensors[name]
    ours = expected_shapes(config)
    expected = {theirs: ours[name][::-1] if linear else ours[name]
                for name, theirs, linear in gpt2_names.weight_names(config.n_layer) if name in ours}  # fmt: skip
    missing = sorted(expected.keys() - tensors.keys())
    unknown = sorted(tensors.keys() - expected.keys())
    if missing or unknown:
        problems = [f"{what} {len(names)} tensors ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
                    for what, names in (("lacks", missing), ("has unknown", unknown)) if names]  # fmt: skip
        raise HFImportError(f"{file} {' and '.join(problems)} for a GPT-2 of its config.json")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != tuple(shape):
            raise HFImportError(
                f"{file}: {name} has shape {tuple(tensors[name].shape)} but config.json implies {tuple(shape)}; "
                "the weights and config.json come from different models"
            )
    if head is not None and not torch.equal(head, tensors["transformer.wte.weight"]):
        raise HFImportError(f"{file} has an lm_head.weight that differs from wte (an untied head); "
                            "this GPT-2 reads and writes tokens with one matrix")  # fmt: skip
    return tensors


def read_tokenizer(src: Path, vocab_size: int) -> Tokenizer:
    file = src / TOKENIZER
    if not file.is_file():
        raise HFImportError(
            f"{src} has no tokenizer.json; download it too (a directory with only vocab.json and merges.txt: "
            "save it once with transformers' AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR))"
        )
    tok = load_tokenizer(file, hint=DOWNLOAD, error=HFImportError)
    check_fits(tok, vocab_size, file, HFImportError)
    return tok


def token_of(value) -> str | None:
    """An eos_token entry of tokenizer_config.json / special_tokens_map.json: a string or {"content": ...}."""
    return value.get("content") if isinstance(value, dict) else value if isinstance(value, str) else None


def find_eot(src: Path, hf: dict, tok: Tokenizer) -> tuple[str, int]:
    """The model's own end-of-text token: config.json's eos_token_id, else the tokenizer files' eos_token."""
    eos = hf.get("eos_token_id")
    eos = eos[0] if isinstance(eos, list) and eos else eos  # some configs list several; the first is the main one
    if isinstance(eos, int) and not isinstance(eos, bool):
        token = tok.id_to_token(eos) if 0 <= eos < 1 << 32 else None  # the tokenizer takes an unsigned 32-bit id
        if token is None:
            raise HFImportError(f"{src / 'config.json'} names eos_token_id {eos}, which tokenizer.json does not have")
        return token, eos
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        token = token_of((read_json(src / name, DOWNLOAD, HFImportError) or {}).get("eos_token"))
        if token is not None:
            if tok.token_to_id(token) is None:
                raise HFImportError(f"{src / name} names eos_token {token!r}, which tokenizer.json does not have")
            return token, tok.token_to_id(token)
    raise HFImportError(
        f"{src} names no end-of-text token (no eos_token_id in config.json, no eos_token in tokenizer_config.json "
        "or special_tokens_map.json); add eos_token_id to config.json"
    )


def open_hf(src) -> Pretrained:
    """The GPT-2 at `src` (a directory or a cached hub id): config, tokenizer and end-of-text token, checked;
    its weights are read (and checked) only when `load_state()` is called."""
    src, origin = find_source(str(src))
    config_file = src / "config.json"
    hf = read_json(config_file, DOWNLOAD, HFImportError)
    if hf is None:
        raise HFImportError(f"{src} has no config.json; it is not a Hugging Face model directory")
    config = model_config(hf, config_file)
    tok = read_tokenizer(src, config.vocab_size)
    eot, eot_id = find_eot(src, hf, tok)

    def load_state() -> dict[str, torch.Tensor]:
        tensors = gpt2_tensors(*read_hf_weights(src), config)
        return {k: t.float() for k, t in gpt2_names.from_gpt2(tensors, config.n_layer).items()}  # training keeps float32

    return Pretrained(src, origin, config, tok, src / TOKENIZER, eot, eot_id, load_state)


def import_hf(src, out, force: bool = False) -> Path:
    """Write the GPT-2 at `src` (a directory or a cached hub id) as a checkpoint directory `out`; returns it."""
    found, _ = find_source(str(src))
    out = Path(out)
    out = check_out_dir(out, found, force, HFImportError, (WEIGHTS, CONFIG, TOKENIZER, META))  # before the weights
    model = open_hf(src)
    state = model.load_state()
    n = model.tokenizer.get_vocab_size()
    meta = {"vocab_size": n, "eot_id": model.eot_id, "eot_token": model.eot_token,
            "dtype": "uint16" if n <= 1 << 16 else "uint32", "tokenizer_hash": tokenizer_hash(model.tokenizer),
            "imported_from": model.origin}  # fmt: skip

    def fill(tmp: Path) -> None:
        safetensors.torch.save_file(state, tmp / WEIGHTS)
        write_json(tmp / CONFIG, {"model": asdict(model.config)})
        shutil.copyfile(model.tokenizer_file, tmp / TOKENIZER)
        write_json(tmp / META, meta)

    write_directory(out, fill, HFImportError)
    return out


def main(argv=None) -> int:
    def run(src, out, force):
        written = import_hf(src, out, force=force)
        return f"imported {src} to {written}; generate with python generate.py --ckpt {written} --prompt ..."

    return directory_command(
        argv, "python -m hf.import_gpt2", __doc__.split("\n")[0],
        ("src", "a Hugging Face GPT-2 directory, or a hub id already in the local cache"), "out", run,
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
