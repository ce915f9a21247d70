"""Checkpoint directories: the one module that writes and reads them.

    save_model(model, directory, extra_config)    # model.safetensors + config.json, atomically
    model = load_model("runs/small", device)      # a run dir (its best/, else last/) or a checkpoint dir
    kept = load_kept_off(model, ckpt)             # the heads its run kept off (train.heads_off), off in it too
    tok, eot_id = checkpoint_tokenizer(ckpt, model.config.vocab_size)
    start = open_checkpoint("runs/small")         # config, tokenizer and end-of-text now, weights on demand
    save_train_state(state, path); state = load_train_state(ckpt)   # a run's last/ and best/ only
    snapshot_dirs("runs/lesson")                  # RUN/snapshots/step_<step>/, checkpoint dirs by step

A checkpoint dir holds `model.safetensors` (weights), `config.json` ({"model": asdict(GPTConfig), ...}),
`tokenizer.json` and `meta.json` (the data's end-of-text id and tokenizer hash); a run's last/ and best/
add `train_state.pt` (optimizer, counters, RNG and loader states: only tensors and plain values, so
`torch.load(weights_only=True)` reads it without unpickling code); training/checkpoints.py swaps those in.
The LM head shares its matrix with the token embedding, so only `tok_emb.weight` is stored and loading the
embedding restores the head. Weights are never unpickled, and their header is checked against config.json
before any memory is allocated for them. Every problem with the files on disk raises `CheckpointError` with
a one-line message.
"""

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import safetensors
import safetensors.torch
import torch

from cli.errors import ModelConfigError, UserError, check_utf8
from common.heads_off import HeadsOff
from data.tokenizer import check_fits, load_tokenizer, special_ids, tokenizer_hash
from model import GPT, GPTConfig
from storage.atomic import atomic_write, write_json
from storage.user_files import JSON_BYTES, read_user_file

WEIGHTS, CONFIG, TOKENIZER, META = "model.safetensors", "config.json", "tokenizer.json", "meta.json"
STATE = "train_state.pt"  # a run's checkpoints only
TIED = "lm_head.weight"  # stored once, as tok_emb.weight
REQUIRED = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")
FREE = ("dropout",)  # settings a fine-tune may change; block_size may shrink; the rest is the weights' shape


class CheckpointError(UserError):
    """A checkpoint is missing, damaged or does not match the model."""


class PretrainedError(UserError):
    """A setting contradicts the weights it should start from."""


