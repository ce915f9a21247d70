"""Debian packages, fetched with the system's own apt and read without installing them.

    deb = download("debian-faq-ko", into)           # apt-get download: no root, the machine's apt sources
    version = deb_field(deb, "Version")             # from the package's control file
    for path, data in deb_files(deb, "usr/share/doc/debian/FAQ/ko/"): ...   # its files there, in path order

A .deb is an `ar` archive of control.tar.* and data.tar.*; Python reads the archive and the tar (xz, gzip,
bzip2 or none, as Debian builds them). Ubuntu compresses with zstd, which Python's tarfile reads only from
3.14 on: there `dpkg-deb`, which every Debian and Ubuntu has, unpacks it.
"""

import io
import lzma
import re
import shutil
import subprocess
import tarfile
import zlib
from pathlib import Path

from data.config import DataError


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


def ar_members(deb: Path) -> dict[str, bytes]:
    """The members of the ar archive `deb` by name; CorpusError if it is not one."""
    try:
        data = deb.read_bytes()
    except OSError as e:
        raise CorpusError(f"cannot read {deb} ({e.strerror or e}); give a readable .deb file") from None
    if not data.startswith(AR_MAGIC):
        raise CorpusError(f"{deb} is not a Debian package (.deb); give the file apt-get download or "
                          f"packages.debian.org gives")
    members, at = {}, len(AR_MAGIC)
    while at + 60 <= len(data):
        header = data[at : at + 60]  # name 16, mtime 12, owner 6, group 6, mode 8, size 10, "`\n"
        try:
            size = int(header[48:58])
        except ValueError:
            raise CorpusError(f"{deb} is damaged (a bad ar header); download it again") from None
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        members[name] = data[at + 60 : at + 60 + size]
        at += 60 + size + size % 2  # members start on even offsets
    return members


def member_tar(deb: Path, kind: str) -> tarfile.TarFile:
    """The control or data tar (`kind`) of `deb`, opened for reading."""
    members = ar_members(deb)
    name = next((n for n in members if n.startswith(f"{kind}.tar")), None)
    if name is None:
        raise CorpusError(f"{deb} has no {kind}.tar member; it is damaged or not a Debian package")
    compression = name[len(f"{kind}.tar") :]
    if compression in TAR_MODES:
        return tarfile.open(fileobj=io.BytesIO(members[name]), mode=TAR_MODES[compression])
    dpkg = shutil.which("dpkg-deb")
    if dpkg is None:
        raise CorpusError(f"{deb}'s {name} needs dpkg-deb to unpack (Python reads no {compression}); install dpkg "
                          f"or use Python 3.14")
    option = "--fsys-tarfile" if kind == "data" else "--ctrl-tarfile"
    done = subprocess.run([dpkg, option, str(deb)], capture_output=True)
    if done.returncode != 0:
        raise CorpusError(f"dpkg-deb could not unpack {deb} ({done.stderr.decode(errors='replace').strip()}); "
                          f"download it again")
    return tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r:")


def deb_field(deb: Path, field: str) -> str:
    """A field of the package's control file ("Package", "Version")."""
    try:
        with member_tar(deb, "control") as tar:
            member = next((m for m in tar.getmembers() if m.name.lstrip("./") == "control"), None)
            text = tar.extractfile(member).read().decode("utf-8", "replace") if member else ""
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as e:  # a cut or corrupted download
        raise CorpusError(f"{deb} is damaged ({e}); download it again") from None
    found = re.search(rf"^{field}:\s*(.+)$", text, flags=re.M)
    if found is None:
        raise CorpusError(f"{deb} has no {field} in its control file; it is damaged or not a Debian package")
    return found.group(1).strip()


def deb_files(deb: Path, *prefixes: str) -> list[tuple[str, bytes]]:
    """Each regular file of `deb` whose path starts with one of `prefixes`, as (path, bytes), in path order."""
    files = []
    try:
        with member_tar(deb, "data") as tar:
            for member in tar:
                path = member.name.removeprefix("./")
                if member.isfile() and path.startswith(prefixes):
                    files.append((path, tar.extractfile(member).read()))
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError, zlib.error) as e:  # a cut or corrupted download
        raise CorpusError(f"{deb} is damaged ({e}); download it again") from None
    return sorted(files)
