"""The Korean corpora `python -m data.corpora` can build: documentation that Debian and Ubuntu ship as packages.

No package on PyPI holds Korean prose of this size; these three do, under free licences, and every Debian
or Ubuntu machine (WSL, Colab) can fetch them with its own apt. The sizes are what a build of the Debian 12
packages writes (docs/corpora.md); another release's version may differ a little.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Corpus:
    name: str  # what `corpus:NAME` and the command take
    package: str  # the Debian package
    folder: str  # where its Korean pages lie inside the package
    about: str  # one line for the list
    licence: str  # the licence of the text, as the package's copyright file states it
    size: str  # documents and characters of a build, and the download


CORPORA = (
    Corpus("debian-faq", "debian-faq-ko", "usr/share/doc/debian/FAQ/ko/",
           "the Debian GNU/Linux FAQ in Korean: questions and answers",
           "free to copy, modify and translate with the notice kept (Software in the Public Interest)",
           "17 documents, 60,000 characters; a 0.2 MB download"),
    Corpus("gimp-manual", "gimp-help-ko", "usr/share/gimp/2.0/help/ko/",
           "the GIMP user manual, its Korean-translated pages",
           "GNU FDL 1.2 (the GIMP Documentation Team)",
           "90 documents, 113,000 characters; a 50 MB download"),
    Corpus("libreoffice-help", "libreoffice-help-ko", "usr/share/libreoffice/help/ko/",
           "the LibreOffice help in Korean: Writer, Calc, Impress, Base, Basic",
           "MPL-2.0, some pages Apache-2.0 (The Document Foundation)",
           "1,377 documents, 891,000 characters; a 3.3 MB download"),
)


def find_corpus(name: str) -> Corpus | None:
    return next((c for c in CORPORA if c.name == name), None)
