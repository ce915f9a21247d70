"""Debian packages, fetched with the system's own apt and read without installing them.

    deb = download("debian-faq-ko", into)           # apt-get download: no root, the machine's apt sources
    version = deb_field(deb, "Version")             # from the package's control file
    for path, data in deb_files(deb, "usr/share/doc/debian/FAQ/ko/"): ...   # its files there, in path order

A .deb is an `ar` archive of control.tar.* and data.tar.*; Python reads the archive and the tar (xz, gzip,
bzip2 or none, as Debian builds them). Ubuntu compresses with zstd, which Python's tarfile reads only from
3.14 on: there `dpkg-deb`, which every Debian and Ubuntu has, unpacks it. A .deb is whatever file the user
named: its magic is checked on its first bytes, its members are read in place a piece at a time (never the
whole file at once), and a file inside it is refused past FILE_BYTES before it is read.
"""

import contextlib
import hashlib
import io
import lzma
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from data.config import DataError
from storage.user_files import open_user_file


class CorpusError(DataError):
    """A corpus that cannot be built or used here; the message says what to do."""


AR_MAGIC = b"!<arch>\n"
TAR_MODES = {"": "r:", ".xz": "r:xz", ".gz": "r:gz", ".bz2": "r:bz2"}
HAND_MADE = ("bring the package by hand: download {package}'s .deb from https://packages.debian.org/{package} "
             "and give it as --deb FILE")