def save_model(model: GPT, directory, extra_config: dict | None = None) -> None:
    """Write the weights (tied head left out) and config.json ({"model": ..., **extra_config}) into
    `directory` (created if needed), each file atomically."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: t.detach().cpu().contiguous() for k, t in model.state_dict().items() if k != TIED}
    atomic_write(directory / WEIGHTS, lambda tmp: safetensors.torch.save_file(tensors, tmp))
    write_json(directory / CONFIG, {"model": asdict(model.config), **(extra_config or {})})


SNAPSHOTS = "snapshots"  # RUN/snapshots/step_<step>/: a run's train.snapshots, checkpoint dirs without train_state.pt


STEP_NAME = re.compile(r"step_([0-9]+)")  # ASCII digits: "step_²" and "step_١٥" (isdigit() takes both) are no steps


def snapshot_dirs(run_dir) -> list[Path]:
    """The directories named like snapshots in RUN/snapshots/, by step (whose they are: `run_snapshots`)."""
    found = [d for d in (Path(run_dir) / SNAPSHOTS).glob("step_*") if STEP_NAME.fullmatch(d.name) and d.is_dir()]
    return sorted(found, key=snapshot_step)


def snapshot_step(snapshot: Path) -> int:
    return int(STEP_NAME.fullmatch(snapshot.name).group(1))


def run_snapshots(run_dir, model: dict, run_id: str) -> tuple[list[Path], list[str]]:
    """The snapshots of the run whose model table is `model` and whose identity is `run_id` (config.json's
    "run_id"; "" for a run from before identities, whose snapshots the model alone decides), by step; and a
    line for every other entry of RUN/snapshots/, saying why it is skipped: a copy from another run or of
    another shape would show another model's maps as this run's step."""
    folder, mine, skipped = Path(run_dir) / SNAPSHOTS, [], []
    if not folder.is_dir():
        return [], []
    defaults = asdict(GPTConfig())  # a setting added since a snapshot was saved has its default value there

    def shape_of(table: dict) -> dict:
        return {k: v for k, v in {**defaults, **table}.items() if k != "dropout"}  # dropout: a resume may change it

    shape = shape_of(model)
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".tmp-"):  # a snapshot being written, or one a crash left (training repairs it)
            continue
        why = None
        if not (STEP_NAME.fullmatch(entry.name) and entry.is_dir()):
            why = "not a directory named step_<ASCII digits>"
        else:
            try:
                config = read_json(entry / CONFIG, "") or {}
            except CheckpointError:
                config = {}
            theirs = config.get("model") if isinstance(config.get("model"), dict) else None
            if theirs is None or not (entry / WEIGHTS).is_file():
                why = f"no {CONFIG} with a model, or no {WEIGHTS}"
            elif shape_of(theirs) != shape:
                here = shape_of(theirs)
                why = "another model's (" + ", ".join(f"{k} {here[k]} here, {v} in the run" for k, v in shape.items()
                                                     if here[k] != v) + ")"  # fmt: skip
            elif config.get("run_id", "") != run_id:
                why = f"another run's (run_id {config.get('run_id') or 'none'}, this run's {run_id or 'none'})"
        if why:
            skipped.append(f"skipped {entry}: {why}")
        else:
            mine.append(entry)
    return sorted(mine, key=snapshot_step), skipped


def snapshots_of_run(run_dir) -> tuple[list[Path], list[str]]:
    """`run_snapshots` of a run directory, the run named by its config.json (else last/'s or best/'s)."""
    run_dir = Path(run_dir)
    if not (run_dir / SNAPSHOTS).is_dir():
        return [], []
    for where in (run_dir, run_dir / "last", run_dir / "best"):
        config = read_json(where / CONFIG, "restore it, or train the run again")
        if config is not None and isinstance(config.get("model"), dict):
            return run_snapshots(run_dir, config["model"], config.get("run_id", ""))
    raise CheckpointError(f"{run_dir} has no {CONFIG} of a training run (nor last/ or best/ one); pass the directory "
                          "train.py wrote (its --out)")


def find_checkpoint(path) -> Path:
    """A checkpoint dir as given, or a run dir's `best/` (else `last/`), or the dir of a model.safetensors."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist; pass a run directory (runs/<name>) or a checkpoint directory")
    check_utf8_path(path)
    if path.is_file() and path.name == WEIGHTS:
        return path.parent
    for candidate in (path, path / "best", path / "last"):
        if (candidate / WEIGHTS).is_file():
            return candidate
    raise CheckpointError(
        f"no {WEIGHTS} in {path} nor in {path}/best or {path}/last; "
        "pass a run directory (runs/<name>) or a checkpoint directory such as runs/<name>/last"
    )


def check_utf8_path(path) -> None:
    """UserError for a path with a byte that is not UTF-8, which safetensors and tokenizers cannot open (they
    would call the file damaged)."""
    check_utf8(str(path), f"the path {path}", "rename it: the safetensors and tokenizers libraries open only UTF-8 paths")


def is_checkpoint(path: Path) -> bool:
    """A run or checkpoint dir of this project: a config.json with a "model" table (and no Hugging Face
    model_type), whatever state its weights are in (find_checkpoint names what is wrong with them)."""
    for candidate in (path, path / "best", path / "last"):
        if (candidate / CONFIG).is_file():
            try:
                config = read_json(candidate / CONFIG, "")
            except UserError:
                return True  # ours or not, read_config gives the clearer message
            return isinstance(config, dict) and "model" in config and "model_type" not in config
    return False


