"""The run directory's rules: what a run holds, --resume and --overwrite, and what a resume must match.

    check_run_dir(out_dir)                           # before anything in it is touched (the lock, crash repair)
    state = open_run_dir(out_dir, resume, overwrite)  # last/'s checked train state when resuming
    check_same_experiment(out_dir / "last", cfg.to_dict())               # the settings that make the experiment
    check_same_model(out_dir / "last", asdict(cfg.model), prepared.meta)   # same vocabulary, tokenizer and data

A run directory is empty, absent, or a run of this project: a `config.json` of train.py's tables beside
whatever the run wrote (and what the user put there, never touched), or, before that file is written,
nothing but a run's own names. Anything else (a Hugging Face export, an imported checkpoint, a folder of
the user's) is refused before a lock file is created in it or a leftover is cleaned from it.
"""

import hashlib
import json
import os
import re
import shlex
import shutil
from dataclasses import asdict, fields
from pathlib import Path
from types import SimpleNamespace

import torch

from cli.errors import UserError
from common.heads_off import read_heads
from data.config import DataConfig
from model import GPTConfig
from storage.atomic import signals_held
from storage.checkpoint import (SNAPSHOTS, CheckpointError, expected_shapes, load_train_state, read_config, read_json,
                                read_meta, read_model_table)  # fmt: skip

RUN_CONTENT = ("best/", "last/", "metrics.jsonl", f"{SNAPSHOTS}/")  # what a new run would replace
REPLACED = ("best", "last", "metrics.jsonl", "loss.png", "heads.png", "config.json", SNAPSHOTS)  # what --overwrite deletes
RUN_TABLES = {"data", "model", "train", "log", "auto", "run_id"}  # the keys of a run's config.json (RunConfig.to_dict)
# what a run writes besides REPLACED: the lock, leftovers of a crashed save or atomic write, wandb's folder
LEFTOVER = re.compile(r"\.lock|(best|last)\.old|\.tmp-(best|last)|wandb|\.(config\.json|metrics\.jsonl|(loss|heads)\.png)\..+\.tmp")


def check_run_dir(out_dir: Path) -> None:
    """UserError unless `out_dir` is absent, empty or a run of this project (module docstring); a path that
    is a file or a dangling link is left to the lock, which names it."""
    if not out_dir.is_dir():
        return
    try:
        names = sorted(os.listdir(out_dir))
    except OSError as e:
        raise UserError(f"cannot read the run directory {out_dir} ({e.strerror}); pass --out a readable directory") from None
    if "config.json" in names:
        config = read_json(out_dir / "config.json", "restore it, or pass --out another directory", UserError)
        if is_run_config(config):
            return
        foreign = ["config.json (not a run's: " + describe(config) + ")"]
    else:
        foreign = [name for name in names if name not in REPLACED and not LEFTOVER.fullmatch(name)]
    if foreign:
        raise UserError(f"{out_dir} is not a run directory of this project (it holds {', '.join(foreign[:3])}"
                        f"{', ...' if len(foreign) > 3 else ''}); pass --out a new or empty directory, or a run's")


def is_run_config(config) -> bool:
    """Whether a config.json's object is a run's (RunConfig.to_dict: train.py's tables, model and train among them)."""
    return isinstance(config, dict) and config.keys() <= RUN_TABLES and all(isinstance(config.get(t), dict)
                                                                           for t in ("model", "train"))


def describe(config) -> str:
    """What a foreign config.json looks like, in a few words."""
    if config is None:
        return "no file"
    if isinstance(config, dict) and "model_type" in config:
        return f"a Hugging Face {config['model_type']!r} model"
    if isinstance(config, dict) and "model" in config:
        return "a checkpoint"
    return f"keys {', '.join(map(str, config))}" if isinstance(config, dict) else type(config).__name__


def run_content(out_dir: Path) -> list[str]:
    """What of a run `out_dir` holds (best/, last/, metrics.jsonl, snapshots/): a new run there needs --overwrite."""
    return [name for name in RUN_CONTENT if (out_dir / name.rstrip("/")).exists()]


def open_run_dir(out_dir: Path, resume: bool, overwrite: bool = False) -> dict | None:
    """Check the run dir against --resume and --overwrite; last/'s train_state (checked) when resuming."""
    has_ckpt = (out_dir / "last" / "model.safetensors").exists()
    found = run_content(out_dir)
    if resume and overwrite:
        raise UserError("--resume continues the run in --out and --overwrite replaces it; pass only one")
    if resume and not has_ckpt:
        instead = "start it again with --overwrite instead" if found else "drop --resume to start a new run"
        raise UserError(f"nothing to resume in {out_dir} (no last/ checkpoint); {instead}")
    if found and not (resume or overwrite):
        keep = "continue it with --resume, " if has_ckpt else ""
        raise UserError(f"{out_dir} already holds a run ({', '.join(found)}); {keep}start another with --out NEW_DIR, "
                        f"or replace it with --overwrite")
    if not resume:
        return None
    state = load_train_state(out_dir / "last")
    check_train_state(state, out_dir / "last")
    return state


