"""An HTML help page as the plain text a reader sees: one paragraph a line, navigation and markup left out.

    text = page_text(html)             # NFC, a line per block element, "" for a page with nothing to read
    document = korean_text(text)       # its Korean lines, or "" for a page with too little Korean

What is left out: what a browser does not show as the page's own text (the head, scripts, styles, elements
marked `hidden`) and what every page repeats around
it: the site's header, side bar, footer and navigation (`<header>`, `<nav>`, `<aside>`, `<footer>`, DocBook's
navheader, navfooter and tables of contents). LibreOffice writes a menu path twice, hidden, for macOS and for
the rest ("LibreOffice - 기본 설정", "도구 - 옵션"), and shows one with a script: the second ("default...") is kept. Whitespace is HTML's: runs of spaces and line breaks inside a paragraph are one
space (the manuals break lines in mid-sentence), and only `<pre>` keeps its lines.

What is Korean: the help of a program is translated a paragraph at a time, and a page may still hold
paragraphs in English or code (LibreOffice's Basic reference); a line (a paragraph) stays when Hangul makes
at least a tenth of its letters, so a Korean sentence that names English terms stays and an English one goes,
and a page stays when what is left holds at least MIN_HANGUL syllables.
"""

import html.parser
import re
import unicodedata

SKIPPED_TAGS = {"head", "title", "script", "style", "noscript", "template", "svg", "header", "nav", "aside", "footer"}
SKIPPED_CLASSES = {"navheader", "navfooter", "toc"}  # DocBook's previous/next tables and tables of contents
SKIPPED_IDS = {"DEBUG", "SearchFrame", "DonationFrame"}  # LibreOffice's debug box and empty frames
BLOCKS = {"p", "div", "br", "li", "dt", "dd", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "pre",
          "table", "blockquote", "section", "article", "main", "ul", "ol", "dl", "hr", "figure", "figcaption",
          "caption", "body"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
HANGUL = re.compile("[\uac00-\ud7a3]")
LETTER = re.compile(r"[^\W\d_]")
MIN_HANGUL = 100  # syllables: a page shorter than a short paragraph teaches nothing
LINE_HANGUL_SHARE = 0.1  # of a line's letters: "LibreOffice Basic 용어집" stays (0.16), an English line goes (0)


class VisibleText(html.parser.HTMLParser):
    """Collects the text outside skipped elements; `lines()` gives it a line per block."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open = []  # (tag, skipped) of each element not yet closed
        self.parts = []  # text, and "\n" at block edges
        self.skipping = 0  # open skipped elements
        self.pre = 0  # open <pre> elements

    def handle_starttag(self, tag, attrs):
        if tag in BLOCKS:
            self.parts.append("\n")
        if tag in VOID:
            return
        attributes = dict(attrs)
        classes = set((attributes.get("class") or "").split())
        element_id = attributes.get("id") or ""
        hidden = "hidden" in attributes and not element_id.startswith("default")  # LibreOffice's non-macOS text
        skipped = tag in SKIPPED_TAGS or hidden or bool(classes & SKIPPED_CLASSES) or element_id in SKIPPED_IDS
        self.open.append((tag, skipped))
        self.skipping += skipped
        self.pre += tag == "pre"

    def handle_startendtag(self, tag, attrs):  # <br/>, <img .../>: nothing opens
        if tag in BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in BLOCKS:
            self.parts.append("\n")
        if not any(open_tag == tag for open_tag, _ in self.open):
            return  # a stray end tag closes nothing
        while self.open:  # an end tag closes the elements left open inside it, as a browser does
            open_tag, skipped = self.open.pop()
            self.skipping -= skipped
            self.pre -= open_tag == "pre"
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self.skipping:
            return
        if self.pre:
            self.parts.append(data.replace("\r\n", "\n"))
        else:
            self.parts.append(re.sub(r"\s+", " ", data))  # a space between two inline elements stays one space

    def lines(self) -> list[str]:
        text = "".join(self.parts)
        return [" ".join(line.split()) for line in text.split("\n") if line.strip()]


def page_text(html: str) -> str:
    """The visible text of one page, NFC, a line per block element, ending in a line break ("" if none)."""
    parser = VisibleText()
    parser.feed(html)
    parser.close()
    lines = parser.lines()
    return unicodedata.normalize("NFC", "\n".join(lines) + "\n") if lines else ""


def hangul_share(text: str) -> tuple[int, float]:
    """The Hangul syllables of `text`, and their share of its letters."""
    hangul, letters = len(HANGUL.findall(text)), len(LETTER.findall(text))
    return hangul, hangul / letters if letters else 0.0


def korean_text(text: str) -> str:
    """The lines of `text` that are Korean (Hangul at least LINE_HANGUL_SHARE of the letters), or "" when they
    hold fewer than MIN_HANGUL syllables."""
    lines = [line for line in text.splitlines() if hangul_share(line)[1] >= LINE_HANGUL_SHARE]
    kept = "\n".join(lines) + "\n"
    return kept if hangul_share(kept)[0] >= MIN_HANGUL else ""