def read_model_table(ckpt: Path) -> dict:
    """The `model` table of ckpt/config.json, checked to hold the sizes a GPT needs."""
    file = ckpt / CONFIG
    config = read_json(file, "restore it from the run the checkpoint came from")
    if config is None:
        raise CheckpointError(f"{file} is missing; a checkpoint needs {CONFIG} beside {WEIGHTS} (restore it from the run)")
    model = config.get("model")
    if "model_type" in config:  # a Hugging Face export (python -m hf.export_gpt2), or a model downloaded from the Hub
        raise CheckpointError(f"{ckpt} holds a Hugging Face {config['model_type']!r} model, not a checkpoint of this "
                              f"project; import it first: python -m hf.import_gpt2 {shlex.quote(str(ckpt))} OUT_DIR, "
                              "then give OUT_DIR")
    if not isinstance(model, dict):
        raise CheckpointError(f'{file} has no "model" object, so it is not a checkpoint train.py wrote; restore it '
                              "from the run, or give a run directory (runs/<name>) or its best/ or last/")
    missing = [k for k in REQUIRED if k not in model]
    if missing:
        raise CheckpointError(f"{file} lacks model.{', model.'.join(missing)}; restore it from the run the checkpoint "
                              "came from")
    return model


def read_config(ckpt: Path) -> GPTConfig:
    """The GPTConfig of a checkpoint dir."""
    try:
        return GPTConfig(**read_model_table(ckpt))
    except (TypeError, ModelConfigError) as e:
        raise CheckpointError(f'{ckpt / CONFIG} has bad "model" settings ({e}); restore the file') from e


def expected_shapes(config: GPTConfig) -> dict[str, tuple]:
    """Name -> shape of every stored tensor of a model of `config` (the tied head left out)."""
    with torch.device("meta"):  # the names and shapes the config implies, without allocating them
        return {k: tuple(t.shape) for k, t in GPT(config).state_dict().items() if k != TIED}


