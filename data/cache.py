"""The prepared-data cache: what a reused directory must pass, and the leftovers of killed builds.

    problem = cache_problem(out)          # None, or what is wrong, e.g. "val.bin has 1001 bytes, ..."
    meta["files"] = file_records(out)     # at build time: each file's size and sha256
    remove_orphans(cache_dir)             # .tmp-* build dirs whose process (on this host) is gone

A build records the size and sha256 of tokenizer.json, train.bin and val.bin in meta.json; reuse
checks meta.json's keys and every file against that record (sha256 reads about 1.5 GB/s here, so a
200 MB corpus's shards take about 0.1 s), so a truncated, odd-length or edited shard, ids outside the
vocabulary included, is found and rebuilt instead of being trained on.
"""

import hashlib
import json
import os
import re
import shutil
import socket
from pathlib import Path

import numpy as np

FILES = ("tokenizer.json", "train.bin", "val.bin")
REQUIRED = ("vocab_size", "dtype", "eot_id", "splits", "tokenizer_hash", "files", "format")
HOST = re.sub(r"\W", "_", socket.gethostname())  # \w only, so a build dir's name parses back


def file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_records(out: Path) -> dict:
    return {name: {"bytes": (out / name).stat().st_size, "sha256": file_digest(out / name)} for name in FILES}


def cache_problem(out: Path) -> str | None:
    """What is wrong with the prepared dir `out`, or None when it holds what its meta.json recorded."""
    try:
        meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "meta.json is missing"
    except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"meta.json is not valid JSON: {e}"
    missing = [key for key in REQUIRED if key not in meta] if isinstance(meta, dict) else ["everything"]
    if missing:
        return f"meta.json lacks {', '.join(missing)}"
    for name in FILES:
        path = out / name
        if not path.is_file():
            return f"{name} is missing"
        try:
            want = meta["files"][name]
            tokens = meta["splits"][name.removesuffix(".bin")]["tokens"] if name.endswith(".bin") else None
            size = want["bytes"] if tokens is None else tokens * np.dtype(meta["dtype"]).itemsize
        except (KeyError, TypeError, ValueError) as e:
            return f"meta.json is damaged ({type(e).__name__}: {e})"
        if path.stat().st_size != size or want["bytes"] != size:
            return f"{name} has {path.stat().st_size} bytes, meta.json says {size}"
        if file_digest(path) != want["sha256"]:
            return f"{name} does not hold what was written (its sha256 differs from meta.json's)"
    return None


def build_dir(out: Path) -> Path:
    """Where `out` is built before its rename into place: named for this host and process."""
    return out.with_name(f".tmp-{out.name}-{HOST}-{os.getpid()}")


def remove_orphans(cache_dir: Path) -> None:
    """Delete the build dirs of preparations that were killed: this host's, whose PID no longer runs."""
    for path in Path(cache_dir).glob(".tmp-*") if Path(cache_dir).is_dir() else []:
        found = re.fullmatch(r"\.tmp-.+-(\w+)-(\d+)", path.name)
        if found and found[1] == HOST and not pid_alive(int(found[2])):
            shutil.rmtree(path, ignore_errors=True)  # ignored: a read-only cache can still be reused


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
