"""Every view in a notebook (inspection/notebook.py): the command line's numbers (inspection.views.compute makes them
for both), each one rendered in Chromium, two pages side by side, bad input as one line in a real kernel, a run
trained in the background with its live page (inspection/notebook_live.py), and both lesson notebooks (notebooks/)
run top to bottom.

    python -m pytest tests/test_notebook.py -q
"""

import base64
import html
import json
import re
import struct
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import generate
import train
from inference import load_run
from inspection import compute
from inspection import notebook as nb
from inspection import notebook_live
from inspection.labels import display_width
from storage.checkpoint import read_metrics
from cli.errors import UserError
from tests.conftest import CHROMIUM, ROOT, TINY
from tests.test_watch import SHOWN

PROMPT = "대한민국 국회는 법률을 제정한다"
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, data_cache):
    """configs/tiny.toml for 20 steps, an evaluation every 10 and 2 snapshots: heads.png and snapshots/."""
    out = tmp_path_factory.mktemp("notebook") / "run"
    assert train.main(["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1",
                       "--train.sample_tokens=0", "--train.max_steps=20", "--train.eval_interval=10",
                       "--train.snapshots=2", "--out", str(out)]) == 0  # fmt: skip
    return out


@pytest.fixture
def english():
    nb.language("en")
    yield
    nb.language("en")


def printed(argv, capsys) -> str:
    assert generate.main([str(a) for a in argv]) == 0
    return capsys.readouterr().out


def test_each_text_view_is_what_generate_prints(run_dir, english, capsys):
    """The same text as the command line's, in both languages, with heads switched off too."""
    score_file = run_dir.parent / "text.txt"
    score_file.write_text(PROMPT + ". " + PROMPT + ".", encoding="utf-8")
    base = ["--ckpt", run_dir, "--prompt", PROMPT]
    for lang in ("en", "ko"):
        nb.language(lang)
        views = {"--explain 1.0": nb.walkthrough(run_dir, PROMPT, "1.0"), "--explain path": nb.path(run_dir, PROMPT),
                 "--lens": nb.lens(run_dir, PROMPT), "--why": nb.why(run_dir, PROMPT)}  # fmt: skip
        for option, view in views.items():
            assert isinstance(view, nb.Text) and len(view.splitlines()) > 3
            assert view in printed([*base, *option.split(), "--lang", lang], capsys), option
        table = nb.heads(run_dir)
        assert table in printed(["--ckpt", run_dir, "--heads", "--lang", lang], capsys)
        off = nb.why(run_dir, PROMPT, 2, off="1.0,0.1")
        assert off != nb.why(run_dir, PROMPT, 2)
        assert off in printed([*base, "--why", "--query", "2", "--ablate", "1.0,0.1", "--lang", lang], capsys)
        scored = nb.score(run_dir, score_file.read_text(encoding="utf-8"), off=[(1, 1)])
        assert scored in printed(["--ckpt", run_dir, "--score", score_file, "--ablate", "1.1", "--lang", lang], capsys)
    assert "끈 head 1.1" in scored


def test_the_roles_table_names_the_heads_of_a_role(run_dir, english):
    table = nb.heads(run_dir)
    roles = table.roles
    for role in ("self", "mixed", "induction"):
        named = table.with_role(role)
        expected = [f"{l}.{h}" for l in range(2) for h in range(2) if roles.strongest(l, h)[0] == role]
        assert named == ",".join(expected)
    with pytest.raises(UserError, match="role 'copying' is not one of previous-token"):
        table.with_role("copying")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def loaded_frames(page, count: int) -> list[int]:
    """Once the page's `count` frames have loaded: how many tokens each draws."""
    return page.wait_for("(() => { const d = Array.from(document.querySelectorAll('iframe'), f => f.contentDocument);"
                         f" return d.length === {count} && d.every(x => x.readyState === 'complete') && d.map(x => "
                         "x.querySelectorAll('#tokens .tok').length); })()")  # fmt: skip