def clear_run(out_dir: Path) -> None:
    """Delete what a previous run left in out_dir (for --overwrite), all of it or, if a signal comes, none yet."""
    with signals_held():
        for name in REPLACED:
            path = out_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)


# What makes a run's experiment, fixed at its start (check_same_experiment): every [data] setting but where the
# data cache lies, every [model] setting but dropout (and vocab_size, which the tokenizer gives: check_same_model),
# where the weights came from and the heads kept off. The rest may change on a resume: the schedule (max_steps,
# lr, warmup, time_budget, ...), dropout, evaluation, logging, the speed layer.
IDENTITY = ([("train", name, default) for name, default in (("init_from", ""), ("heads_off", ""),
                                                              ("heads_off_mode", "mean"))]
            + [("model", f.name, f.default) for f in fields(GPTConfig) if f.name not in ("vocab_size", "dropout")]
            + [("data", f.name, f.default) for f in fields(DataConfig) if f.name != "cache_dir"])  # fmt: skip


def check_same_experiment(ckpt: Path, config: dict) -> None:
    """Refuse a resume whose settings (`config`: RunConfig.to_dict) would change what the run in `ckpt` is an
    experiment of (IDENTITY), in one line that names the first such setting and the value the run has."""
    saved = read_json(ckpt / "config.json", "restore it from the run, or start a new run with --out") or {}
    shape = {**asdict(GPTConfig()), **(saved.get("model") if isinstance(saved.get("model"), dict) else {})}
    for section, key, default in IDENTITY:
        table = saved.get(section) if isinstance(saved.get(section), dict) else {}
        was, now = table.get(key, default), config[section][key]  # a setting added since: its default then
        if key == "heads_off":  # the heads themselves: "1.0,0.1" and ["0.1", "1.0"] keep the same ones off
            was, now = (kept_off_heads(v, shape["n_layer"], shape["n_head"]) for v in (table.get(key, default), now))
        if was != now:
            value = table.get(key, default)
            option = shlex.quote(f"--{section}.{key}={value if isinstance(value, str) else json.dumps(value)}")
            given = json.dumps(config[section][key], ensure_ascii=False)
            raise UserError(f"cannot resume from {ckpt}: the run has {section}.{key} = {json.dumps(value, ensure_ascii=False)} "
                            f"from its first step and this command gives {given}, which would make it another "
                            f"experiment; resume with {option}, or start a new run with --out")


def kept_off_heads(text, n_layer: int, n_head: int):
    """The heads train.heads_off `text` keeps off in a model of that shape, or the text itself if it names none."""
    try:
        config = SimpleNamespace(n_layer=n_layer, n_head=n_head)
        return read_heads(text, "train.heads_off", config, layers=True) if text else []
    except (UserError, AttributeError):
        return text


def check_same_model(ckpt: Path, model_config: dict, meta: dict) -> None:
    """Refuse to resume with a vocabulary, tokenizer or data other than the checkpoint's (the settings are
    check_same_experiment's): best/ and patience compare validation losses, which must be measured on the same text."""
    saved, saved_meta = read_model_table(ckpt), read_meta(ckpt)
    if saved_meta is None:
        raise CheckpointError(f"{ckpt / 'meta.json'} is missing, so the data it was trained on is unknown; copy it back "
                              "from the run's data cache, or start a new run with --out")
    vocab = model_config["vocab_size"]
    changed = [f"model.vocab_size {saved.get('vocab_size')} -> {vocab}"] if saved.get("vocab_size") != vocab else []
    # The sha256 of the token shards, recorded by data.prepare and copied into the checkpoint's meta.json. A new
    # training text trains a new tokenizer, which encodes the same validation text differently: then the
    # training text is the cause to name.
    new_tokenizer = saved_meta.get("tokenizer_hash") != meta.get("tokenizer_hash")
    texts = {"train.bin": "the training text"} | ({} if new_tokenizer else {"val.bin": "the validation text"})
    differ = [what for file, what in texts.items() if shard_digest(saved_meta, file) != shard_digest(meta, file)
              and shard_digest(saved_meta, file) is not None]  # fmt: skip
    if new_tokenizer and not differ:
        changed.append("the tokenizer (data settings)")
    if changed:
        raise UserError(
            f"cannot resume from {ckpt}: the model differs ({', '.join(changed)}); "
            "use the checkpoint's settings (see its config.json) or start a new run with --out"
        )
    if differ:  # a new corpus trains a new tokenizer too: the text is the cause to name
        raise UserError(
            f"cannot resume from {ckpt}: {' and '.join(differ)} changed since it was saved (data.source, "
            "data.val_source or a [data] setting), so its best validation loss would be compared with losses of "
            "another text; resume with the data it was trained on (see its config.json) or start a new run with --out"
        )


