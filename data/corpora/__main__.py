"""python -m data.corpora [NAME] [--out DIR] [--deb FILE]: list the corpora, or build one."""

if __name__ == "__main__":  # Ctrl-C while torch loads ends with one line, not a traceback
    from cli import stop_quietly_while_loading

    stop_quietly_while_loading()

import sys
from pathlib import Path

from cli.command import ArgumentParser, run_command
from cli.messages import LANGUAGES, messages, use_language
from data.corpora.build import build_corpus, corpus_folder, finished_build, report_line
from data.corpora.catalog import CORPORA
from data.corpora.debian import CorpusError


def listing(cache_dir: str) -> str:
    """A few lines per corpus: name, what it is, size, licence, package, and where it is built if it is."""
    lines = ["Korean corpora to build (python -m data.corpora NAME; train with --data.source=corpus:NAME):", ""]
    for corpus in CORPORA:
        where = corpus_folder(corpus.name, cache_dir)
        try:
            built = f"built in {where}" if finished_build(where) else "not built yet"
        except CorpusError:
            built = f"{where} holds something else (see python -m data.corpora {corpus.name})"
        lines += [f"{corpus.name:17} {corpus.about}", f"{'':17} {corpus.size}", f"{'':17} licence: {corpus.licence}",
                  f"{'':17} Debian package {corpus.package}; {built}", ""]
    return "\n".join(lines).rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog="python -m data.corpora", description=__doc__.split(":")[0])
    parser.add_argument("name", nargs="?", help="the corpus to build (none: list them)")
    parser.add_argument("--out", type=Path, help="the folder to build it in (default: data/cache/corpora/NAME)")
    parser.add_argument("--deb", type=Path, help="the package's .deb, brought by hand (default: apt-get download)")
    parser.add_argument("--cache-dir", default="data/cache", help="data.cache_dir, whose corpora/ it builds in")
    parser.add_argument("--lang", choices=LANGUAGES, help="language of the lines printed (default: the locale's)")

    def work():
        args = parser.parse_args(argv)
        if args.name is None:
            print(listing(args.cache_dir))
            return 0
        use_language(args.lang)  # None: the locale's
        say = messages()
        out, note, reused = build_corpus(args.name, args.out, args.deb, args.cache_dir,
                                         say=lambda key, **fields: print(say(key, **fields), flush=True))
        print(report_line(args.name, out, note, reused))
        return 0

    return run_command(work, interrupted="interrupted; nothing was left under the corpus's name (run it again)")


if __name__ == "__main__":
    sys.exit(main())