def stored_shapes(ckpt: Path) -> dict[str, tuple]:
    """Name -> shape of every tensor in ckpt/model.safetensors, read from its header alone."""
    file = ckpt / WEIGHTS
    try:
        with safetensors.safe_open(file, framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error type for truncated or garbled files
        raise CheckpointError(f"{file} is damaged or truncated ({' '.join(str(e).split())}); restore it or use "
                              f"another checkpoint") from None


def check_shapes(expected: dict[str, tuple], stored: dict[str, tuple], file: Path) -> None:
    """Refuse weights whose names or shapes differ from what the config implies."""
    missing = sorted(expected.keys() - stored.keys())
    unexpected = sorted(stored.keys() - expected.keys())
    if missing or unexpected:
        problems = [f"{what} {len(names)} tensors ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
                    for what, names in (("lacks", missing), ("has unknown", unexpected)) if names]  # fmt: skip
        raise CheckpointError(
            f"{file} {' and '.join(problems)} for its {CONFIG}; the weights and config come from different models"
        )
    for k, shape in expected.items():
        if stored[k] != shape:
            raise CheckpointError(
                f"{file}: {k} has shape {stored[k]} but {CONFIG} implies {shape}; "
                "the weights and config come from different models"
            )


def read_weights(ckpt: Path, config: GPTConfig) -> dict[str, torch.Tensor]:
    """ckpt/model.safetensors (tied head left out), its names and shapes checked against `config` first."""
    file = ckpt / WEIGHTS
    check_shapes(expected_shapes(config), stored_shapes(ckpt), file)  # the header: the tensors are what it says
    return read_safetensors(file, "restore it or use another checkpoint", CheckpointError)


def read_safetensors(file: Path, hint: str, error: type[UserError]) -> dict[str, torch.Tensor]:
    """The tensors of a .safetensors file, checked to be finite; a damaged file raises `error` ending with `hint`
    (our checkpoints and Hugging Face's model.safetensors alike)."""
    try:
        tensors = safetensors.torch.load_file(file)
    except Exception as e:  # safetensors raises its own error type for truncated or garbled files
        reason = " ".join(str(e).split())  # one line
        raise error(f"{file} is damaged or truncated ({reason}); {hint}") from e
    check_finite_weights(tensors, file, error)
    return tensors


def check_finite_weights(tensors: dict[str, torch.Tensor], file: Path, error: type[UserError]) -> None:
    """Refuse weights holding NaN or inf: every logit, score and page drawn from them would be NaN."""
    bad = next((name for name, t in tensors.items() if t.is_floating_point() and not torch.isfinite(t).all()), None)
    if bad is not None:
        raise error(f"{file} holds NaN or infinite values ({bad}), so nothing can be computed with it; use "
                    f"another checkpoint (a run's last/ keeps the last finite weights)")


def put_weights(model: GPT, tensors: dict[str, torch.Tensor]) -> None:
    """Copy a state dict as stored (every tensor but the tied head, names and shapes already checked) into
    `model`: the one way weights go into a model (load_weights, load_model, Pretrained.copy_into)."""
    result = model.load_state_dict(tensors, strict=False)  # only the tied head is absent; loading tok_emb fills it
    assert result.missing_keys == [TIED] and not result.unexpected_keys, result


def load_weights(model: GPT, ckpt: Path) -> None:
    """Copy ckpt/model.safetensors into `model`, after checking every name and shape."""
    put_weights(model, read_weights(ckpt, model.config))


def load_model(path, device="cpu") -> GPT:
    """A checkpoint dir (has model.safetensors) or a run dir (its best/, else last/) -> GPT in eval mode."""
    ckpt = find_checkpoint(path)
    config = read_config(ckpt)
    tensors = read_weights(ckpt, config)  # the header is checked first: a config that lies allocates nothing
    model = GPT(config)
    put_weights(model, tensors)
    return model.to(device).eval()


def kept_off_record(ckpt: Path) -> dict | None:
    """The heads the run kept off (its config.json's "kept_off", train.heads_off): their names, mode and means."""
    return (read_json(ckpt / CONFIG, "restore it or use another checkpoint") or {}).get("kept_off") or None


def load_kept_off(model: GPT, ckpt: Path) -> HeadsOff | None:
    """The heads the run kept off kept off in `model` (a checkpoint's network, from `load_model`) too, each giving
    the output that checkpoint's evaluation gave it (common.heads_off.HeadsOff), or None when it kept none."""
    kept = kept_off_record(ckpt)
    if not kept:
        return None
    try:
        return HeadsOff.from_record(model, kept)
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as e:
        raise CheckpointError(f"{ckpt / CONFIG} has a damaged \"kept_off\" ({e}); restore it from the run") from None


def read_metrics(path: Path, damaged: list | None = None) -> list[dict]:
    """The records of a metrics.jsonl; lines that are not a JSON object (a write cut short by a crash,
    garbage) are left out and appended to `damaged`."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_bytes().splitlines():
        record = parse_record(line)
        if record is not None:
            records.append(record)
        elif line.strip() and damaged is not None:
            damaged.append(line)
    return records


def parse_record(line: bytes) -> dict | None:
    """One line of metrics.jsonl as its record, or None: blank, or not a JSON object with a whole "step" (a write
    cut short, garbage)."""
    try:
        record = json.loads(line) if line.strip() else None
    except ValueError:  # UnicodeDecodeError is one too
        return None
    return record if isinstance(record, dict) and isinstance(record.get("step", 0), int) else None


def checkpoint_step(ckpt: Path) -> int | None:
    """The training step whose weights the checkpoint dir holds (its config.json), None if there is none."""
    try:
        return (read_json(ckpt / CONFIG, "") or {})["step"]
    except (UserError, KeyError):
        return None


def read_json(file: Path, hint: str, error: type[UserError] = CheckpointError) -> dict | None:
    """The JSON object in `file`, or None if nothing is there; one that cannot be read (a directory, a FIFO, a loop
    of links, past JSON_BYTES) or is damaged raises `error` ending with `hint`."""
    if not (file.is_symlink() or file.exists()):
        return None
    try:
        obj = json.loads(read_user_file(file, "", hint, JSON_BYTES, error).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise error(f"{file} is not valid JSON ({' '.join(str(e).split())}); {hint}") from None
    if not isinstance(obj, dict):
        raise error(f"{file} is not a JSON object; {hint}")
    return obj


def read_meta(ckpt: Path) -> dict | None:
    """ckpt/meta.json (the data's end-of-text id, tokenizer hash, ...), None if there is none."""
    return read_json(ckpt / META, "copy it back from the run's data cache")


def save_train_state(state: dict, path: Path) -> None:
    """torch.save, except that a failed write raises its OSError (torch reports only "unexpected pos")."""
    failed = []
    with open(path, "wb") as f:
        def write(data):
            try:
                return f.write(data)
            except OSError as e:
                failed.append(e)
                raise

        try:
            torch.save(state, SimpleNamespace(write=write, flush=f.flush))
        except RuntimeError:
            if failed:
                raise failed[0] from None
            raise


def load_train_state(ckpt: Path, mmap: bool = False) -> dict:
    """train_state.pt of a checkpoint dir, read without unpickling arbitrary objects (`mmap`: read no tensor
    until it is used)."""
    try:
        return torch.load(ckpt / STATE, map_location="cpu", weights_only=True, mmap=mmap)
    except FileNotFoundError:
        raise CheckpointError(f"{ckpt / STATE} is missing; this checkpoint cannot be resumed (start a new run with --out)") from None
    except Exception as e:  # torch raises several types for truncated or foreign files
        raise CheckpointError(f"{ckpt / STATE} is damaged ({e}); start a new run with --out") from None


def end_of_text_id(ckpt: Path, tokenizer) -> int | None:
    """The id that separates documents: meta.json's "eot_id" (written with the data), else the tokenizer's
    first special token, else None."""
    meta = read_meta(ckpt)
    if meta is not None:
        eot_id = meta.get("eot_id")
        if eot_id is not None and not (isinstance(eot_id, int) and tokenizer.id_to_token(eot_id) is not None):
            raise CheckpointError(f"{ckpt / META} names eot_id {eot_id!r}, which its tokenizer.json does not have")
        return eot_id
    special = special_ids(tokenizer)
    return special[0] if special else None


def checkpoint_tokenizer(ckpt: Path, vocab_size: int, need_eot: bool = False):
    """(tokenizer, end-of-text id or None) of a checkpoint dir, checked against a model of vocab_size rows."""
    file = ckpt / TOKENIZER
    tok = load_tokenizer(file, hint="a checkpoint keeps the tokenizer.json it was trained with beside its weights "
                                    "(copy it back)", error=CheckpointError)  # fmt: skip
    check_fits(tok, vocab_size, file, CheckpointError)
    eot_id = end_of_text_id(ckpt, tok)
    if eot_id is None and need_eot:
        raise CheckpointError(f"{ckpt} names no end-of-text token (no meta.json eot_id, no special token)")
    return tok, eot_id


@dataclass
class Pretrained:
    """A model to start from (train.init_from) or whose tokenizer to use (data.tokenizer), opened without
    reading its weights: a checkpoint of ours (`open_checkpoint`) or a Hugging Face GPT-2 (hf/import_gpt2.py)."""

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

    def check_encodes(self, meta: dict, option: str) -> None:
        """The prepared data (its meta.json) must be encoded with this model's tokenizer; `option`: the
        data.tokenizer setting, for the message."""
        if meta["tokenizer_hash"] != tokenizer_hash(self.tokenizer):
            raise UserError(f"data.tokenizer {option} is not the tokenizer of train.init_from {self.origin}; "
                            "leave data.tokenizer empty to encode the data with the model's own")

    def copy_into(self, model: GPT) -> None:
        """Put the weights into a new model of a config from `model_config` (the position table cropped)."""
        state = self.load_state()
        state["pos_emb.weight"] = state["pos_emb.weight"][: model.config.block_size].clone()  # (block_size, C)
        put_weights(model, state)


def open_checkpoint(path) -> Pretrained:
    """A run or checkpoint dir of this project as a Pretrained."""
    ckpt = find_checkpoint(path)
    config = read_config(ckpt)
    tok, eot_id = checkpoint_tokenizer(ckpt, config.vocab_size, need_eot=True)
    check_shapes(expected_shapes(config), stored_shapes(ckpt), ckpt / WEIGHTS)  # the header now, before any data work
    return Pretrained(ckpt, str(ckpt.resolve()), config, tok, ckpt / TOKENIZER, tok.id_to_token(eot_id), eot_id,
                      lambda: read_weights(ckpt, config))  # fmt: skip
