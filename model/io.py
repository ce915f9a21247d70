"""Checkpoint files: `model.safetensors` (weights) + `config.json` ({"model": {...}, ...}).

    model.save(dir, extra_config)  ->  save_checkpoint(model, dir, extra_config)
    GPT.load(path)                 ->  find_checkpoint, read_model_config, stored_shapes, load_weights
    write_directory(out, fill, error) ->  a whole directory (an export, an import) renamed into place

The LM head shares its matrix with the token embedding, so only `tok_emb.weight` is stored and
loading the embedding restores the head. Files are written to a temporary name, synced and then
renamed, so a crash never leaves half a file under the real name (a failed write raises `DiskError`).
Weights are never unpickled, and their header is checked against config.json before any memory is
allocated for them.
Every problem with the files on disk raises `CheckpointError` with a one-line message.
"""

import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path

import safetensors
import safetensors.torch

from model.errors import ArgumentParser, UserError, print_error

WEIGHTS, CONFIG = "model.safetensors", "config.json"
TIED = "lm_head.weight"  # stored once, as tok_emb.weight
REQUIRED = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")


class CheckpointError(UserError):
    """A checkpoint is missing, damaged or does not match the model."""


class DiskError(UserError):
    """A file could not be written: a full or read-only disk, a missing permission, a path that is a file."""


