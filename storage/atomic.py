"""Writes that never leave half a file or half a directory under the real name.

    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))   # any writer, given a temporary path
    write_text_atomic(path, text); write_json(path, {"a": 1}); write_npz(path, {"weights": array})
    write_directory(out, fill, ExportError)      # a whole directory, filled by fill(tmp), renamed into place
    swap_directory(tmp, final, old)              # the rename step alone (training's last/ and best/)
    write_files(out, {"a.png": write_a, "b.npz": write_b})   # a set of files beside others, moved in together
    with signals_held(): ...                     # Ctrl-C and SIGTERM wait until the block is done

A file is written under a temporary name in its own directory, synced and renamed over the real name, so
a crash leaves either the old file or the new one. A directory is filled under a temporary name, its files
synced, then the old one is renamed aside, the new one renamed in and the old one deleted: a crash between
the two renames leaves `old`, which the caller's crash repair renames back (training.checkpoints.recover);
Ctrl-C and SIGTERM are held between them, so only a crash can. A set of files is written into a hidden
temporary directory and moved in only once every one is written. A write that fails (a full or read-only
disk, a path through a file) raises `DiskError`, one line.
"""

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading
from pathlib import Path

import numpy as np
import safetensors

from cli.errors import UserError


class DiskError(UserError):
    """A file could not be written: a full or read-only disk, a missing permission, a path that is a file."""


def write_failure(e: Exception) -> str:
    """One line saying why a write failed ("No space left on device"), a DiskError's too."""
    if isinstance(e, DiskError) and e.__cause__ is not None:
        e = e.__cause__
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    text = " ".join(str(e).split())
    found = re.search(r"I/O error: (.+?) \(os error \d+\)", text)  # how safetensors words an OSError
    return found.group(1) if found else text


def umask() -> int:
    """The process's umask (reading it means setting it, so it is put back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_path(path: Path) -> None:
    """Flush a file or a directory (its entries: a rename) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write) -> Path:
    """Call write(tmp_path), fsync it, then rename it to `path` (same directory, so the rename is atomic).
    A failed write leaves `path` as it was, removes the temporary file and raises DiskError."""
    path, tmp = Path(path), None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        fsync_path(Path(tmp))
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; what is written here is an ordinary file
        os.replace(tmp, path)
    except BaseException as e:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, (OSError, safetensors.SafetensorError)):  # safetensors reports a full disk with its own type
            raise DiskError(f"cannot write {path} ({write_failure(e)}); free some disk space or choose a writable "
                            f"directory") from e
        raise
    return path


def write_text_atomic(path: Path, text: str) -> Path:
    """`atomic_write` of a UTF-8 text file."""
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_json(path: Path, obj) -> Path:
    """Indented UTF-8 JSON (Korean stays readable) ending in a newline, written atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """`np.savez` of `arrays`, atomically (through a file object: savez adds .npz to a bare file name)."""

    def write(tmp):
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)

    return atomic_write(path, write)


def swap_directory(tmp: Path, final: Path, old: Path) -> None:
    """Make the finished directory `tmp` the directory `final`: its files made ordinary (umask) and synced,
    the previous `final` renamed to `old`, `tmp` renamed to `final`, then `old` deleted."""
    mask = umask()
    for file in tmp.iterdir():
        os.chmod(file, 0o666 & ~mask)  # safetensors writes 0600; a checkpoint is meant to be shared
        fsync_path(file)
    fsync_path(tmp)
    with signals_held():
        if final.exists():
            shutil.rmtree(old, ignore_errors=True)  # a leftover of a swap that crashed after its renames
            os.rename(final, old)
        os.rename(tmp, final)
    fsync_path(final.parent)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def signals_held():
    """Ctrl-C and SIGTERM wait while the block runs (two renames, the deletions of --overwrite): whatever
    handles them is called as the block ends (a default action, such as SIGTERM's, is taken then), so
    they never stop it halfway."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread handles signals
        yield
        return
    caught, handlers = [], {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            handlers[signum] = signal.signal(signum, lambda n, frame: caught.append((n, frame)))
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        for signum, frame in caught:
            if callable(handlers[signum]):
                handlers[signum](signum, frame)
            else:
                signal.raise_signal(signum)


def write_files(out_dir: Path, writers: dict, error: type[UserError] = DiskError) -> list[Path]:
    """Write a set of files into the existing directory `out_dir` whole: `writers[name](path)` writes each
    one into a hidden temporary directory there, and only once all are written are they moved in (held
    from signals), beside whatever else the directory holds. A name taken by a directory, or a write that
    fails, leaves `out_dir` as it was and raises `error`."""
    out_dir = Path(out_dir)
    taken = [name for name in writers if (out_dir / name).is_dir()]
    if taken:
        raise error(f"{out_dir / taken[0]} is a directory; move it away or write to another directory")
    tmp = out_dir / f".tmp-{secrets.token_hex(4)}"
    try:
        tmp.mkdir()
        for name, write in writers.items():
            write(tmp / name)
        mask = umask()
        for name in writers:
            os.chmod(tmp / name, 0o666 & ~mask)
            fsync_path(tmp / name)
        with signals_held():
            for name in writers:
                os.replace(tmp / name, out_dir / name)
        fsync_path(out_dir)
    except (OSError, DiskError) as e:
        raise error(f"cannot write {out_dir} ({write_failure(e)}); free some disk space or choose a writable "
                    f"directory") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out_dir / name for name in writers]


def write_directory(out: Path, fill, error: type[UserError]) -> None:
    """Call fill(tmp) on a hidden temporary sibling of `out`, then swap it in for `out`.

    If anything fails, the temporary directory is removed and `out` is as it was. An OSError (a read-only
    or full disk, a parent that is a file: the user's to fix) becomes `error` with one line.
    """
    token = secrets.token_hex(4)
    tmp, old = out.parent / f".{out.name}.{token}.tmp", out.parent / f".{out.name}.old-{token}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
        try:
            fill(tmp)
            swap_directory(tmp, out, old)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        raise error(f"cannot write {out} ({e.strerror or e}); check the path and free space") from e


def check_out_dir(out: Path, source: Path, force: bool, error=UserError, writes: tuple[str, ...] = ()) -> Path:
    """The directory to write for `out`: refused (raising `error`) if it is a file, a dangling symbolic link,
    holds files (unless force, and then only the names in `writes`: what the command itself writes, so
    --force never deletes a run or a folder of the user's) or would swallow source; a link to a directory
    gives that directory, so the link is kept and what it points to is replaced."""
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
    foreign = sorted(p.name for p in out.iterdir() if p.name not in writes) if out.is_dir() else []
    if foreign:
        raise error(f"{out} holds {', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''}, which this command "
                    f"does not write; --force replaces only a directory it wrote: give a new or empty directory")
    return out
