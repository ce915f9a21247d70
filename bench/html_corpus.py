"""Turn a folder of HTML pages (a manual, for example) into a text corpus: one .txt document per page.

    apt-get download gimp-help-ko && dpkg-deb -x gimp-help-ko_*.deb gimp
    python bench/html_corpus.py gimp/usr/share/gimp/2.0/help/ko corpora/gimp
    python bench/html_corpus.py gimp/... corpora/gimp-half --every 2        # every second page: a subset

Scripts, styles and the page head are dropped; block elements end a line; runs of blanks collapse. The
pages are taken in sorted path order, so the last ones become the held-out documents of a run. Prints the
page and character counts and the share of Hangul.
"""

import argparse
import html.parser
import re
import sys
import unicodedata
from pathlib import Path

SKIP = {"script", "style", "head", "title"}
BLOCKS = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dt", "dd", "table", "blockquote"}
HANGUL = re.compile("[\uac00-\ud7a3]")


class TextOf(html.parser.HTMLParser):
    """The visible text of one page, a line per block element."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.skipping = [], 0

    def handle_starttag(self, tag, attrs):
        self.skipping += tag in SKIP
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.skipping -= tag in SKIP and self.skipping > 0
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.skipping:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return unicodedata.normalize("NFC", "\n".join(line for line in lines if line)) + "\n"


def page_text(path: Path) -> str:
    parser = TextOf()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser.text()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src", help="folder searched for *.html")
    parser.add_argument("out", help="folder for the .txt documents (must not exist)")
    parser.add_argument("--every", type=int, default=1, help="keep every N-th page (default: all)")
    args = parser.parse_args(argv)
    pages = sorted(Path(args.src).rglob("*.html"))[:: args.every]
    if not pages:
        print(f"error: no *.html under {args.src}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True)
    chars = hangul = 0
    for i, page in enumerate(pages):
        text = page_text(page)
        (out / f"{i:05d}.txt").write_text(text, encoding="utf-8")
        chars, hangul = chars + len(text), hangul + len(HANGUL.findall(text))
    print(f"{out}: {len(pages)} pages, {chars:,} characters, {hangul / chars:.0%} Hangul")
    return 0


if __name__ == "__main__":
    sys.exit(main())