def write_failure(e: Exception) -> str:
    """One line saying why a write failed ("No space left on device")."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = " ".join(str(e).split())
    found = re.search(r"I/O error: (.+?) \(os error \d+\)", text)  # how safetensors words an OSError
    return found.group(1) if found else text


def atomic_write(path: Path, write) -> None:
    """Call write(tmp_path), fsync it, then rename it to `path` (same directory, so the rename is atomic).
    A failed write leaves `path` as it was, removes the temporary file and raises DiskError."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a checkpoint is an ordinary file
        os.replace(tmp, path)
    except (OSError, safetensors.SafetensorError) as e:  # safetensors reports a full disk with its own type
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise DiskError(f"cannot write {path} ({write_failure(e)}); free some disk space or choose a writable "
                        f"directory") from e
    except BaseException:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """`atomic_write` of a UTF-8 text file."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: Path, obj: dict) -> None:
    """Indented UTF-8 JSON (Korean stays readable), ending in a newline."""
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check_out_dir(out: Path, source: Path, force: bool, error=UserError) -> Path:
    """The directory to write for `out`: refused (raising `error`) if it is a file, a dangling symbolic link,
    holds files (unless force) or would swallow source; a link to a directory gives that directory, so the
    link is kept and what it points to is replaced."""
    if out.is_symlink():
        if not out.exists():
            raise error(f"{out} is a symbolic link to {os.readlink(out)}, which does not exist; create that "
                        f"directory or give another path")
        out = out.resolve()
    if out.exists() and not out.is_dir():
        raise error(f"{out} is a file; give a directory path to write to")
    target, source_dir = out.resolve(), source.resolve()
    if target == source_dir or target in source_dir.parents:
        raise error(f"{out} contains the checkpoint {source}; write to another directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise error(f"{out} exists and is not empty; choose a new directory or pass --force to replace it")
    return out


def write_directory(out: Path, fill, error: type[UserError]) -> None:
    """Call fill(tmp) on a hidden temporary sibling of out, sync its files, then rename it to out.

    An old non-empty out is renamed aside first and deleted after; if anything fails, the temporary
    directory is removed and out is as it was. An OSError (a read-only or full disk, a parent that is a
    file: the user's to fix) becomes `error` with one line.
    """
    try:
        write_directory_or_raise(out, fill)
    except OSError as e:
        raise error(f"cannot write {out} ({e.strerror or e}); check the path and free space") from e


def write_directory_or_raise(out: Path, fill) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp"  # same filesystem, so the rename is atomic
    tmp.mkdir()
    try:
        fill(tmp)
        umask = os.umask(0)  # the only way to read the umask is to set it, so put it back at once
        os.umask(umask)
        for file in tmp.iterdir():
            os.chmod(file, 0o666 & ~umask)  # safetensors writes 0600; the directory is meant to be shared
            with open(file, "rb") as f:
                os.fsync(f.fileno())
        if out.is_dir() and any(out.iterdir()):
            old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)  # also replaces an empty directory, atomically
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def directory_command(argv, prog: str, description: str, src: tuple[str, str], out: str, run) -> int:
    """The command line of `model.export_hf` and `model.import_hf`: SRC OUT [--force].

    `src` is the first argument's (name, help), `out` the second's name; `run(src, out, force)` does the work
    and returns the line to print. Bad input is one `error:` line and exit code 2.
    """
    parser = ArgumentParser(prog=prog, description=description)
    parser.add_argument(src[0], help=src[1])
    parser.add_argument(out, help="the directory to write; must not exist or be empty unless --force")
    parser.add_argument("--force", action="store_true", help=f"replace {out.upper()} if it already holds files")
    try:
        args = vars(parser.parse_args(argv))
        message = run(args[src[0]], args[out], args["force"])
    except UserError as e:
        print_error(e)
        return 2
    print(message)
    return 0


def save_checkpoint(model, directory, extra_config: dict | None = None) -> None:
    """Write the weights (tied head left out) and config.json into `directory` (created if needed)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: t.detach().cpu().contiguous() for k, t in model.state_dict().items() if k != TIED}
    config = {"model": asdict(model.config), **(extra_config or {})}
    atomic_write(directory / WEIGHTS, lambda tmp: safetensors.torch.save_file(tensors, tmp))
    write_text_atomic(directory / CONFIG, json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def load_tokenizer(path, hint: str = "restore it or retrain", error: type[UserError] = CheckpointError):
    """A `tokenizers.Tokenizer` from a tokenizer.json; `error(...)` ending with `hint` if missing or damaged."""
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.is_file():
        raise error(f"{path} is missing; {hint}")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception for unreadable JSON
        raise error(f"{path} is damaged ({str(e).splitlines()[0]}); {hint}") from None
    # One rule for training and inference: text is text, so a literal "<|endoftext|>" in a corpus or a
    # prompt is never the separator (only code inserts that). tokenizer.json cannot store this setting.
    tok.encode_special_tokens = True
    return tok


def tokenizer_hash(tokenizer) -> str:
    """A digest of the whole tokenizer (vocabulary, merges, normaliser, pre-tokenizer, decoder)."""
    return hashlib.sha256(tokenizer.to_str().encode()).hexdigest()


def end_of_text_id(ckpt: Path, tokenizer) -> int | None:
    """The id that separates documents: meta.json's "eot_id" (written with the data), else the tokenizer's
    first special token, else None."""
    meta_file = ckpt / "meta.json"
    if meta_file.is_file():
        try:
            eot_id = json.loads(meta_file.read_text(encoding="utf-8")).get("eot_id")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as e:
            raise CheckpointError(f"{meta_file} is damaged ({e}); copy it back from the run's data cache") from None
        if eot_id is not None and not (isinstance(eot_id, int) and tokenizer.id_to_token(eot_id) is not None):
            raise CheckpointError(f"{meta_file} names eot_id {eot_id!r}, which its tokenizer.json does not have")
        return eot_id
    special = sorted(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special)
    return special[0] if special else None


def find_checkpoint(path) -> Path:
    """A checkpoint dir as given, or a run dir's `best/` (else `last/`), or the dir of a model.safetensors."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist; pass a run directory (runs/<name>) or a checkpoint directory")
    if path.is_file() and path.name == WEIGHTS:
        return path.parent
    for candidate in (path, path / "best", path / "last"):
        if (candidate / WEIGHTS).is_file():
            return candidate
    raise CheckpointError(
        f"no {WEIGHTS} in {path} nor in {path}/best or {path}/last; "
        "pass a run directory (runs/<name>) or a checkpoint directory such as runs/<name>/last"
    )


def read_model_config(ckpt: Path) -> dict:
    """The `model` table of ckpt/config.json, checked to hold the sizes a GPT needs."""
    file = ckpt / CONFIG
    if not file.is_file():
        raise CheckpointError(f"{file} is missing; a checkpoint needs {CONFIG} beside {WEIGHTS} (re-save it)")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{file} is not valid JSON ({e}); restore it or re-save the checkpoint") from e
    model = config.get("model") if isinstance(config, dict) else None
    if not isinstance(model, dict):
        raise CheckpointError(f'{file} has no "model" object; re-save the checkpoint with GPT.save')
    missing = [k for k in REQUIRED if k not in model]
    if missing:
        raise CheckpointError(f"{file} lacks model.{', model.'.join(missing)}; re-save the checkpoint with GPT.save")
    return model


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


def load_weights(model, ckpt: Path) -> None:
    """Copy ckpt/model.safetensors into `model`, after checking every name and shape."""
    file = ckpt / WEIGHTS
    try:
        tensors = safetensors.torch.load_file(file)
    except Exception as e:  # safetensors raises its own error type for truncated or garbled files
        reason = " ".join(str(e).split())  # one line
        raise CheckpointError(f"{file} is damaged or truncated ({reason}); restore it or use another checkpoint") from e
    expected = {k: tuple(t.shape) for k, t in model.state_dict().items() if k != TIED}
    check_shapes(expected, {k: tuple(t.shape) for k, t in tensors.items()}, file)
    model.load_state_dict(tensors, strict=False)  # only the tied head is absent; loading tok_emb fills it
