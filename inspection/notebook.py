"""Every view in a notebook (Jupyter, JupyterLab, VS Code, Colab): one call each, shown inline as a cell's last line.

    from inspection import notebook as nb
    nb.language("ko")                                   # the views' texts in Korean (default: English)
    nb.page("runs/heads", "가 나 다 라 가 나 다")          # the attention page of --attention, inside the notebook
    nb.show("walkthrough", "runs/heads", "가 나 다 라 가 나 다", explain="1.0")   # any view (inspection/views/)
    nb.walkthrough(run, text, "1.0")   nb.path(run, text)   nb.lens(run, text)   nb.why(run, text)
    nb.score(run, text)       nb.heads(run)             # roles and their cost switched off (--heads)
    nb.over_training("runs/heads", text)                # the snapshot slider (--over-training)
    nb.heads_over_training("runs/heads")                # RUN/heads.png, as train.py drew it
    training = nb.train("configs/heads.toml", "runs/heads")   # train.py in the background (inspection/notebook_live.py)
    nb.watch(training)   training.wait()                # its live page in the cell; its lines until it ends

`run` is a `Run` (inference.load_run) or a run's folder. `off="1.0,1.2"` switches heads off for a view, as
`--ablate` does (their mean output on held-out text; `mode="zero"`: zeros). Each view is computed by
`inspection.views.compute`, as the command line's, so the numbers and the text are the terminal's; `.record` holds
the numbers. A page is the offline page in an iframe of its own (`srcdoc`), so several in one notebook share no
ids, scripts or fonts. Bad input raises `UserError`, which a notebook shows as its one line
(`UserError._render_traceback_`).
"""

import html
import os
import re
from pathlib import Path

from cli.arguments import need_choice, need_int, need_text, need_type
from cli.errors import UserError
from cli.messages import LANGUAGES, use_language
from common.heads_off import check_heads, head_name, read_head
from inference.runs import Run, load_run
from inspection import notebook_live
from inspection.html import page as page_html
from inspection.labels import display_width
from inspection.over_training import over_training_page, run_snapshots
from inspection.views import VIEWS, Settings, compute
from inspection.views.roles import ROLES, roles_from_record, stored_roles
from model.sampling import Sampling
from storage.atomic import write_text_atomic

HEIGHT = 820  # pixels of a page's frame in the notebook until the page has loaded (then: the page's height)
PAGE_VIEWS = ["maps", "walkthrough", "lens", "path", "why", "words"]  # what a page shows of a text
settings = {"lang": "en"}


def language(lang: str) -> None:
    """The language of every view from now on, and of the warnings: "en" or "ko"."""
    need_choice("lang", lang, LANGUAGES)
    settings["lang"] = lang
    use_language(lang)


WIDE = re.compile(r"[^\x20-\x7e]")  # a character a monospace font may not draw 1ch wide: Hangul, ␣, box drawing
GAP = re.compile(r"\S {2,}(?=\S)")  # spaces that pad a table's column


def columns_html(text: str) -> str:
    """`text` as HTML in which its columns line up as in a terminal, whatever fonts the browser has: ASCII is set in a
    monospace font (1ch a character) and every other character in a box as wide as its terminal columns
    (`display_width`: 2ch for a Hangul syllable), so a column's edge is at one x in every row. A line padded into
    columns (two gaps or more) never wraps; a line of prose wraps at the cell's edge. Its text is `text`."""
    lines = []
    for line in html.escape(text).split("\n"):
        boxed = WIDE.sub(lambda m: f'<span style="display: inline-block; width: {display_width(m[0])}ch">{m[0]}</span>',
                         line)
        lines.append(boxed if len(GAP.findall(line)) >= 2 else f'<span style="white-space: pre-wrap">{boxed}</span>')
    return ('<pre style="font-family: monospace; font-size: 12px; line-height: 1.35; white-space: pre; '
            'overflow-x: auto">' + "\n".join(lines) + "</pre>")


class Text(str):
    """A view as text: print() it, or make it a cell's last line and the notebook shows it as the terminal does
    (`columns_html`: its tables aligned, Hangul included); `.record` its numbers."""

    record: dict = None

    def _repr_html_(self) -> str:
        return columns_html(self)

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