def hover_in_frame(page, frame: int, token: int) -> list[float]:
    """Move the mouse onto token `token` of the page in frame `frame` (real input, through the frame): the weights
    the page then shows on its tokens (every head's row of that query)."""
    x, y = page.evaluate(f"""(() => {{ const f = document.querySelectorAll('iframe')[{frame}];
        f.scrollIntoView({{block: 'start'}}); const e = f.contentDocument.querySelectorAll('#tokens .tok')[{token}];
        const a = f.getBoundingClientRect(), b = e.getBoundingClientRect();
        return [a.left + b.left + b.width / 2, a.top + b.top + b.height / 2]; }})()""")
    page.move(x, y)
    return page.evaluate(f"Array.from(document.querySelectorAll('iframe')[{frame}].contentDocument"
                         ".querySelectorAll('#outgoing .w'), e => Number(e.textContent))")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_every_view_renders_and_two_pages_work_side_by_side(run_dir, english, tmp_path, browser):
    """A cell's output as a notebook inserts it: each text view is its text in a <pre>, heads.png an image of its
    size, and the attention page and the over-training page each work in their own frame: every token drawn, a
    hovered token's weights those of the model's map, no error, neither page's ids or scripts in the other's way."""
    texts = [nb.walkthrough(run_dir, PROMPT, "1.1"), nb.path(run_dir, PROMPT), nb.lens(run_dir, PROMPT),
             nb.why(run_dir, PROMPT), nb.heads(run_dir), nb.score(run_dir, PROMPT)]
    picture = nb.heads_over_training(run_dir)._repr_png_()
    pages = [nb.page(run_dir, PROMPT), nb.over_training(run_dir, PROMPT)]
    cells = [t._repr_html_() for t in texts] + [f'<img src="data:image/png;base64,{base64.b64encode(picture).decode()}">']
    cells += [p._repr_html_() for p in pages]
    (tmp_path / "outputs.html").write_text("<!DOCTYPE html><meta charset='utf-8'><body>" + "".join(
        f"<div class='output'>{c}</div>" for c in cells) + "</body>", encoding="utf-8")
    page = browser(tmp_path / "outputs.html")
    shown = page.evaluate("Array.from(document.querySelectorAll('pre'), e => e.textContent)")
    assert shown == [str(t) for t in texts]
    assert page.wait_for("document.querySelector('img').complete && [document.querySelector('img').naturalWidth, "
                         "document.querySelector('img').naturalHeight]") == list(png_size(picture))
    maps = compute(load_run(run_dir), PROMPT, ["maps"])["maps"]
    assert loaded_frames(page, 2) == [len(maps["tokens"])] * 2
    for index in (0, 1):
        weights = hover_in_frame(page, index, 4)
        if index == 0:  # layer 0 as the page opens, every head's row 4: the model's own maps
            np.testing.assert_allclose(np.reshape(weights, (2, -1)), maps["att"][0, :, 4], atol=6e-4)
        else:  # the last snapshot's frame is not the one shown first: its own weights, a row of them
            assert len(weights) == 2 * len(maps["tokens"]) and sum(weights[:5]) == pytest.approx(1, abs=3e-3)
    assert page.evaluate("document.querySelectorAll('iframe')[1].contentDocument.getElementById('trainer').hidden") is False
    errors = page.evaluate("Array.from(document.querySelectorAll('iframe'), f => f.contentDocument"
                           ".getElementById('errors').textContent)")
    assert errors == ["", ""]
    assert [e for e in page.events if e.get("method") == "Runtime.exceptionThrown"] == []


