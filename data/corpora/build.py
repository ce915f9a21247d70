"""Build a corpus of the catalog into a folder of .txt documents, once: a second call reuses it.

    out, note, reused = build_corpus("debian-faq")                 # -> data/cache/corpora/debian-faq/
    build_corpus("gimp-manual", out=Path("corpora/gimp"), deb=Path("gimp-help-ko_2.10.34-2_all.deb"))

The folder holds one .txt per page that is Korean enough (extract.py), named by its path in the package,
and two notes: LICENSE (the text's licence and the package's copyright file) and SOURCE.json (the package,
its version and sha256, when it was built, the statistics, and a sha256 over the documents). The same
package version gives the same documents, byte for byte. The folder is filled under a temporary name and
renamed into place when complete (storage/atomic.py), so an interrupted build leaves nothing under the
name; a folder that is there is reused only when it holds a finished build whose documents still match
the sha256 in its note, and never replaced unless it is one.
"""

import collections
import datetime
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from data.corpora.catalog import CORPORA, Corpus, find_corpus
from data.corpora.debian import CorpusError, deb_field, deb_files, deb_sha256, download, open_deb
from data.corpora.extract import HANGUL, hangul_share, korean_text, page_text
from cli.messages import messages
from storage.atomic import write_directory

EXTRACTION = 1  # raise it when extract.py changes what a build writes: an older build is then rebuilt
NOTE = "SOURCE.json"


def corpus_folder(name: str, cache_dir: str | Path = "data/cache") -> Path:
    """Where `corpus:NAME` lies: data.cache_dir/corpora/NAME."""
    return Path(cache_dir) / "corpora" / name


def known(name: str) -> Corpus:
    corpus = find_corpus(name)
    if corpus is None:
        names = ", ".join(c.name for c in CORPORA)
        raise CorpusError(f"no corpus named {name!r}; the corpora are {names} (python -m data.corpora lists them)")
    return corpus


