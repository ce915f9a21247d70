"""The page shows pictures first (inspection/html.py, inspection/page/, inspection/views/*.js): it opens where the
lesson is (an induction head at a token with an earlier copy), a labelled heatmap and the lines in the first
screen with little monospace text, real tables whose columns align, every layer and head as line pictures, each
token's surprise equal to --score's terms, a switched-off head before and after, and the snapshots played; the
tour (inspection/tour.py) walks its cards over visible parts with the run's numbers and code lines.

    python -m pytest tests/test_page.py -q
"""

import math

import numpy as np
import pytest
import torch

from inspection.html import opening, page as page_html
from inspection.views import Settings, compute
from inspection.views.roles import ROLES
from model.nll import stream_nll
from model.sampling import sampling_probs
from tests.conftest import CHROMIUM, biased_model, random_maps, toy_run

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
IDS = [0, 5, 17, 3, 42, 9, 5, 17, 3, 42, 9, 5]  # a phrase and its copy: token 11 (5) has earlier copies at 1 and 6


def roles_record(L, H, best: dict) -> dict:
    """A roles record (inspection/views/roles.py) made by hand: every score 0.05 but `best` {(layer, head): (role,
    score)}."""
    scores = {role: [[0.05] * H for _ in range(L)] for role in ROLES}
    for (layer, head), (role, score) in best.items():
        scores[role][layer][head] = score
    return {"scores": scores, "chance": {role: 0.05 for role in ROLES}, "repeat": 4, "loss_first_copy": 5.0,
            "loss_second_copy": 1.0, "loss_drop": 4.0}


def induction_maps(ids, L=2, H=2, layer=1, head=1) -> np.ndarray:
    """Random maps but head layer.head, which at every query attends to the token after its token's last earlier copy
    (0.9), the rest spread: an induction head by construction."""
    att = random_maps(L, H, len(ids), seed=5).astype(np.float64)
    T = len(ids)
    for q in range(T):
        copies = [j for j in range(q - 1) if ids[j] == ids[q]]
        row = np.tril(np.ones(T))[q] / (q + 1)
        if copies:
            row = 0.1 * row
            row[copies[-1] + 1] += 0.9
        att[layer, head, q] = row
    return att


def test_the_page_opens_on_the_induction_head_at_the_token_whose_copy_it_follows():
    att = induction_maps(IDS)
    att[1, 1, 7] = np.tril(np.ones(12))[7] / 8  # token 7 has an earlier copy (2) but its head looks elsewhere
    roles = roles_record(2, 2, {(0, 1): ("previous-token", 0.9), (1, 1): ("induction", 0.8), (1, 0): ("induction", 0.4)})
    records = {"maps": {"ids": IDS, "att": att}, "roles": roles}
    found = opening(records, [0, 1])
    rows = [q for q in range(12) if any(IDS[j] == IDS[q] for j in range(q - 1))]
    assert found["li"] == 1 and found["head"] == 1
    assert found["focus"] in rows and att[1, 1, found["focus"]].max() == pytest.approx(0.9 + 0.1 / (found["focus"] + 1))
    assert opening(records, [0]) == {"li": 0, "head": 1, "focus": 11}  # no induction head in the page: the strongest role
    weak = roles_record(2, 2, {(1, 1): ("induction", 0.2)})  # under the bar (0.3): no head named, the page's default
    assert opening({"maps": records["maps"], "roles": weak}, [0, 1]) is None
    assert opening({"maps": records["maps"]}, [0, 1]) is None


def lesson_page(tmp_path, lang="en", off=None):
    """The page of IDS through a tiny model whose head 1.1 is made an induction head (its maps replaced), with roles."""
    model = biased_model(3)
    run = toy_run(model)
    records = compute(run, IDS, ["maps", "walkthrough", "path", "lens"], Settings(mode="zero"), off=off)
    records["maps"]["att"] = induction_maps(IDS).astype(np.float32)
    records["roles"] = roles_record(2, 2, {(0, 0): ("previous-token", 0.9), (1, 1): ("induction", 0.8)})
    path = tmp_path / "attention.html"
    path.write_text(page_html(records, lang), encoding="utf-8")
    return path, model, records