@pytest.mark.parametrize("lang", ["ko", "en"])
def test_the_hand_cell_alone_prints_the_explainers_numbers(lang, tmp_path):
    """§1 run by itself in a fresh interpreter, no cell before it: the explainers' example (q = [1, 1], keys [1, 0],
    [1, 1], [0, 1], values [1, 0], [0, 2], [1, 1], d_k = 2) gives their numbers, worked out on paper."""
    book = nbformat.read(NOTEBOOKS / f"lesson.{lang}.ipynb", as_version=4)
    cell = next(c.source for c in book.cells if c.cell_type == "code" and "def attend(" in c.source)
    out = subprocess.run([sys.executable, "-c", cell], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert [line.split("]")[0] + "]" for line in out.splitlines()] == [
        "[1, 2, 1]", "[0.707, 1.414, 0.707]", "[0.248, 0.503, 0.248]", "[0.496, 1.254]", "[0.4965, 1.2552]"]


def columns_in_chromium(page, text: str) -> dict:
    """{terminal column: [the x of that column's left edge in each padded line of `text` that has it]} as Chromium
    lays out the first <pre> (a box's edge for a boxed character); a line's end counts as a column too."""
    lefts = page.evaluate("""(() => {
        const lines = [[]], walk = document.createTreeWalker(document.querySelector('pre'), NodeFilter.SHOW_TEXT);
        for (let node = walk.nextNode(); node; node = walk.nextNode()) {
          const box = getComputedStyle(node.parentElement).display === 'inline-block' ? node.parentElement : null;
          for (let i = 0; i < node.length; i++) {
            if (node.data[i] === '\\n') { lines.push([]); continue; }
            const range = document.createRange(); range.setStart(node, i); range.setEnd(node, i + 1);
            const r = (box || range).getBoundingClientRect();
            lines[lines.length - 1].push([r.left, r.right]);
          }
        }
        return lines; })()""")
    columns = {}
    for line, xs in zip(text.split("\n"), lefts, strict=True):
        if len(re.findall(r"\S {2,}(?=\S)", line)) < 2:  # prose, not a table's row
            continue
        assert len(xs) == len(line)
        for i, (left, _) in enumerate(xs):
            columns.setdefault(display_width(line[:i]), []).append(left)
        columns.setdefault(display_width(line), []).append(xs[-1][1])
    return columns


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_a_text_view_s_columns_align_in_the_browser_hangul_included(run_dir, english, tmp_path, browser):
    """The roles table in Korean as a notebook shows it (Text._repr_html_): every column's edges, the right edges
    of its cells included, at one x in every row, though a Hangul syllable is not two Latin letters wide in a font."""
    nb.language("ko")
    table = nb.heads(run_dir)
    assert re.search("[가-힣]", table) and "induction" in table
    (tmp_path / "table.html").write_text("<!DOCTYPE html><meta charset='utf-8'><body>" + table._repr_html_()
                                         + "</body>", encoding="utf-8")
    page = browser(tmp_path / "table.html")
    assert page.evaluate("document.querySelector('pre').textContent") == str(table)
    columns = columns_in_chromium(page, str(table))
    rows = [line for line in table.split("\n") if len(re.findall(r"\S {2,}(?=\S)", line)) >= 2]
    assert len(rows) >= 5 and any(re.search("[가-힣]", row) for row in rows)
    assert max(len(xs) for xs in columns.values()) == len(rows)
    for column, xs in columns.items():
        assert max(xs) - min(xs) < 0.5, (column, xs)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_a_page_s_frame_is_as_tall_as_the_page_it_shows(run_dir, english, tmp_path, browser):
    """nb.page's iframe takes the height of the page once loaded, and follows it when the page grows or shrinks."""
    (tmp_path / "frame.html").write_text("<!DOCTYPE html><meta charset='utf-8'><body>"
                                         + nb.page(run_dir, PROMPT)._repr_html_() + "</body>", encoding="utf-8")
    page = browser(tmp_path / "frame.html")
    heights = ("(() => { const f = document.querySelector('iframe'), d = f.contentDocument; "
               "return d && d.readyState === 'complete' && [f.clientHeight, "
               "Math.ceil(d.documentElement.getBoundingClientRect().height)]; })()")
    fits = f"(() => {{ const h = {heights}; return h && h[0] === h[1] && h; }})()"
    frame, shown = page.wait_for(fits)
    assert frame != nb.HEIGHT and frame > 200
    page.evaluate("{ const d = document.querySelector('iframe').contentDocument, e = d.createElement('div'); "
                  "e.id = 'tall'; e.style.height = '3000px'; d.body.appendChild(e); }")
    assert page.wait_for(f"(() => {{ const h = {fits}; return h && h[0] >= {frame + 3000} && h; }})()")
    page.evaluate("document.querySelector('iframe').contentDocument.getElementById('tall').remove()")
    assert page.wait_for(f"(() => {{ const h = {fits}; return h && h[0] === {frame} && h; }})()")
    assert page.evaluate("document.querySelector('iframe').contentDocument.getElementById('errors').textContent") == ""
    assert [e for e in page.events if e.get("method") == "Runtime.exceptionThrown"] == []


def execute(book, tmp_path, allow_errors=False):
    """Run a notebook in a real IPython kernel (ipykernel), from notebooks/ as Jupyter would."""
    from nbclient import NotebookClient

    NotebookClient(book, timeout=600, kernel_name="python3", allow_errors=allow_errors,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return book


def errors_of(book) -> list:
    return [o for c in book.cells for o in c.get("outputs", []) if o.output_type == "error"]


@pytest.mark.slow
def test_bad_input_in_a_kernel_is_one_line(run_dir, tmp_path):
    """What the learner sees in the cell: the error's one line, no page of the library's internals."""
    from nbformat.v4 import new_code_cell, new_notebook

    book = new_notebook(cells=[new_code_cell(source) for source in (
        "import sys; sys.path.insert(0, '..')\nfrom inspection import notebook as nb",
        f"nb.page({str(tmp_path / 'nowhere')!r}, 'x')",
        f"nb.walkthrough({str(run_dir)!r}, '가나', '9.9')",
        f"nb.lens({str(run_dir)!r}, '가나', off='1.x')",
        f"nb.path({str(run_dir)!r}, '가나', query=40)")])
    seen = [o["traceback"] for o in errors_of(execute(book, tmp_path, allow_errors=True))]
    assert seen == [[f"CheckpointError: {tmp_path / 'nowhere'} does not exist; pass a run directory (runs/<name>) "
                     "or a checkpoint directory"],
                    ["ModelInputError: head: head 9.9 is not in this model: it has layers 0..1 and heads 0..1 in each"],
                    ["ModelInputError: off '1.x' must be LAYER.HEAD with two numbers, e.g. off 0.1"],
                    ["UserError: --query 40 is outside the 3 tokens of the text; give 0..2 or -1..-3 (from the end)"]]


def notebook_html(book) -> str:
    """The executed notebook as one page, each output put in as a notebook front end puts it: its HTML as it is,
    a PNG as an image, text in a <pre> (the rich form where there is one, as Jupyter prefers it)."""
    parts = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        parts.append(f"<pre class='source'>{html.escape(cell.source)}</pre>")
        for out in cell.outputs:
            data = out.get("data", {})
            if "text/html" in data:
                parts.append(f"<div class='output'>{data['text/html']}</div>")
            elif "image/png" in data:
                parts.append(f"<img src='data:image/png;base64,{data['image/png']}'>")
            elif out.output_type == "stream":
                parts.append(f"<pre class='stream'>{html.escape(out.text)}</pre>")
    return "<!DOCTYPE html><meta charset='utf-8'><body>" + "".join(parts) + "</body>"


def fast(book, runs: Path, data_cache) -> nbformat.NotebookNode:
    """The notebook with its parameter cell shrunk to seconds: tiny runs on the tests' data cache, one thread."""
    cell = next(c for c in book.cells if "parameters" in c.metadata.get("tags", []))
    shrink = [f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0", "--train.max_steps=20",
              "--train.eval_interval=10", "--train.snapshots=2"]
    small = ["--model.n_layer=2", "--model.n_head=2", "--model.n_embd=32", "--data.vocab_size=512"]
    # WATCH off: a live page's server ends with the kernel, so its frame would be empty in the page checked below
    # (test_a_run_trained_in_the_background_shows_its_live_page checks it)
    cell.source = f'RUNS = {str(runs)!r}\nLESSON = {shrink!r}\nDEFAULT = {shrink + small!r}\nWATCH = False\nPROJECT = ""'
    return book


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["ko", "en"])
def test_the_lesson_notebook_runs_top_to_bottom_and_its_pages_work(lang, tmp_path, data_cache, browser):
    """Kept without outputs in git; executed in a kernel with the parameter cell shrunk, no cell fails, every
    view shows itself, and as one page (the outputs as a front end puts them in) its three pages work in Chromium."""
    book = nbformat.read(NOTEBOOKS / f"lesson.{lang}.ipynb", as_version=4)
    nbformat.validate(book)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)  # outputs stripped
    shipped = {}
    exec(next(c for c in code if "parameters" in c.metadata.get("tags", [])).source, shipped)  # the real settings
    assert (shipped["RUNS"], shipped["LESSON"], shipped["DEFAULT"], shipped["WATCH"], shipped["PROJECT"]) == (
        "runs", [], [], True, "")
    execute(fast(book, tmp_path / "runs", data_cache), tmp_path)
    assert errors_of(book) == []
    shown = [o for c in code for o in c.outputs if o.output_type == "execute_result"]
    html_out, png_out = ["text/html", "text/plain"], ["image/png", "text/plain"]
    assert [sorted(o.data) for o in shown] == [html_out] * 2 + [png_out] + [html_out] * 9

    def printed_by(marker: str) -> list[str]:
        cell = next(c for c in code if marker in c.source)
        return "".join(o.text for o in cell.outputs if o.output_type == "stream").splitlines()

    checks = [line for marker in ("attend(q, k, v)", "np.tril(", "k2[j] = 0", "new_kv_cache") for line in
              printed_by(marker) if line.endswith(("True", "False"))]
    assert len(checks) == 9 and all(line.endswith("True") for line in checks), checks  # every allclose holds
    steps = [[int(n) for n in re.findall(r"\d+", line)] for line in printed_by("new_kv_cache") if line.startswith("step ")]
    assert [(s[0], s[-2], s[-1]) for s in steps] == [(t, t + 1, t + 1) for t in range(4, 4 + len(steps))]  # one key, one value a step
    timed = [line for line in printed_by("reference_attention") if line.startswith("T = ")]
    assert [line.split(":")[0] for line in timed] == ["T = 1,024", "T = 2,048"] and all(line.endswith(" ms") for line in timed)
    training = "".join(o.text for c in code for o in c.outputs if o.output_type == "stream" and o.name == "stdout")
    assert ("검증 텍스트 전체" if lang == "ko" else "whole validation split") in training
    (tmp_path / "lesson.html").write_text(notebook_html(book), encoding="utf-8")
    page = browser(tmp_path / "lesson.html")
    counts = loaded_frames(page, 3)
    assert counts[0] == counts[1] and counts[2] > 1
    for index in (0, 2):
        weights = hover_in_frame(page, index, 1)
        assert len(weights) > 0 and all(w >= 0 for w in weights) and max(weights) > 0
    frame = "document.querySelectorAll('iframe')[2].contentDocument"
    page.evaluate(f"{{ const w = {frame}.getElementById('words'); w.checked = true; w.dispatchEvent(new Event('change')) }}")
    assert page.evaluate(f"Array.from({frame}.querySelectorAll('#tokens .t'), e => e.textContent)") == [
        "<|endoftext|>", "대한민국", "␣국회는", "␣법률을", "␣제정한다"]
    assert page.evaluate(f"{frame}.documentElement.lang") == lang
    assert [e for e in page.events if e.get("method") == "Runtime.exceptionThrown"] == []
    assert json.loads(json.dumps(page.evaluate("Array.from(document.querySelectorAll('iframe'), f => "
                                               "f.contentDocument.getElementById('errors').textContent)"))) == [""] * 3


