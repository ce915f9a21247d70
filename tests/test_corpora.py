"""The real corpora (data/corpora/__init__.py): the extraction of data/corpora/extract.py on real pages of the
packages (tests/fixtures/corpora), a .deb read as data/corpora/debian.py reads what apt gives, the folder and notes
of data/corpora/build.py, its reuse, every refusal of data/corpora/__main__.py, the list of data/corpora/catalog.py,
corpus:NAME in a run, and each listed corpus built through apt."""

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import unicodedata
from pathlib import Path

import pytest

from data import prepare
from data.corpora import CORPORA, CorpusError, build_corpus, corpus_folder
from data.corpora import __main__ as corpora_cli
from data.corpora import build as corpora_build
from data.corpora.catalog import find_corpus
from data.corpora.extract import MIN_HANGUL, hangul_share
from tests.conftest import ROOT, TINY, read_only_dir

FIXTURES = ROOT / "tests" / "fixtures" / "corpora"


def ar_member(name: str, data: bytes) -> bytes:
    header = f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode()
    return header + data + (b"\n" if len(data) % 2 else b"")


def tar_xz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo("./" + path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def make_deb(path: Path, package: str, version: str, files: dict[str, bytes]) -> Path:
    """A .deb as dpkg-deb builds one: an ar archive of debian-binary, control.tar.xz and data.tar.xz."""
    control = f"Package: {package}\nVersion: {version}\nArchitecture: all\n".encode()
    path.write_bytes(b"!<arch>\n" + ar_member("debian-binary", b"2.0\n") + ar_member("control.tar.xz", tar_xz(
        {"control": control})) + ar_member("data.tar.xz", tar_xz(files)))
    return path


def libreoffice_deb(tmp: Path, normalise=None) -> Path:
    folder = find_corpus("libreoffice-help").folder
    pages = {name: (FIXTURES / "libreoffice-help-ko" / name).read_bytes()
             for name in ("glossary.html", "basic_examples.html")}
    if normalise:
        pages = {k: unicodedata.normalize(normalise, v.decode()).encode() for k, v in pages.items()}
    return make_deb(tmp / "libreoffice-help-ko.deb", "libreoffice-help-ko", "4:7.4.7-1+deb12u14", {
        folder + "text/sbasic/shared/00000002.html": pages["glossary.html"],
        folder + "text/sbasic/guide/basic_examples.html": pages["basic_examples.html"],
        folder + "contents.js": b"var x;"})


def faq_deb(tmp: Path) -> Path:
    folder = find_corpus("debian-faq").folder
    return make_deb(tmp / "debian-faq-ko.deb", "debian-faq-ko", "11.1", {
        folder + "basic-defs.ko.html": (FIXTURES / "debian-faq-ko" / "basic-defs.ko.html").read_bytes(),
        "usr/share/doc/debian-faq-ko/copyright": (FIXTURES / "debian-faq-ko" / "copyright").read_bytes()})


def no_download(package, into):
    raise AssertionError("a build that is there is not downloaded again")


def test_a_libreoffice_page_keeps_its_korean_text_and_nothing_of_the_site_around_it(tmp_path):
    out, note, reused = build_corpus("libreoffice-help", tmp_path / "lo", libreoffice_deb(tmp_path))
    assert not reused
    assert sorted(p.name for p in out.iterdir()) == ["LICENSE", "SOURCE.json", "text.sbasic.shared.00000002.txt"]
    text = (out / "text.sbasic.shared.00000002.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "LibreOffice Basic 용어집"  # the title: Hangul 3 of 19 letters, above the line's share
    assert lines[1] == "이 용어집에는 LibreOffice Basic을 사용하면서 볼 수 있는 몇 가지 기술 용어가 설명되어 있습니다."
    # the menu path LibreOffice shows on Linux and Windows, not its hidden macOS twin
    assert "기본 치수 단위는 도구 - 기본 설정 - (문서 유형) - 일반에서 설정할 수 있습니다." in text
    assert "LibreOffice - 기본 설정" not in text
    for left_out in ("<", "LibreOffice 7.4 Help", "Module", "Index", "Help content debug info", "Title is",
                     "URL notation does not allow"):  # markup, the header, side bar and footer, an English line
        assert left_out not in text
    assert text == unicodedata.normalize("NFC", text) and text.endswith("\n") and "\n\n" not in text
    # the English page and the script are no documents
    source = json.loads((out / "SOURCE.json").read_text(encoding="utf-8"))
    assert source == note
    deb_bytes = (tmp_path / "libreoffice-help-ko.deb").read_bytes()
    assert (source["package"], source["version"], source["documents"]) == ("libreoffice-help-ko", "4:7.4.7-1+deb12u14", 1)
    assert source["deb_sha256"] == hashlib.sha256(deb_bytes).hexdigest()
    expected = hashlib.sha256(b"text.sbasic.shared.00000002.txt\0" + text.encode() + b"\0").hexdigest()
    assert source["documents_sha256"] == expected and source["characters"] == len(text)
    assert "MPL-2.0" in (out / "LICENSE").read_text(encoding="utf-8")


def test_a_docbook_page_loses_its_navigation_and_contents_and_joins_its_wrapped_lines(tmp_path):
    out, note, _ = build_corpus("debian-faq", tmp_path / "faq", faq_deb(tmp_path))
    text = (out / "basic-defs.ko.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[:2] == ["1장. 정의 및 개관", "1.1. 이 FAQ는 무엇인가요?"]  # no navigation header, no contents
    assert "차례" not in lines and "이전" not in text and "처음으로" not in text
    assert lines.count("1.7. Debian은 어떻게 발음하며 이 단어 뜻은 무엇인가요?") == 1  # once: the contents' copy is gone
    # a paragraph the source wraps in mid-sentence is one line
    assert "데비안은 데비안 GNU/Hurd라는 이 시스템에서 FSF와 일하고 있습니다." in text
    licence = (out / "LICENSE").read_text(encoding="utf-8")
    assert "Software in the Public Interest" in licence and "Permission is granted to copy" in licence
    assert note["hangul_share"] == round(hangul_share(text)[1], 4) and note["duplicate_share"] == 0.0


def test_decomposed_hangul_gives_the_same_documents_and_the_same_build_twice(tmp_path):
    composed = build_corpus("libreoffice-help", tmp_path / "a", libreoffice_deb(tmp_path))[1]
    (tmp_path / "nfd").mkdir()
    decomposed = build_corpus("libreoffice-help", tmp_path / "b", libreoffice_deb(tmp_path / "nfd", "NFD"))[1]
    assert decomposed["documents_sha256"] == composed["documents_sha256"]
    assert decomposed["deb_sha256"] != composed["deb_sha256"]
    again = build_corpus("libreoffice-help", tmp_path / "c", libreoffice_deb(tmp_path))[1]
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in composed.items() if k != "seconds"}


def test_a_second_call_reuses_the_build_and_a_changed_one_is_refused(tmp_path, monkeypatch):
    deb = faq_deb(tmp_path)
    out, first, _ = build_corpus("debian-faq", tmp_path / "faq", deb)
    monkeypatch.setattr(corpora_build, "download", no_download)
    assert build_corpus("debian-faq", out) == (out, first, True)
    assert build_corpus("debian-faq", out, deb) == (out, first, True)  # the same .deb: nothing to do
    with pytest.raises(CorpusError, match="holds the corpus 'debian-faq', not 'gimp-manual'"):
        build_corpus("gimp-manual", out)
    document = out / "basic-defs.ko.txt"
    document.write_text(document.read_text(encoding="utf-8")[:100], encoding="utf-8")  # cut short
    with pytest.raises(CorpusError, match="differ from the sha256 in its SOURCE.json"):
        build_corpus("debian-faq", out)


def test_an_interrupted_build_leaves_nothing_under_the_name(tmp_path, monkeypatch):
    written = []

    def interrupted_write(self, text, **kwargs):
        written.append(self)
        if len(written) == 1:
            raise KeyboardInterrupt
        return original(self, text, **kwargs)

    original = Path.write_text
    monkeypatch.setattr(Path, "write_text", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        build_corpus("debian-faq", tmp_path / "faq", faq_deb(tmp_path))
    assert written and sorted(p.name for p in tmp_path.iterdir()) == ["debian-faq-ko.deb"]


def cli(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = corpora_cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def fake_apt(tmp: Path, script: str) -> str:
    """A PATH whose apt-get runs `script` (sh), to stand for an apt with no network."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    apt = bin_dir / "apt-get"
    apt.write_text("#!/bin/sh\n" + script)
    apt.chmod(0o755)
    return str(bin_dir)


@pytest.mark.parametrize("case", ["unknown", "no apt-get", "no network", "unknown package", "read-only", "a file",
                                  "not a deb", "someone's folder"])
def test_bad_input_is_one_line_exit_2_and_nothing_left(case, tmp_path, capsys, monkeypatch):
    out, argv = tmp_path / "out", ["debian-faq"]
    if case == "unknown":
        argv, message = ["debian-fqa"], "no corpus named 'debian-fqa'; the corpora are debian-faq, gimp-manual"
    elif case == "no apt-get":
        monkeypatch.setenv("PATH", str(tmp_path))
        message = "needs apt-get (Debian, Ubuntu, WSL, Colab), which this system lacks; bring the package by hand"
    elif case == "no network":
        monkeypatch.setenv("PATH", fake_apt(tmp_path, "echo \"E: Failed to fetch http://deb.debian.org/x.deb  "
                                                      "Temporary failure resolving 'deb.debian.org'\" >&2; exit 100"))
        message = "apt-get download debian-faq-ko failed (Failed to fetch"
    elif case == "unknown package":
        monkeypatch.setenv("PATH", fake_apt(tmp_path, "echo 'E: Unable to locate package debian-faq-ko' >&2; exit 100"))
        message = "apt does not know the package debian-faq-ko (Unable to locate package debian-faq-ko); update its lists"
    elif case == "read-only":
        ro = read_only_dir(tmp_path / "ro")
        if ro is None:
            pytest.skip("no read-only directory can be made here")
        out, message = ro / "faq", "choose a writable --out"
    elif case == "a file":
        out.write_text("x")
        message = "is a file; give --out a folder path"
    elif case == "not a deb":
        (tmp_path / "x.deb").write_text("not an archive")
        argv, message = ["debian-faq", "--deb", str(tmp_path / "x.deb")], "is not a Debian package (.deb)"
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        message = "exists but holds no finished corpus build (no readable SOURCE.json); remove it or choose another"
    before = sorted(tmp_path.rglob("*"))
    try:
        code, stdout, err = cli([*argv, "--out", str(out)], capsys)
    finally:
        if case == "read-only" and os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(tmp_path / "ro")], check=True)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert sorted(tmp_path.rglob("*")) == before  # nothing half-built, nothing under --out
    assert "Traceback" not in err


def test_the_list_names_each_corpus_its_size_licence_package_and_whether_it_is_built(tmp_path, capsys):
    build_corpus("debian-faq", corpus_folder("debian-faq", tmp_path), faq_deb(tmp_path))
    code, stdout, _ = cli(["--cache-dir", str(tmp_path)], capsys)
    assert code == 0
    for corpus in CORPORA:
        assert f"{corpus.name:17} {corpus.about}" in stdout and corpus.licence in stdout and corpus.package in stdout
    assert f"debian-faq-ko; built in {corpus_folder('debian-faq', tmp_path)}" in stdout
    assert "gimp-help-ko; not built yet" in stdout


def test_a_run_trains_on_corpus_name_and_a_missing_one_is_one_line(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "cache"
    build_corpus("debian-faq", corpus_folder("debian-faq", cache), faq_deb(tmp_path))
    monkeypatch.setattr(corpora_build, "download", no_download)
    argv = ["--config", str(TINY), f"--data.cache_dir={cache}", "--data.source=corpus:debian-faq", "--data.vocab_size=300"]
    capsys.readouterr()
    assert prepare.main(argv) == 0
    out = capsys.readouterr().out
    assert "corpus debian-faq: 1 documents" in out and "(reused)" in out and "data: corpus:debian-faq ->" in out
    assert prepare.main([*argv[:2], f"--data.cache_dir={cache}", "--data.source=corpus:gimp"]) == 2
    assert capsys.readouterr().err.startswith("error: no corpus named 'gimp'")


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="builds through apt-get (Debian, Ubuntu)")
@pytest.mark.parametrize("name", [c.name for c in CORPORA])
def test_each_listed_corpus_builds_through_apt_and_a_second_build_reuses_it(name, tmp_path):
    out = tmp_path / name
    command = [sys.executable, "-m", "data.corpora", name, "--out", str(out), "--lang", "en"]
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stderr
    assert f"corpus {name}: downloading the package" in first.stdout and "built from" in first.stdout
    note = json.loads((out / "SOURCE.json").read_text(encoding="utf-8"))
    documents = sorted(out.glob("*.txt"))
    assert len(documents) == note["documents"] >= 10 and note["hangul_share"] >= 0.7
    for document in documents:
        text = document.read_text(encoding="utf-8")
        assert text == unicodedata.normalize("NFC", text) and hangul_share(text)[0] >= MIN_HANGUL
        # no markup: the pages' own tags carry attributes; "<h1>" or "<A1>" alone is text the help explains
        assert not re.search(r"<(p|div|span|a|h\d|td|li|img)\s[^>]*\b(class|id|href|src)=|</(div|p|span)>", text), document
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.rstrip().endswith("(reused)"), again.stdout


def test_a_package_with_a_damaged_control_member_is_one_line(tmp_path):
    deb = faq_deb(tmp_path)
    data = bytearray(deb.read_bytes())
    at = data.index(b"control.tar.xz") + 60 + 20  # inside the compressed control member
    data[at : at + 16] = b"\xff" * 16
    deb.write_bytes(bytes(data))
    with pytest.raises(CorpusError, match="is damaged .*; download it again"):
        build_corpus("debian-faq", tmp_path / "faq", deb)
    assert not (tmp_path / "faq").exists()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="builds a zstd .deb with dpkg-deb")
def test_a_zstd_package_as_ubuntu_builds_it_is_streamed_through_dpkg_deb(tmp_path):
    # Python's tarfile reads no zstd before 3.14: dpkg-deb unpacks it, its output read as it comes
    corpus, root = find_corpus("debian-faq"), tmp_path / "package"
    page = root / corpus.folder / "basic-defs.ko.html"
    page.parent.mkdir(parents=True)
    page.write_bytes((FIXTURES / "debian-faq-ko" / "basic-defs.ko.html").read_bytes())
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text("Package: debian-faq-ko\nVersion: 11.1\nArchitecture: all\n"
                                             "Maintainer: a <a@b.c>\nDescription: the FAQ\n")  # fmt: skip
    deb = tmp_path / "debian-faq-ko.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zzstd", "--build", str(root), str(deb)], check=True,
                   capture_output=True)  # fmt: skip
    assert b"data.tar.zst" in deb.read_bytes()
    expected = build_corpus("debian-faq", tmp_path / "xz", faq_deb(tmp_path))[1]
    note = build_corpus("debian-faq", tmp_path / "zst", deb)[1]
    assert (note["version"], note["documents"], note["documents_sha256"]) == ("11.1", 1, expected["documents_sha256"])