class RolesTable(Text):
    """The --heads table as a view; `.roles` the HeadRoles behind it, `.with_role("induction")` its heads of that
    role as "1.0,1.2" (what `off=` takes; "" when none has it)."""

    roles = None

    def with_role(self, role: str) -> str:
        if role not in self.roles.roles and role != "mixed":
            raise UserError(f"role {role!r} is not one of {', '.join(self.roles.roles)} or mixed")
        L, H = self.roles.scores[ROLES[0]].shape
        return ",".join(head_name(l, h) for l in range(L) for h in range(H) if self.roles.strongest(l, h)[0] == role)


# Once the page in the frame has loaded, and whenever it grows or shrinks after (a section opened, a walkthrough
# shown), the frame takes its height: the notebook scrolls, not the frame. The srcdoc page is the notebook's own
# origin, so its document can be read; where a front end strips the handler, the frame keeps its given height. A
# height is set in the next frame, not in the observer's callback: a size changed inside it would be a "ResizeObserver
# loop" error, which the page's error line shows.
FIT = ("const f = this, d = f.contentDocument; if (!d) return; "
       "const fit = () => { const bar = f.contentWindow.innerHeight - d.documentElement.clientHeight; "  # a scrollbar's
       "f.style.height = Math.ceil(d.documentElement.getBoundingClientRect().height + bar) + 'px'; }; "
       "fit(); new f.contentWindow.ResizeObserver(() => requestAnimationFrame(fit)).observe(d.documentElement);")


class Page:
    """A self-contained page (`.html`), shown inline in an iframe of its own, as tall as the page it shows (`height`
    pixels until it has loaded, and where a notebook front end runs no script); `.save(path)` writes it as a file."""

    def __init__(self, page: str, height: int = HEIGHT):
        self.html, self.height = page, height

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" onload="{html.escape(FIT, quote=True)}" '
                f'style="width: 100%; height: {self.height}px; border: 1px solid #ddd; box-sizing: content-box">'
                '</iframe>')

    def save(self, path) -> Path:
        return write_text_atomic(Path(path), self.html)


class Picture:
    """A PNG file, shown inline."""

    def __init__(self, path: Path):
        self.path = path

    def _repr_png_(self) -> bytes:
        return self.path.read_bytes()


def as_run(run) -> Run:
    """A Run as given, or the run in a folder (its best/ weights, as generate.py loads them)."""
    if isinstance(run, Run):
        return run
    need_type("run", run, (str, os.PathLike), "a Run (inference.load_run) or a run's folder (a str or a Path)")
    return load_run(run)


def show(view: str, run, text: str | None = None, *, off=None, mode: str = "mean", **given) -> Text:
    """Any view of `text` (inspection/views/: maps, walkthrough, path, lens, why, patch, words, score; roles needs
    no text) as the terminal shows it, with `given` its settings (inspection.views.Settings: query, explain, head,
    sampling, why, corrupt, patch_heads, heads_text) and the heads `off` switched off."""
    need_choice("view", view, tuple(VIEWS))
    if text is not None or view != "roles":
        need_text("text", text, "the text to look at")
    found = Settings(mode=mode, **given)  # each setting checked where it is read: before a run is loaded
    run = as_run(run)
    record = compute(run, text, [view], found, off)[view]
    shown = (RolesTable if view == "roles" else Text)(VIEWS[view].text(record, settings["lang"]))
    shown.record = record
    if view == "roles":
        shown.roles = roles_from_record(record)
    return shown


def page(run, text: str, *, off=None, mode: str = "mean", roles: bool = False, sampling: Sampling | None = None,
         height: int = HEIGHT) -> Page:
    """The page of generate.py --prompt TEXT --attention DIR (every map, the walkthrough on a click, each token's
    lens, path and shares); `roles`: each head's role scores and cost too (--heads, some seconds)."""
    need_text("text", text, "the text to look at")
    found = Settings(mode=mode, sampling=Sampling() if sampling is None else sampling)
    need_int("height", height, lo=1, what="pixels")
    run = as_run(run)
    records = compute(run, text, PAGE_VIEWS + (["roles"] if roles else []), found, off)
    stored = None if roles or off else stored_roles(run)  # the roles training measured of these weights
    return Page(page_html(records | ({"roles": stored} if stored else {}), settings["lang"]), height)


