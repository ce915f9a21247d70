"""Files a user names (a config, a corpus, a text to score, a .deb), read as untrusted input: the one way in.

    with open_user_file(path, "the .deb", "give the file apt-get download gives", CorpusError) as f:
        magic = f.read(8)                                   # the first bytes, whatever the file's size
    data = read_user_file(path, "config file", "pass --config a TOML file", limit=CONFIG_BYTES, error=ConfigError)

A name is checked to be a regular file before it is opened (`file_kind`), and the opened descriptor again (the
name may have changed in between): a FIFO would block the read forever, /dev/zero never ends, a directory or a
socket has no bytes. A whole read takes at most `limit` bytes, a bound that fits the kind of file (a config is
small, a text to score fits in memory), and comes in pieces of PIECE bytes, so Ctrl-C or SIGTERM stops it
between two pieces instead of after gigabytes.
"""

import os
import stat
from typing import BinaryIO

from cli.errors import UserError

PIECE = 1 << 20  # bytes a read takes at once: a signal waits for one piece at most
CONFIG_BYTES = 1 << 20  # a TOML run config: a few tables of short settings
TEXT_BYTES = 64 << 20  # a text read whole (--score, --heads-text): some 20 million Korean characters
JSON_BYTES = 64 << 20  # a checkpoint's config.json or meta.json: settings and a kept-off head's mean, kilobytes
KINDS = {stat.S_ISDIR: "a directory", stat.S_ISFIFO: "a FIFO (named pipe)", stat.S_ISCHR: "a character device",
         stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}  # fmt: skip


def file_kind(mode: int) -> str | None:
    """None for a regular file; else what it is ("a FIFO (named pipe)", "a directory", ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in KINDS.items() if test(mode)), "not a regular file")


def size_text(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def named(path, what: str) -> str:
    """How a message names the file: "config file configs/x.toml", or the path alone where `what` is ""."""
    return f"{what} {path}" if what else str(path)


def refusal(path, what: str, fix: str, error: type[UserError], e: OSError) -> UserError:
    """The one line for a name that cannot be opened: missing (a dangling link too), or unreadable."""
    if isinstance(e, FileNotFoundError):
        return error(f"{named(path, what)} does not exist; {fix}")
    return error(f"cannot read {named(path, what)} ({e.strerror or e}); {fix}")


def check_kind(path, what: str, fix: str, error: type[UserError] = UserError, directory: bool = False) -> bool:
    """`error` unless `path` names a regular file (or, with `directory`, a directory); whether it is a directory."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:  # missing, a loop of links, a name too long, no permission
        raise refusal(path, what, fix, error, e) from None
    kind = file_kind(mode)
    if kind is None or (directory and stat.S_ISDIR(mode)):
        return stat.S_ISDIR(mode)
    instead = "a file or a directory" if directory else "a regular file"
    raise error(f"{named(path, what)} is {kind}, not {instead}; {fix}")


def open_user_file(path, what: str, fix: str, error: type[UserError] = UserError, limit: int | None = None) -> BinaryIO:
    """`path` opened for binary reading once it is checked to be a regular file (`check_kind`, then the opened
    descriptor: a FIFO put in its place meanwhile is refused too, and opening it does not wait for a writer);
    `error` "`what` PATH ...; `fix`" otherwise, or when it is larger than `limit` bytes."""
    check_kind(path, what, fix, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise refusal(path, what, fix, error, e) from None
    try:
        info = os.fstat(fd)
        kind = file_kind(info.st_mode)
        if kind is not None:
            raise error(f"{named(path, what)} is {kind}, not a regular file; {fix}")
        if limit is not None and info.st_size > limit:
            raise error(f"{named(path, what)} is {size_text(info.st_size)}, more than the {size_text(limit)} such a "
                        f"file may be; {fix}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_pieces(f: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes of `f` (and one more, to tell a file that grew past it), a PIECE at a time."""
    pieces, size = [], 0
    while size <= limit:
        piece = f.read(min(PIECE, limit + 1 - size))
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


def read_user_file(path, what: str, fix: str, limit: int, error: type[UserError] = UserError) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them (`open_user_file`'s checks and lines); an
    error on the way (a disk error, a file removed meanwhile) is `error` naming the file."""
    with open_user_file(path, what, fix, error, limit) as f:
        try:
            data = read_pieces(f, limit)
        except OSError as e:
            raise refusal(path, what, fix, error, e) from None
    if len(data) > limit:  # it grew after its size was read
        raise error(f"{named(path, what)} is more than the {size_text(limit)} such a file may be; {fix}")
    return data
