"""Real Korean corpora in one command, from documentation Debian and Ubuntu ship as packages.

    python -m data.corpora                          # the corpora, their size, licence and package
    python -m data.corpora libreoffice-help         # -> data/cache/corpora/libreoffice-help/ (once)
    python train.py --data.source=corpus:libreoffice-help

catalog.py lists them, debian.py fetches and reads a package, extract.py turns a page into its Korean text,
build.py writes the folder and its notes, and reuses it on the next call.
"""

import importlib

EXPORTS = {"CORPORA": "catalog", "Corpus": "catalog", "CorpusError": "debian", "build_corpus": "build",
           "corpus_folder": "build", "finished_build": "build"}  # name -> its module here
__all__ = list(EXPORTS)


def __getattr__(name: str):
    """The package's names, each imported when first asked for: `python -m data.corpora` imports this package
    before its __main__ can catch a Ctrl-C, so the package itself imports nothing (the build brings torch)."""
    if name not in EXPORTS:
        raise AttributeError(f"module 'data.corpora' has no attribute {name!r}")
    return getattr(importlib.import_module(f"data.corpora.{EXPORTS[name]}"), name)