def run_identity(config: dict, meta: dict, saved: dict | None) -> str:
    """The run's identity, written into its config.json and every checkpoint's: a hash of the config it started
    with and its data (the token shards' sha256), kept by every resume. A snapshot copied in from another run
    carries another (storage.checkpoint.run_snapshots); "" for a run begun before identities existed."""
    if saved is not None:
        return saved.get("run_id", "")
    data = {file: shard_digest(meta, file) for file in ("train.bin", "val.bin")} | {"tokenizer": meta.get("tokenizer_hash")}
    return hashlib.sha256(json.dumps([config, data], sort_keys=True).encode()).hexdigest()[:16]


def check_same_best(state: dict, best_by: str, ckpt: Path) -> None:
    """Refuse to resume with another train.best_by than the run's: best/ would be compared by a new measure."""
    was = state.get("best_by", "val_loss")  # a run saved before train.best_by existed kept the lowest val_loss
    if was != best_by:
        raise UserError(f'cannot resume from {ckpt}: its best/ holds the lowest {was}, and train.best_by = "{best_by}" '
                        f"would compare it with another measure; resume with --train.best_by={was}, or start a new "
                        "run with --out")


def shard_digest(meta: dict, file: str) -> str | None:
    """The recorded sha256 of a prepared shard (None for data prepared before it was recorded)."""
    record = meta.get("files")
    entry = record.get(file) if isinstance(record, dict) else None
    return entry.get("sha256") if isinstance(entry, dict) else None


# The train state's fields and types, as train.py saves them (training/checkpoints.rng_state for "rng").
FLOAT = (int, float)
STATE = {"step": int, "best_val_loss": FLOAT, "best_step": int, "evals_since_best": int, "loss_sum": torch.Tensor,
         "n_summed": int, "optimizer": {"state": dict, "param_groups": list}, "scaler": dict, "ranks": list}
RANK = {"rng": {"torch": torch.Tensor, "cuda": list, "numpy": {"keys": torch.Tensor, "pos": int, "has_gauss": int,
                                                                "gauss": FLOAT},
                "python": {"version": int, "state": torch.Tensor}},
        "loader": {"rng_state": torch.Tensor}}  # fmt: skip
GENERATOR = (torch.uint8, torch.get_rng_state().numel())  # a torch.Generator's state
SIZES = {"rng.torch": GENERATOR, "rng.numpy.keys": (torch.int64, 624), "rng.python.state": (torch.int64, 625),
         "loader.rng_state": GENERATOR}  # fmt: skip


def check_train_state(state, ckpt: Path) -> None:
    """CheckpointError naming the first field of train_state.pt that is missing or of the wrong type or size,
    checked against the checkpoint's own model before any of it is used."""
    problem = schema_problem(state, STATE, "")
    ranks = state["ranks"] if problem is None else []
    problem = problem or ("it lists no process" if not ranks else None)
    for rank in ranks:
        problem = problem or schema_problem(rank, RANK, "ranks[].")
        for name, (dtype, size) in SIZES.items() if problem is None else ():
            value = rank
            for part in name.split("."):
                value = value[part]
            if value.dtype != dtype or value.numel() != size:
                problem = f"ranks[].{name} is not the state of a random generator"
    if problem is None:
        problem = optimizer_problem(state["optimizer"], list(expected_shapes(read_config(ckpt)).values()))
    if problem is not None:
        raise CheckpointError(f"{ckpt / 'train_state.pt'} is not a train state of this model ({problem}); restore it, "
                              "or start a new run with --out")


def schema_problem(value, schema, where: str) -> str | None:
    """The first way `value` differs from `schema` (a type, a tuple of types, or a dict of those), or None."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return f"{where.rstrip('.') or 'it'} is {type(value).__name__}, not a table"
        for key, inner in schema.items():
            if key not in value:
                return f"it lacks {where}{key}"
            problem = schema_problem(value[key], inner, f"{where}{key}.")
            if problem:
                return problem
        return None
    if isinstance(value, bool) or not isinstance(value, schema):
        return f"{where.rstrip('.')} is {type(value).__name__}"
    return None


def optimizer_problem(optimizer: dict, shapes: list[tuple]) -> str | None:
    """Whether AdamW's state fits the model: its two groups (matrices, then biases and gains, as train.py makes
    them) name every parameter once, and each moment has its parameter's shape."""
    groups = optimizer["param_groups"]
    expected = [[s for s in shapes if len(s) >= 2], [s for s in shapes if len(s) < 2]]
    if len(groups) != 2 or not all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups):
        return "optimizer.param_groups is not the two groups of this model"
    ids = [i for g in groups for i in g["params"]]
    if [len(g["params"]) for g in groups] != [len(e) for e in expected] or ids != list(range(len(shapes))):
        return f"optimizer.param_groups name {len(ids)} parameters, this model has {len(shapes)}"
    for i, moments in optimizer["state"].items():
        shape = (expected[0] + expected[1])[i] if isinstance(i, int) and 0 <= i < len(shapes) else None
        if shape is None or not isinstance(moments, dict):
            return f"optimizer.state has an entry {i!r} for no parameter"
        for name in ("exp_avg", "exp_avg_sq"):
            if not (isinstance(moments.get(name), torch.Tensor) and tuple(moments[name].shape) == shape):
                return f"optimizer.state[{i}].{name} is not a tensor of shape {shape}"
    return None