def build_corpus(name: str, out: Path | None = None, deb: Path | None = None, cache_dir="data/cache",
                 say=None) -> tuple[Path, dict, bool]:
    """Build corpus `name` into `out` (default: corpus_folder) from `deb` (default: apt-get download), or reuse a
    finished build there; (out, its note, whether it was reused). `say(key, **fields)` is told what happens
    (a key of cli/messages.py)."""
    corpus, say = known(name), say or (lambda key, **fields: None)
    if deb is not None:  # a file the user named: a .deb, checked on its first bytes before anything else is done
        open_deb(deb).close()
    out = Path(out) if out is not None else corpus_folder(name, cache_dir)
    note = finished_build(out)
    if note is not None:
        if note.get("corpus") != name:
            raise CorpusError(f"{out} holds the corpus {note.get('corpus')!r}, not {name!r}; choose another --out")
        same_deb = deb is None or deb_sha256(deb) == note.get("deb_sha256")
        if note.get("extraction") == EXTRACTION and same_deb:
            return out, note, True
    check_writable(out)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="corpus-download-") as work:
        if deb is None:
            say("corpus.download", name=name, package=corpus.package)
            deb = download(corpus.package, Path(work))
        copyright_path = f"usr/share/doc/{corpus.package}/copyright"
        files = deb_files(deb, corpus.folder, copyright_path)
        documents = corpus_documents(corpus, [(p, data) for p, data in files if p.startswith(corpus.folder)])
        if not documents:
            raise CorpusError(f"{deb} holds no Korean page under {corpus.folder}; is it the package {corpus.package}?")
        note = source_note(corpus, deb, documents)
        licence = licence_text(corpus, note["version"], dict(files).get(copyright_path))
        note["seconds"] = round(time.perf_counter() - started, 1)

        def fill(tmp: Path) -> None:
            for filename, text in documents:
                (tmp / filename).write_text(text, encoding="utf-8", newline="\n")
            (tmp / "LICENSE").write_text(licence, encoding="utf-8", newline="\n")
            (tmp / NOTE).write_text(json.dumps(note, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

        write_directory(out, fill, CorpusError)
    return out, note, False


def finished_build(out: Path) -> dict | None:
    """The note of the finished build in `out`, None when there is nothing there; CorpusError for anything else
    there (a file, a folder of other files, a build whose documents were changed or cut short)."""
    if not out.exists():
        return None
    if not out.is_dir():
        raise CorpusError(f"{out} is a file; give --out a folder path")
    try:
        note = json.loads((out / NOTE).read_text(encoding="utf-8"))
        expected = note["documents_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        raise CorpusError(f"{out} exists but holds no finished corpus build (no readable {NOTE}); remove it or "
                          f"choose another --out") from None
    if documents_sha256(read_documents(out)) != expected:
        raise CorpusError(f"the documents in {out} differ from the sha256 in its {NOTE} (changed, or cut short by "
                          f"a copy); remove the folder and build it again")
    return note


def check_writable(out: Path) -> None:
    """Refuse, before anything is downloaded, an `out` whose parent cannot be made or written."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CorpusError(f"cannot make {out.parent} ({e.strerror or e}); choose a writable --out") from None
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise CorpusError(f"cannot write into {out.parent} (read-only); choose a writable --out")


def corpus_documents(corpus: Corpus, files: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    """(file name, text) of each Korean page among the package's `files` (path, bytes) in its folder, in path
    order: FOLDER/text/shared/a.html -> text.shared.a.txt."""
    documents = []
    for path, data in files:
        if path.endswith((".html", ".htm", ".xhtml")):
            text = korean_text(page_text(data.decode("utf-8", "replace")))
            if text:
                name = path[len(corpus.folder) :].rsplit(".", 1)[0].replace("/", ".")
                documents.append((name + ".txt", text))
    return documents


def read_documents(out: Path) -> list[tuple[str, str]]:
    return [(f.name, f.read_text(encoding="utf-8")) for f in sorted(out.glob("*.txt"))]


def documents_sha256(documents: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for filename, text in documents:
        digest.update(filename.encode() + b"\0" + text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def statistics(documents: list[tuple[str, str]]) -> dict:
    """Documents, characters, the Hangul share of the letters, distinct Hangul syllables, and the duplicate share:
    the characters of lines that also stand in another document (headings such as "관련 주제", repeated notes)."""
    texts = [text for _, text in documents]
    lines_of = [set(text.splitlines()) for text in texts]
    documents_with = collections.Counter(line for lines in lines_of for line in lines)
    repeated = sum(len(line) for lines in lines_of for line in lines if documents_with[line] > 1)
    chars = sum(len(text) for text in texts)
    whole = "".join(texts)
    return {"documents": len(texts), "characters": chars, "hangul_share": round(hangul_share(whole)[1], 4),
            "distinct_syllables": len(set(HANGUL.findall(whole))),
            "duplicate_share": round(repeated / chars, 4) if chars else 0.0}


def source_note(corpus: Corpus, deb: Path, documents: list[tuple[str, str]]) -> dict:
    return {"corpus": corpus.name, "package": corpus.package, "version": deb_field(deb, "Version"),
            "deb_sha256": deb_sha256(deb), "folder": corpus.folder, "licence": corpus.licence,
            "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"), "extraction": EXTRACTION,
            **statistics(documents), "documents_sha256": documents_sha256(documents)}


def licence_text(corpus: Corpus, version: str, copyright_file: bytes | None) -> str:
    """The licence line, then the package's own copyright file (where the package has one of its own)."""
    head = (f"{corpus.about}\nFrom the Debian package {corpus.package} {version} ({corpus.folder}), as plain text.\n"
            f"Licence: {corpus.licence}\n")
    if copyright_file is not None:
        return head + "\nThe package's copyright file:\n\n" + copyright_file.decode("utf-8", "replace")
    return head + f"\nThe package's copyright file lies in a package it depends on (/usr/share/doc/{corpus.package}).\n"


def report_line(name: str, out: Path, note: dict, reused: bool) -> str:
    """The line a build or a reuse prints (train.py prints it too, for corpus:NAME)."""
    say = messages()
    how = say("corpus.reused") if reused else say("corpus.made", package=note["package"], version=note["version"],
                                                  seconds=note["seconds"])
    return say("corpus.built", name=name, documents=f"{note['documents']:,}", chars=f"{note['characters']:,}",
               hangul=f"{note['hangul_share']:.0%}", out=out, how=how)
