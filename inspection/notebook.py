"""Every view in a notebook (Jupyter, JupyterLab, VS Code, Colab): one call each, shown inline as a cell's last line.

    from inspection import notebook as nb
    nb.language("ko")                                   # the views' texts in Korean (default: English)
    nb.page("runs/heads", "가 나 다 라 가 나 다")          # the attention page of --attention, inside the notebook
    nb.walkthrough("runs/heads", "가 나 다 라 가 나 다", "1.0")   # one head's Q·K·V at the last token (--explain)
    nb.path(run, text)        nb.lens(run, text)         nb.why(run, text)          nb.score(run, text)
    nb.heads(run)             # roles and their cost switched off (--heads)
    nb.over_training("runs/heads", text)                # the snapshot slider (--over-training)
    nb.heads_over_training("runs/heads")                # RUN/heads.png, as train.py drew it

`run` is a `Run` (inference.load_run) or a run's folder. `off="1.0,1.2"` switches heads off for a view, as
`--ablate` does (their mean output on held-out text; `mode="zero"`: zeros). The numbers are the command line's:
the same functions compute them (inspection/of_run.py). A page is the offline page in an iframe of its own
(`srcdoc`), so several in one notebook share no ids, scripts or fonts; a text view is the terminal's text, in a
<pre>. Bad input raises `UserError`, which a notebook shows as its one line (`UserError._render_traceback_`).
"""

import contextlib
import html
import os
from pathlib import Path

from cli.messages import LANGUAGES, messages
from inference.runs import Run, load_run
from inference.scoring import score_text
from inspection.attribution import attribute, format_attribution, labels_to_ids, token_id
from inspection.explain import resolve_query
from inspection.heads import ROLES, HeadRoles, format_roles_table
from inspection.heldout import held_out_ids
from inspection.html import attention_page
from inspection.importance import MODES, ablation_means
from inspection.lens import format_lens, labeller, logit_lens
from inspection.maps import attention_for_text, check_head, parse_head, parse_heads
from inspection.of_run import head_walkthrough, page_title, page_views, run_roles, token_path
from inspection.over_training import over_training_page, run_snapshots
from inspection.path import format_path
from model.ablation import ablated, check_heads
from model.arguments import ArgumentValueError, need_choice, need_int, need_text, need_type
from model.errors import UserError
from model.sampling import TEMPERATURE, Sampling
from storage.atomic import write_text_atomic

HEIGHT = 820  # pixels of a page's frame in the notebook; the page scrolls inside it
settings = {"lang": "en"}


def language(lang: str) -> None:
    """The language of every view from now on: "en" or "ko"."""
    need_choice("lang", lang, LANGUAGES)
    settings["lang"] = lang


class Text(str):
    """A view as text: print() it, or make it a cell's last line and the notebook shows it as the terminal does."""

    def _repr_html_(self) -> str:
        return ('<pre style="font-family: monospace, \'NanumGothicCoding\', \'D2Coding\'; font-size: 12px; '
                f'line-height: 1.3; white-space: pre; overflow-x: auto">{html.escape(self)}</pre>')

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))


class RolesTable(Text):
    """The --heads table as a view; `.roles` the HeadRoles behind it, `.with_role("induction")` its heads of that
    role as "1.0,1.2" (what `off=` takes; "" when none has it)."""

    roles: HeadRoles

    def with_role(self, role: str) -> str:
        if role not in self.roles.roles and role != "mixed":
            raise UserError(f"role {role!r} is not one of {', '.join(self.roles.roles)} or mixed")
        L, H = self.roles.scores[ROLES[0]].shape
        return ",".join(f"{l}.{h}" for l in range(L) for h in range(H) if self.roles.strongest(l, h)[0] == role)


class Page:
    """A self-contained page (`.html`), shown inline in an iframe of its own; `.save(path)` writes it as a file."""

    def __init__(self, page: str, height: int = HEIGHT):
        self.html, self.height = page, height

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width: 100%; height: {self.height}px; '
                'border: 1px solid #ddd"></iframe>')

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
    return load_run(run, lang=settings["lang"])