# ---- a run trained in the background, its live page in a cell ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_a_run_trained_in_the_background_shows_its_live_page(tmp_path, data_cache, english, browser, capsys):
    """nb.train starts train.py and returns at once; nb.watch's frame is the page of train.py --watch, which follows
    the run evaluation after evaluation in one document, with metrics.jsonl's numbers; wait() prints train.py's lines."""
    run = tmp_path / "run"
    page = browser(tmp_path / "unused.html")  # Chromium started first: on a busy machine it takes seconds
    training = nb.train(TINY, run, f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
                        "--train.max_steps=600", "--train.eval_interval=40")  # fmt: skip
    try:
        live = nb.watch(training)
        assert nb.watch(training).address == live.address  # one page per run, however often the cell runs
        address = re.fullmatch(r'<iframe src="(http://127\.0\.0\.1:\d+/)" .*</iframe>', live._repr_html_())[1]
        page.evaluate(f"location.href = '{address}'")
        page.wait_for("window.watched && window.watched.runs.length && window.watched.runs[0].evals.length", 120)
        page.evaluate("window.sameDocument = true")
        rows = []
        while training.running:
            row = page.evaluate(SHOWN % 0)
            if row and row not in rows:
                rows.append(row)
        training.wait()
        assert page.evaluate("window.sameDocument") is True  # never reloaded
    finally:
        notebook_live.end_all()
    assert len(rows) >= 2, rows
    recorded = {r["step"]: r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "eval"}
    for step, train_loss, val_loss, *_ in rows:
        assert [train_loss, val_loss] == [f"{recorded[int(step)]['train_loss']:.4f}",
                                          f"{recorded[int(step)]['val_loss']:.4f}"]  # fmt: skip
    assert "whole validation split" in capsys.readouterr().out  # train.py's own lines, printed by wait()
    assert repr(training) == f"Training({str(run)!r}, ended (exit code 0))"


def test_a_background_run_s_bad_setting_is_its_one_line_and_a_folder_not_a_run_is_refused(tmp_path, data_cache):
    training = nb.train(TINY, tmp_path / "run", f"--data.cache_dir={data_cache}", "--train.nope=1")
    with pytest.raises(UserError, match=r"^unknown key train\.nope; valid keys in \[train\]"):
        training.wait()
    assert not (tmp_path / "run").exists()
    with pytest.raises(UserError, match=r"nb.watch\(run=\.\.\.\) .* is not a directory"):
        nb.watch(tmp_path / "nothing")
    with pytest.raises(UserError, match='a setting must be a string as train.py takes it, e.g. "--train.seed=7", got int'):
        nb.train(TINY, tmp_path / "run", 7)
