"""Real Korean corpora in one command, from documentation Debian and Ubuntu ship as packages.

    python -m data.corpora                          # the corpora, their size, licence and package
    python -m data.corpora libreoffice-help         # -> data/cache/corpora/libreoffice-help/ (once)
    python train.py --data.source=corpus:libreoffice-help

catalog.py lists them, debian.py fetches and reads a package, extract.py turns a page into its Korean text,
build.py writes the folder and its notes, and reuses it on the next call.
"""

from data.corpora.build import build_corpus, corpus_folder, finished_build
from data.corpora.catalog import CORPORA, Corpus
from data.corpora.debian import CorpusError

__all__ = ["CORPORA", "Corpus", "CorpusError", "build_corpus", "corpus_folder", "finished_build"]