def need_view(text, query: int = -1, mode: str = "mean") -> None:
    """The arguments the views share, checked before a run is loaded: each a line naming it, never a traceback."""
    need_text("text", text, "the text to look at")
    need_int("query", query, what="a token of the text, -1 the last")
    need_choice("mode", mode, MODES)


def need_head(head) -> tuple[int, int]:
    """"1.0" or (1, 0) -> (1, 0); anything else one line naming `head`."""
    if isinstance(head, str):
        return parse_head(head, "head")
    said = 'a head as "LAYER.HEAD" or (layer, head), e.g. "1.0" or (1, 0)'
    need_type("head", head, (tuple, list), said)
    if len(head) != 2:
        raise ArgumentValueError(f"head must be {said}, got {len(head)} numbers")
    return need_int("head's layer", head[0]), need_int("head's head", head[1])


def heads_of(text, what: str) -> list[tuple[int, int]]:
    """"1.0,1.2", (1, 0) or [(1, 0), (1, 2)] -> [(1, 0), (1, 2)]."""
    if isinstance(text, str):
        return parse_heads(text, what)
    need_type(what, text, (tuple, list), 'heads as "1.0,1.2", (1, 0) or [(1, 0), (1, 2)]')
    return [tuple(text)] if len(text) == 2 and all(isinstance(x, int) for x in text) else [tuple(h) for h in text]


@contextlib.contextmanager
def switched_off(run: Run, off, mode: str = "mean"):
    """Inside the block, the heads `off` of the run's model output their mean on held-out text (`mode` "zero":
    zeros), as --ablate does; nothing when `off` is None."""
    if not off:
        yield
        return
    if mode not in MODES:
        raise UserError(f"mode {mode!r} is not one of {', '.join(MODES)}")
    heads = check_heads(run.model, heads_of(off, "off"))
    means = ablation_means(run.model, held_out_ids(run, None, settings["lang"])[0]) if mode == "mean" else None
    with ablated(run.model, heads, means):
        yield


def page(run, text: str, *, off=None, mode: str = "mean", roles: bool = False, sampling: Sampling | None = None,
         height: int = HEIGHT) -> Page:
    """The page of generate.py --prompt TEXT --attention DIR (every map, the walkthrough on a click, each token's
    lens, path and shares); `roles`: each head's role scores and cost too (--heads, some seconds)."""
    need_view(text, mode=mode)
    if sampling is not None:
        need_type("sampling", sampling, Sampling, "a Sampling (inspection.Sampling(temperature=0.8)) or None")
    need_int("height", height, lo=1, what="pixels")
    run, lang = as_run(run), settings["lang"]
    with switched_off(run, off, mode):
        found = run_roles(run, None, lang)[0] if roles else None
        maps = attention_for_text(run, text)
        views = page_views(run, maps, maps.trace, token_path(run, maps.trace, sampling or Sampling(TEMPERATURE)),
                           found)
        return Page(attention_page(maps.att, maps.labels, page_title(run, maps.ids, lang), prefill=maps.prefill,
                                   lang=lang, views=views), height)


def walkthrough(run, text: str, head, query: int = -1, *, off=None, mode: str = "mean") -> Text:
    """One head ("1.0" or (1, 0)) at token `query` of `text`, step by step (generate.py --explain 1.0 --query N)."""
    need_view(text, query, mode)
    layer, h = need_head(head)
    run = as_run(run)
    check_head(run.model.config.n_layer, run.model.config.n_head, layer, h)
    with switched_off(run, off, mode):
        maps = attention_for_text(run, text)
        return Text(head_walkthrough(run, maps.trace, maps.labels, layer, h, query, settings["lang"]))