MONOSPACE_IN_VIEW = """(() => {  // the characters of text set in a monospace font inside the first 1280x800 screen
  let n = 0;
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const node = walk.currentNode, e = node.parentElement;
    if (!node.textContent.trim() || !getComputedStyle(e).fontFamily.startsWith("monospace")) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) if (r.bottom > 0 && r.top < 800 && r.right > 0 && r.left < 1280 && r.width > 0)
      { n += node.textContent.trim().length; break; }
  }
  return n;
})()"""


def in_first_screen(page, selector):
    return page.evaluate(f"""(() => {{ const r = document.querySelector("{selector}").getBoundingClientRect();
        return r.width > 0 && r.top >= 0 && r.bottom <= 800 && r.left >= 0 && r.right <= 1280; }})()""")


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_first_screen_is_a_labelled_map_and_the_lines_of_the_lesson_head(tmp_path, browser, lang):
    path, _, _ = lesson_page(tmp_path, lang)
    page = browser(path)
    page.call("Emulation.setDeviceMetricsOverride", session=page.session, width=1280, height=800, deviceScaleFactor=1,
              mobile=False)
    assert page.problems() == ([], "")
    assert page.evaluate("[document.getElementById('layer').value, document.getElementById('head').value]") == ["1", "1"]
    focus = page.evaluate("Number(document.querySelector('#tokens .tok.pinned').dataset.i)")
    assert any(IDS[j] == IDS[focus] for j in range(focus - 1))  # a token with an earlier copy, pinned
    assert page.evaluate("document.title") == page.evaluate("document.querySelector('h1').textContent")  # the text
    assert in_first_screen(page, "#maps canvas") and in_first_screen(page, "#lines svg")
    assert page.evaluate("Number(document.querySelector('#maps canvas').dataset.left)") > 0  # room for its labels
    assert page.evaluate(MONOSPACE_IN_VIEW) <= 200
    assert page.evaluate("document.getElementById('stats-box').open || document.getElementById('lens-box').open") is False
    # the walkthrough of that head at that token is open below
    assert page.evaluate("document.querySelector('#explain h2').textContent").count(str(focus)) >= 1


TABLE_EDGES = """Array.from(document.querySelectorAll('table'), (table) => {
  const rows = Array.from(table.rows).filter((r) => r.cells.length === table.rows[0].cells.length);
  return Array.from(rows[0].cells, (_, c) => new Set(rows.map((r) => Math.round(r.cells[c].getBoundingClientRect().right))).size);
})"""


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_table_s_columns_align_hangul_included(tmp_path, browser, lang):
    path, _, _ = lesson_page(tmp_path, lang)
    page = browser(path, "#layer=1&head=all&focus=9")
    page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    tables = page.evaluate("Array.from(document.querySelectorAll('table'), (t) => t.className)")
    assert {"grid stats", "grid roles", "grid lens"} <= set(tables), tables
    assert all(n == 1 for edges in page.evaluate(TABLE_EDGES) for n in edges)  # one right edge per column
    assert page.evaluate("document.querySelectorAll('#stats, #roles, #lens, #next')") is not None
    assert page.evaluate("Array.from(document.querySelectorAll('pre'), (p) => p.id)") == ["errors"]  # no padded text


@pytest.mark.slow
@needs_chromium
def test_the_token_line_draws_each_token_s_surprise_the_terms_score_sums(tmp_path, browser):
    path, model, records = lesson_page(tmp_path)
    page = browser(path)
    shown = page.evaluate("Array.from(document.querySelectorAll('#tokens .tok'), (b) => b.dataset.surprise)")
    assert shown[0] == ""  # nothing predicts the first token
    bits = np.array([float(x) for x in shown[1:]])
    total, count = stream_nll(model, IDS)  # --score's rule: nats summed over ids[1:]
    assert count == len(IDS) - 1 and bits.sum() * math.log(2) == pytest.approx(total, rel=1e-5)
    with torch.no_grad():
        logits = model(torch.tensor([IDS]), all_logits=True)[0][0]
    p = torch.softmax(logits[:-1].double(), -1)
    np.testing.assert_allclose(bits, -np.log2(p[torch.arange(11), IDS[1:]].numpy()), atol=1e-5)
    title = page.evaluate("document.querySelectorAll('#tokens .tok')[4].title")  # the expected tokens on hover
    best = int(p[3].argmax())
    assert f"t{best} {p[3, best]:.3f}" in title


