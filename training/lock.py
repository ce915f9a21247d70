"""One trainer per run directory: `RUN/.lock`, held for the whole run.

    with RunLock(out_dir) as lock:   # released on leaving, however the run ends
        lock.acquire()  # UserError if RUN is a file, a dangling link, read-only, or another trainer holds it
        ...             # lock.release() also works by hand; a second call does nothing

The lock is an advisory `flock` on RUN/.lock, and the file names the holder's PID and host for the
refusal message. The kernel drops a flock when its process ends in any way, kill -9 included, so a
lock file left behind by a killed trainer is stale by construction: the next trainer finds no lock
held on it and takes it over. On release the file is deleted, and RUN too if this lock created it and
nothing else was written there. Under torchrun only rank 0 takes it.
"""

import fcntl
import os
import socket
from pathlib import Path

from cli.errors import UserError
from storage.atomic import DiskError, write_failure

LOCK = ".lock"


class RunLock:
    def __init__(self, out_dir: Path):
        self.out_dir, self.fd, self.created = Path(out_dir), None, False

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> None:
        out = self.out_dir
        if out.is_symlink() and not out.exists():
            raise UserError(f"the run directory {out} is a symbolic link to {os.readlink(out)}, which does not "
                            f"exist; create that directory or pass another --out")
        if out.exists() and not out.is_dir():
            raise UserError(f"the run directory {out} is a file; pass --out a directory (a new one or a run's)")
        lock = out / LOCK
        if lock.is_symlink() or (lock.exists() and not lock.is_file()):  # not a disk problem: name it
            raise UserError(f"{lock} is not the lock file a trainer leaves (it is a {describe(lock)}); remove it, "
                            f"or pass another --out")
        self.created = not out.exists()
        try:
            out.mkdir(parents=True, exist_ok=True)
            while self.fd is None:
                self.fd = self.take(out / LOCK)
        except OSError as e:
            self.remove_created()
            raise DiskError(f"cannot write the run directory {out} ({write_failure(e)}); pass --out a directory "
                            f"on a writable disk") from None

    def take(self, path: Path) -> int | None:
        """The fd of `path`, flocked and naming this process; None if the file was replaced meanwhile."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            os.close(fd)
            self.remove_created()
            who = f"process {holder[0]} on {holder[1]}" if len(holder) == 2 else "another process"
            raise UserError(f"{self.out_dir} is in use by {who}, a trainer writing to it; wait for it to end "
                            f"(or stop it), or pass another --out") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            path_now = os.stat(path)
        except FileNotFoundError:
            path_now = None
        if path_now is None or path_now.st_ino != os.fstat(fd).st_ino:  # the holder deleted it as we opened it
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        return fd

    def release(self) -> None:
        if self.fd is None:
            return
        (self.out_dir / LOCK).unlink(missing_ok=True)  # while still holding it, so no one locks a dead file
        os.close(self.fd)
        self.fd = None
        self.remove_created()

    def remove_created(self) -> None:
        """Remove RUN if this lock made it and it is empty (a run that failed before writing anything)."""
        if self.created:
            try:
                self.out_dir.rmdir()
            except OSError:
                pass
            self.created = False


def describe(path: Path) -> str:
    """What kind of thing `path` is, in a word or two."""
    return "symbolic link" if path.is_symlink() else "directory" if path.is_dir() else "special file"