def path(run, text: str, query: int = -1, *, sampling: Sampling | None = None, off=None, mode: str = "mean") -> Text:
    """Token `query` of `text` from its id to the next token (generate.py --explain path), drawn with `sampling`."""
    need_view(text, query, mode)
    if sampling is not None:
        need_type("sampling", sampling, Sampling, "a Sampling (inspection.Sampling(temperature=0.8)) or None")
    run = as_run(run)
    with switched_off(run, off, mode):
        maps = attention_for_text(run, text)
        resolve_query(query, len(maps.ids))
        record = token_path(run, maps.trace, sampling or Sampling(TEMPERATURE))
        return Text(format_path(record, query, settings["lang"]))


def lens(run, text: str, query: int = -1, *, off=None, mode: str = "mean") -> Text:
    """The logit lens at token `query` of `text` (generate.py --lens)."""
    need_view(text, query, mode)
    run = as_run(run)
    with switched_off(run, off, mode):
        ids = attention_for_text(run, text).ids  # cut to the context as the maps are
        found = logit_lens(run.model, ids, resolve_query(query, len(ids)))
        return Text(format_lens(found, labeller(run.tokenizer), settings["lang"]))


def why(run, text: str, query: int = -1, token: str | None = None, versus: str | None = None, *, off=None,
        mode: str = "mean") -> Text:
    """Each part's share of logit(token) − logit(versus) at `query` (generate.py --why A,B; None: the model's
    choice and its runner-up); a token named as the tables show it (␣ for a space) or "#ID"."""
    need_view(text, query, mode)
    for name, value in (("token", token), ("versus", versus)):
        if value is not None:
            need_text(name, value, 'a token as the tables show it, or "#ID"; None: the model\'s choice')
    run = as_run(run)
    label, V = labeller(run.tokenizer), run.model.config.vocab_size
    names = labels_to_ids(label, V) if token or versus else {}
    token_ids = [None if name is None else token_id(name, names, V) for name in (token, versus)]
    with switched_off(run, off, mode):
        trace = attention_for_text(run, text).trace
        return Text(format_attribution(attribute(run.model, trace, query, *token_ids), label, settings["lang"]))


def heads(run, *, text_file: str | None = None, off=None, mode: str = "mean") -> RolesTable:
    """Every head's roles and what switching each off alone costs (generate.py --heads), on `text_file` or the
    run's validation split; `off`: with those heads off first. `.with_role("induction")` names its heads."""
    if text_file is not None:
        need_type("text_file", text_file, (str, os.PathLike), "the path of a UTF-8 text file, or None")
    need_choice("mode", mode, MODES)
    run, lang = as_run(run), settings["lang"]
    means = ablation_means(run.model, held_out_ids(run, text_file, lang)[0]) if mode == "mean" else None
    with switched_off(run, off, mode):
        roles = run_roles(run, text_file, lang, means)[0]
    table = RolesTable(format_roles_table(roles, lang))
    table.roles = roles
    return table


def score(run, text: str, *, off=None, mode: str = "mean") -> Text:
    """Bits per character of `text` (generate.py --score); with `off`, beside the full model's."""
    need_view(text, mode=mode)
    run, lang = as_run(run), settings["lang"]
    full = score_text(run, text) if off else None  # before any head is off
    with switched_off(run, off, mode):
        s = score_text(run, text)
    say = messages(lang)
    lines = say("score.lines", loss=f"{s.loss:.4f}", ppl=f"{s.perplexity:.4f}", bpc=f"{s.bits_per_char:.4f}",
                cpt=f"{s.chars_per_token:.4f}")
    if off:
        lines += "\n" + say("score.ablated", heads=", ".join(f"{l}.{h}" for l, h in heads_of(off, "off")),
                            full=f"{full.bits_per_char:.4f}", diff=f"{s.bits_per_char - full.bits_per_char:+.4f}")
    return Text(lines)


def over_training(run_dir, text: str, *, height: int = HEIGHT) -> Page:
    """`text` through every snapshot of the run (generate.py --over-training RUN): the page with a slider."""
    need_type("run_dir", run_dir, (str, os.PathLike), "a run's folder (a str or a Path)")
    need_view(text)
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