@pytest.mark.slow
@needs_chromium
def test_a_switched_off_head_is_grey_and_the_next_token_shows_before_and_after(tmp_path, browser):
    path, model, _ = lesson_page(tmp_path, off="1.1")
    page = browser(path, "#layer=1&head=all")
    assert page.evaluate("Array.from(document.querySelectorAll('#maps figure'), (f) => f.className)") == ["", "off"]
    assert "switched off" in page.evaluate("document.querySelectorAll('#maps figcaption')[1].textContent")
    rows = page.evaluate("Array.from(document.querySelector('#bars table').rows, (r) => Array.from(r.cells, "
                         "(c) => c.textContent.trim())).slice(1)")
    ids = [int(row[1][1:]) for row in rows]  # labels t<id>
    with torch.no_grad():
        full = model(torch.tensor([IDS]))[0][0, -1]
    before = sampling_probs(full[None], 0.8, None, None)[0]  # the page's default temperature
    assert ids[:10] == before.argsort(descending=True)[:10].tolist()  # the whole model's top 10 kept first
    np.testing.assert_allclose([float(row[2]) for row in rows], before[ids].numpy(), atol=1e-4)
    assert [float(row[2]) for row in rows[:10]] != [float(row[3]) for row in rows[:10]]  # the head changed them


@pytest.mark.slow
@needs_chromium
def test_the_overview_draws_every_head_and_opens_the_one_clicked(tmp_path, browser):
    path, _, _ = lesson_page(tmp_path)
    page = browser(path)
    assert page.evaluate("document.querySelectorAll('#overview canvas').length") == 4
    assert page.evaluate("Array.from(document.querySelectorAll('#overview td.chosen'), (c) => c.dataset.layer + '.' + "
                         "c.dataset.head)") == ["1.1"]
    page.click(*page.centre("#overview canvas", 1))  # layer 0, head 1
    assert page.evaluate("[document.getElementById('layer').value, document.getElementById('head').value]") == ["0", "1"]
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_tour_walks_every_card_on_a_visible_part_with_the_run_s_numbers_and_code(tmp_path, browser, lang):
    from inspection.tour import ROOT, tour_cards

    path, model, records = lesson_page(tmp_path, lang)
    page = browser(path)  # a first visit: the tour opens by itself
    cards = tour_cards()
    seen = []
    for n, card in enumerate(cards):
        assert page.evaluate("document.getElementById('tour').dataset.card") == card["key"]
        shown = page.evaluate("""(() => { const e = document.querySelector('.tour-target'), r = e.getBoundingClientRect();
            return [e.id, r.width > 0 && r.height > 0 && r.bottom > 0 && r.top < innerHeight,
                    document.querySelector('#tour .tour-text').textContent,
                    (document.querySelector('#tour .tour-code') || {}).textContent || null]; })()""")
        target, visible, text, code = shown
        assert visible, card["key"]
        assert "?" not in text and "{" not in text, text  # every number filled in from the page's records
        if card["file"]:
            assert code == card["code"]
            assert (ROOT / card["file"]).read_text(encoding="utf-8").splitlines()[card["line"] - 1].strip() == code
        seen.append((card["key"], target, text))
        if n < len(cards) - 1:
            page.click(*page.centre("#tour-next"))
    texts = dict((key, text) for key, _, text in seen)
    walk = records["walkthrough"]  # the lesson head 1.1 at the pinned token: its numbers in the cards
    focus = page.evaluate("state.explain.q")
    layer = walk["layers"].index(1)
    assert f"{walk['sum'][layer, 1, focus]:.4f}" in texts["softmax"]
    assert str(len(IDS) * len(IDS)) in texts["cost"] and str(2 * 2 * 2 * len(IDS) * 16) in texts["cache"]
    assert f"{focus}" in texts["mask"] and f"{len(IDS) - 1 - focus}" in texts["mask"]
    assert "1.1" in texts["test"]  # the tour ends on the lesson's induction head
    page.click(*page.centre("#tour-next"))  # done: closed, and a second visit does not open it again
    assert page.evaluate("document.getElementById('tour').hidden") is True
    page.evaluate("window.before = true; location.reload()")
    page.wait_for("!window.before && document.body !== null && document.body.dataset.readyMs !== undefined")
    assert page.evaluate("document.getElementById('tour').hidden") is True
    page.click(*page.centre("#tour-start"))
    assert page.evaluate("document.getElementById('tour').dataset.card") == "tokens"
    assert page.problems() == ([], "")