def download(package: str, into: Path) -> Path:
    """`apt-get download package` into the folder `into`; the .deb it wrote. CorpusError, with what to do, when
    there is no apt-get, apt does not know the package, or the download fails (no network)."""
    apt = shutil.which("apt-get")
    if apt is None:
        raise CorpusError(f"building this corpus needs apt-get (Debian, Ubuntu, WSL, Colab), which this system "
                          f"lacks; {HAND_MADE.format(package=package)}")
    try:
        done = subprocess.run([apt, "download", package], cwd=into, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        raise CorpusError(f"apt-get download {package} took more than 30 minutes; check the network, or "
                          f"{HAND_MADE.format(package=package)}") from None
    debs = sorted(into.glob("*.deb"))
    if done.returncode == 0 and len(debs) == 1:
        return debs[0]
    said = [line[3:].strip() for line in done.stderr.splitlines() if line.startswith("E: ")]
    reason = said[0] if said else (done.stderr.strip().splitlines() or ["no message"])[-1]
    if "Unable to locate package" in reason or "has no installation candidate" in reason:
        raise CorpusError(f"apt does not know the package {package} ({reason}); update its lists (sudo apt-get "
                          f"update) and try again, or {HAND_MADE.format(package=package)}")
    raise CorpusError(f"apt-get download {package} failed ({reason}); check the network and the apt sources, or "
                      f"{HAND_MADE.format(package=package)}")


DEB_FIX = "give the .deb file apt-get download or packages.debian.org gives"
FILE_BYTES = 64 << 20  # a page or copyright file of a package: larger is no documentation (a decompression bomb)
FILES_BYTES = 2 << 30  # the pages of one corpus together (gimp-help-ko's Korean folder: some 5 MB)


def open_deb(deb: Path) -> BinaryIO:
    """`deb` open for reading, a regular file whose first bytes are an ar archive's magic; CorpusError otherwise
    (storage/user_files.py: a FIFO or /dev/zero is refused before a byte is read)."""
    f = open_user_file(deb, "the .deb", DEB_FIX, CorpusError)
    try:
        magic = f.read(len(AR_MAGIC))
    except OSError as e:
        f.close()
        raise CorpusError(f"cannot read {deb} ({e.strerror or e}); {DEB_FIX}") from None
    if magic != AR_MAGIC:
        f.close()
        raise CorpusError(f"{deb} is not a Debian package (.deb); {DEB_FIX}")
    return f


def ar_members(f: BinaryIO, deb: Path) -> dict[str, tuple[int, int]]:
    """The members of the ar archive open in `f`, by name: (offset, size) in the file, from their headers alone."""
    end = os.fstat(f.fileno()).st_size
    members, at = {}, len(AR_MAGIC)
    while at + 60 <= end:
        f.seek(at)
        header = f.read(60)  # name 16, mtime 12, owner 6, group 6, mode 8, size 10, "`\n"
        size = int(header[48:58]) if header[48:58].strip().isdigit() else -1
        if size < 0 or at + 60 + size > end:
            raise CorpusError(f"{deb} is damaged (a bad ar header, or a member cut short); download it again")
        members[header[:16].decode("ascii", "replace").strip().rstrip("/")] = (at + 60, size)
        at += 60 + size + size % 2  # members start on even offsets
    return members


class Member(io.RawIOBase):
    """Bytes start .. start + size of the open file `f`, as a file of their own: tarfile reads a member in place."""

    def __init__(self, f: BinaryIO, start: int, size: int):
        self.f, self.start, self.size, self.pos = f, start, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = max(0, min(len(buffer), self.size - self.pos))
        self.f.seek(self.start + self.pos)
        data = self.f.read(n)
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.pos = max(0, {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence] + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos


@contextlib.contextmanager
def member_tar(deb: Path, kind: str) -> Iterator[tarfile.TarFile]:
    """The control or data tar (`kind`) of `deb`, open for reading in archive order, streamed: read from the .deb
    in place, or from dpkg-deb's output for a compression Python lacks."""
    with open_deb(deb) as f:
        members = ar_members(f, deb)
        name = next((n for n in members if n.startswith(f"{kind}.tar")), None)
        if name is None:
            raise CorpusError(f"{deb} has no {kind}.tar member; it is damaged or not a Debian package")
        compression = name[len(f"{kind}.tar") :]
        if compression in TAR_MODES:
            member = io.BufferedReader(Member(f, *members[name]))
            with tarfile.open(fileobj=member, mode=TAR_MODES[compression]) as tar:
                yield tar
            return
    dpkg = shutil.which("dpkg-deb")
    if dpkg is None:
        raise CorpusError(f"{deb}'s {name} needs dpkg-deb to unpack (Python reads no {compression}); install dpkg "
                          f"or use Python 3.14")
    option = "--fsys-tarfile" if kind == "data" else "--ctrl-tarfile"
    with tempfile.TemporaryFile() as said:  # its stderr, which a pipe nobody reads could fill and block
        dpkg_deb = subprocess.Popen([dpkg, option, str(deb)], stdout=subprocess.PIPE, stderr=said)
        try:
            with tarfile.open(fileobj=dpkg_deb.stdout, mode="r|") as tar:
                yield tar
        except tarfile.TarError:
            if dpkg_deb.wait() == 0:
                raise
            said.seek(0)
            raise CorpusError(f"dpkg-deb could not unpack {deb} ({said.read(1000).decode(errors='replace').strip()}); "
                              f"download it again") from None
        finally:
            dpkg_deb.stdout.close()
            if dpkg_deb.poll() is None:
                dpkg_deb.kill()
            dpkg_deb.wait()


def member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, deb: Path) -> bytes:
    """A regular file of the tar, refused past FILE_BYTES before a byte of it is read."""
    if member.size > FILE_BYTES:
        raise CorpusError(f"{deb} holds {member.name} of {member.size:,} bytes, more than a page of documentation "
                          f"({FILE_BYTES:,}); it is damaged or not the package: {DEB_FIX}")
    return tar.extractfile(member).read()


DAMAGED = (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error)  # what a cut or corrupted download raises


def deb_field(deb: Path, field: str) -> str:
    """A field of the package's control file ("Package", "Version")."""
    text = ""
    try:
        with member_tar(deb, "control") as tar:
            for member in tar:
                if member.name.lstrip("./") == "control" and member.isfile():
                    text = member_bytes(tar, member, deb).decode("utf-8", "replace")
                    break
    except DAMAGED as e:
        raise CorpusError(f"{deb} is damaged ({e}); download it again") from None
    found = re.search(rf"^{field}:\s*(.+)$", text, flags=re.M)
    if found is None:
        raise CorpusError(f"{deb} has no {field} in its control file; it is damaged or not a Debian package")
    return found.group(1).strip()


def deb_files(deb: Path, *prefixes: str) -> list[tuple[str, bytes]]:
    """Each regular file of `deb` whose path starts with one of `prefixes`, as (path, bytes), in path order."""
    files, total = [], 0
    try:
        with member_tar(deb, "data") as tar:
            for member in tar:
                path = member.name.removeprefix("./")
                if member.isfile() and path.startswith(prefixes):
                    total += member.size
                    if total > FILES_BYTES:
                        raise CorpusError(f"{deb} holds more than {FILES_BYTES:,} bytes of pages; it is not the "
                                          f"package: {DEB_FIX}")
                    files.append((path, member_bytes(tar, member, deb)))
    except DAMAGED as e:
        raise CorpusError(f"{deb} is damaged ({e}); download it again") from None
    return sorted(files)


def deb_sha256(deb: Path) -> str:
    """The sha256 of the .deb's bytes, read a piece at a time."""
    with open_deb(deb) as f:
        f.seek(0)
        try:
            return hashlib.file_digest(f, "sha256").hexdigest()
        except OSError as e:
            raise CorpusError(f"cannot read {deb} ({e.strerror or e}); {DEB_FIX}") from None