def walkthrough(run, text: str, head, query: int = -1, *, off=None, mode: str = "mean") -> Text:
    """One head ("1.0" or (1, 0)) at token `query` of `text`, step by step (generate.py --explain 1.0 --query N)."""
    head = read_head(head, "head")
    run = as_run(run)
    check_heads(run.model.config, [head], "head")  # named as this function names it
    return show("walkthrough", run, text, off=off, mode=mode, explain=head, query=query)


def path(run, text: str, query: int = -1, *, sampling: Sampling | None = None, off=None, mode: str = "mean") -> Text:
    """Token `query` of `text` from its id to the next token (generate.py --explain path), drawn with `sampling`."""
    return show("path", run, text, off=off, mode=mode, query=query, sampling=Sampling() if sampling is None else sampling)


def lens(run, text: str, query: int = -1, *, off=None, mode: str = "mean") -> Text:
    """The logit lens at token `query` of `text` (generate.py --lens)."""
    return show("lens", run, text, off=off, mode=mode, query=query)


def why(run, text: str, query: int = -1, token: str | None = None, versus: str | None = None, *, off=None,
        mode: str = "mean") -> Text:
    """Each part's share of logit(token) − logit(versus) at `query` (generate.py --why A,B; None: the model's
    choice and its runner-up); a token named as the tables show it (␣ for a space) or "#ID"."""
    return show("why", run, text, off=off, mode=mode, query=query, why=(token, versus))


def heads(run, *, text_file: str | None = None, off=None, mode: str = "mean") -> RolesTable:
    """Every head's roles and what switching each off alone costs (generate.py --heads), on `text_file` or the
    run's validation split; `off`: with those heads off first. `.with_role("induction")` names its heads."""
    if text_file is not None:
        need_type("text_file", text_file, (str, os.PathLike), "the path of a UTF-8 text file, or None")
    return show("roles", run, off=off, mode=mode, heads_text=text_file)


def score(run, text: str, *, off=None, mode: str = "mean") -> Text:
    """Bits per character of `text` (generate.py --score); with `off`, beside the full model's."""
    return show("score", run, text, off=off, mode=mode)


def over_training(run_dir, text: str, *, height: int = HEIGHT) -> Page:
    """`text` through every snapshot of the run (generate.py --over-training RUN): the page with a slider."""
    need_type("run_dir", run_dir, (str, os.PathLike), "a run's folder (a str or a Path)")
    need_text("text", text, "the text to look at")
    need_int("height", height, lo=1, what="pixels")
    snapshots = run_snapshots(Path(run_dir))
    return Page(over_training_page(snapshots, run_dir, text, lang=settings["lang"])[0], height)


def heads_over_training(run_dir) -> Picture:
    """RUN/heads.png: the strongest role scores at every evaluation, drawn by train.py."""
    need_type("run_dir", run_dir, (str, os.PathLike), "a run's folder (a str or a Path)")
    found = Path(run_dir) / "heads.png"
    if not found.is_file():
        raise UserError(f"{found} does not exist; train.py draws it when a run ends, from the head scores of its "
                        "evaluations: give the run's folder (runs/NAME), after training")
    return Picture(found)


def train(config, out, *more: str) -> notebook_live.Training:
    """Start `python train.py --config CONFIG --out OUT MORE` in a process of its own (MORE: "--train.seed=7", ...),
    in this notebook's language; `.wait()` prints its lines until it ends, `.running` says whether it still trains."""
    return notebook_live.train(config, out, *more, lang=settings["lang"])


def watch(run, run2=None, *, height: int = notebook_live.HEIGHT):
    """The live page of train.py --watch in the cell: a run (a Training, or a run's folder, finished or training),
    or two side by side; it updates at each evaluation without the cell running again."""
    return notebook_live.watch(run, run2, lang=settings["lang"], height=height)
