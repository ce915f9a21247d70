"""The offline interactive page (inspection/html.py) without a trained model: packed weights, one self-contained
file whose tokens stay text, and in headless Chromium (when installed) hover and click, links, the walkthrough
with explain.npz's numbers, decoding steps, head roles and chosen layers.

    python -m pytest tests/test_html.py -q
"""

import base64
import json
import math
import re

import numpy as np
import pytest

from inspection.html import pack_att, page as page_html
from inspection.views import VIEWS, Settings
from inspection.views.maps import STAT_NAMES, head_stats
from tests.conftest import CHROMIUM, LABELS, biased_model, look_at, random_maps


def maps_record(att, labels, prefill=None, text=None):
    """A maps record (inspection/views/maps.py) of random maps `att` (L, H, T, T) with tokens `labels`: what a page
    of maps alone draws, with no model behind it."""
    L, H, T = att.shape[0], att.shape[1], len(labels)
    return {"ids": list(range(T)), "tokens": list(labels), "pieces": list(labels), "text": text or "".join(labels),
            "att": att, "prefill": T if prefill is None else prefill, "stats": head_stats(att), "off": [[""] * H] * L,
            "head": None, "trace": None}


def attention_page(att, labels, title=None, **options):
    return page_html({"maps": maps_record(att, labels, text=title)}, **options)


def save_html(att, labels, path, prefill=None, roles=None, layers=None):
    records = {"maps": maps_record(att, labels, prefill)} | ({"roles": roles} if roles else {})
    path.write_text(page_html(records, layers=layers), encoding="utf-8")
    return path


def save_views(model, ids, labels, path, names=("maps", "walkthrough"), lang="en", **settings):
    """attention.html of the views `names` of `ids` through `model`, its tokens `labels`."""
    look = look_at(model, ids, labels)
    records = {name: VIEWS[name].record(look, Settings(**settings)) for name in names}
    path.write_text(page_html(records, lang), encoding="utf-8")
    return path


def map_origin(page, index=0):
    """(x, y) of the top-left cell of the index-th heatmap on screen (past its token labels), and a cell's size."""
    return page.evaluate("(() => { const c = document.querySelectorAll('#maps canvas')[%d]; c.scrollIntoView();"
                         " const r = c.getBoundingClientRect(), d = c.dataset;"
                         " return [r.left + Number(d.left), r.top + Number(d.top), Number(d.cell)]; })()" % index)


def table_rows(page, selector):
    """The text of every cell of a table on the page, row by row (its header first)."""
    return page.evaluate("Array.from(document.querySelector('%s').rows, r => Array.from(r.cells, c => c.textContent))"
                         % selector)


def test_packed_weights_round_trip():
    weights = random_maps(2, 2, 7)
    raw = np.frombuffer(base64.b64decode(pack_att(weights)), dtype="<u2") / 65535
    q, k = np.tril_indices(7)
    np.testing.assert_allclose(raw.reshape(2, 2, -1), weights[..., q, k], atol=1e-5)


def test_page_is_self_contained_and_escapes_tokens():
    page = attention_page(random_maps(1, 2, len(LABELS)), LABELS, title="제목 <b>")
    assert "__" not in page.replace("__proto__", "")  # every placeholder filled
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "http://" not in page and "https://" not in page and "<link" not in page
    assert page.count("</script>") == 3  # the error hook, the data and the code: no token closes one early
    assert "제목 &lt;b&gt;" in page and "@font-face" in page


def test_a_title_or_token_that_spells_a_placeholder_stays_text():
    page = attention_page(random_maps(1, 1, 3), ["__DATA__", "__TITLE__", "x"], title="__DATA__ __FONT_CSS__")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert data["tokens"] == ["__DATA__", "__TITLE__", "x"]
    assert page.count("<title>__DATA__ __FONT_CSS__</title>") == 1 and page.count("@font-face") == 1


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_page_in_chromium_shows_attention_on_hover_and_click(tmp_path, browser):
    L, H, T = 2, 3, len(LABELS)
    weights = random_maps(L, H, T, seed=1)
    page = browser(save_html(weights, LABELS, tmp_path / "attention.html"))
    assert page.problems() == ([], "")
    assert page.texts("#layer option") == ["layer 0", "layer 1"]
    assert page.texts("#head option") == ["all heads", "head 0", "head 1", "head 2"]
    assert page.texts("#tokens .t") == LABELS
    assert len(page.texts("#maps canvas")) == H  # all heads of layer 0 at first

    def strips(kind):  # the weights shown per head: kind "outgoing" (the focus's row) or "incoming" (column)
        values = [float(w) for w in page.texts(f"#{kind} .w")]
        return np.array(values).reshape(-1, T)

    # Hover token 4: every head's row 4 (where it attends) and column 4 (what attends to it).
    page.move(*page.centre("#tokens .tok", 4))
    np.testing.assert_allclose(strips("outgoing"), weights[0, :, 4], atol=6e-4)
    np.testing.assert_allclose(strips("incoming"), weights[0, :, :, 4], atol=6e-4)
    # Click token 7 pins it: hovering another token no longer moves the focus.
    page.click(*page.centre("#tokens .tok", 7))
    page.move(*page.centre("#tokens .tok", 2))
    np.testing.assert_allclose(strips("outgoing"), weights[0, :, 7], atol=6e-4)
    assert page.evaluate("document.querySelectorAll('#tokens .tok.pinned').length") == 1
    # Layer 1, head 2: one strip, one heatmap, one row of statistics.
    page.evaluate("""for (const [id, v] of [["layer", "1"], ["head", "2"]]) {
        const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event("change")); }""")
    np.testing.assert_allclose(strips("outgoing"), weights[1, 2, 7][None], atol=6e-4)
    assert len(page.texts("#maps canvas")) == 1
    row = table_rows(page, "#stats table")[1]  # a real table: head, then the statistics
    expected = head_stats(weights)
    assert [float(x) for x in row] == pytest.approx([2] + [expected[n][1, 2] for n in STAT_NAMES], abs=1e-4)
    # Clicking a heatmap row pins that query token; hovering a cell names it with its weight.
    x0, y0, cell = map_origin(page)
    page.click(x0 + 1.5 * cell, y0 + 9.5 * cell)
    np.testing.assert_allclose(strips("incoming"), weights[1, 2, :, 9][None], atol=6e-4)
    page.move(x0 + 1.5 * cell, y0 + 9.5 * cell)
    assert page.evaluate("document.getElementById('cell').textContent") == (
        f"layer 1 head 2: query 9 {LABELS[9]} → key 1 {LABELS[1]}: {weights[1, 2, 9, 1]:.4f}")
    assert page.problems() == ([], "")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_page_link_can_choose_layer_head_and_token(tmp_path, browser):
    weights = random_maps(2, 3, len(LABELS), seed=2)
    page = browser(save_html(weights, LABELS, tmp_path / "attention.html"), "#layer=1&head=0&focus=5")
    assert page.evaluate("[document.getElementById('layer').value, document.getElementById('head').value]") == ["1", "0"]
    shown = [float(w) for w in page.texts("#outgoing .w")]
    np.testing.assert_allclose(shown, weights[1, 0, 5], atol=6e-4)


# ---- the walkthrough, decoding steps, roles and layers on the page ---------------------------------

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def shown_floats(page, selector):
    return [float(x.replace("−∞", "-inf")) for x in page.texts(selector)]


def check_walkthrough(page, t, layer, head, i):
    """The walkthrough on the page shows head layer.head at query i with the numbers of explain.npz `t`."""
    T, d = t.att.shape[-1], t.d_head
    assert page.evaluate("document.querySelector('#explain h2').textContent").startswith(  # the terminal's title
        f"Layer {layer}, head {head}, query token {i} “{LABELS[i]}” of {T} tokens (n_embd ")
    keys = list(range(min(T, i + 4)))  # the visible keys and up to 3 later ones
    assert [int(j) for j in page.texts("#ex-keys td.j")] == keys
    np.testing.assert_allclose(shown_floats(page, "#ex-keys td.s"), t.scores[layer, head, i, keys] * math.sqrt(d), atol=1e-4)
    np.testing.assert_allclose(shown_floats(page, "#ex-keys td.ss"), t.scores[layer, head, i, keys], atol=1e-4)
    masked = page.texts("#ex-keys td.m")
    assert [m == "−∞" for m in masked] == [j > i for j in keys]
    np.testing.assert_allclose([float(m) for m in masked[: i + 1]], t.scores[layer, head, i, : i + 1], atol=1e-4)
    np.testing.assert_allclose(shown_floats(page, "#ex-keys td.w"), t.att[layer, head, i, keys], atol=1e-4)
    x_rows = page.texts("#ex-vectors td.x")
    assert all(row.endswith(", …]") for row in x_rows)
    np.testing.assert_allclose([float(v) for v in x_rows[0][1:-4].split(",")], t.x[layer, 0, :4], atol=1e-4)
    np.testing.assert_allclose(shown_floats(page, "#ex-vectors td.xn"), np.linalg.norm(t.x[layer, keys], axis=-1), atol=1e-4)
    size = t.att[layer, head, i, : i + 1] * np.linalg.norm(t.v[layer, head, : i + 1], axis=-1)
    np.testing.assert_allclose(shown_floats(page, "#ex-top td.c"), np.sort(size)[::-1][:3], atol=1e-4)
    for j, c in zip(page.texts("#ex-top td.j"), shown_floats(page, "#ex-top td.c")):
        assert c == pytest.approx(size[int(j)], abs=1e-4)
    y_text = page.evaluate("document.querySelector('#explain .ex-y').textContent")
    y = t.y[layer, head, i]
    assert [float(v) for v in re.findall(r"-?\d+\.\d{4}", y_text)] == pytest.approx([*y[:4], np.linalg.norm(y)], abs=1e-4)
    q_text = page.evaluate("document.querySelector('#explain .ex-q').textContent")
    assert [float(v) for v in re.findall(r"-?\d+\.\d{4}", q_text)][:4] == pytest.approx(t.q[layer, head, i, :4], abs=1e-4)
    assert page.evaluate("document.querySelector('#explain .ex-sum').textContent") == "Σ w_j = 1.0000"
    out_text = page.evaluate("document.querySelector('#explain .ex-out').textContent")
    assert [float(v) for v in re.findall(r"-?\d+\.\d{4}", out_text)] == pytest.approx(
        [*t.out[layer, i, :4], np.linalg.norm(t.out[layer, i])], abs=1e-4)


@pytest.mark.slow
@needs_chromium
def test_clicking_a_query_token_of_a_head_opens_its_walkthrough_with_the_npz_numbers(tmp_path, browser):
    from inspection.trace import load_trace, save_trace, trace_ids

    ids = [0, 5, 17, 3, 42, 17, 9, 63, 1, 2, 30, 11]
    assert len(ids) == len(LABELS)
    trace = trace_ids(biased_model(), ids)
    t = load_trace(save_trace(trace, tmp_path / "explain.npz"))  # what the page shows = what the npz holds
    page = browser(save_views(biased_model(), ids, LABELS, tmp_path / "attention.html"))
    assert page.evaluate("document.getElementById('explain').children.length") == 0  # nothing clicked yet
    T = len(ids)
    page.click(*page.centre("#outgoing .tok", 1 * T + 6))  # head 1's row strip, token 6
    check_walkthrough(page, t, 0, 1, 6)
    page.click(*page.centre("#tokens .tok", 2))  # the token line: the same head, another query
    check_walkthrough(page, t, 0, 1, 2)
    page.evaluate("""const s = document.getElementById("layer"); s.value = "1"; s.dispatchEvent(new Event("change"));""")
    x0, y0, cell = map_origin(page)
    page.click(x0 + 0.5 * cell, y0 + 9.5 * cell)  # head 0's heatmap, row 9
    check_walkthrough(page, t, 1, 0, 9)
    page.click(*page.centre("#incoming .tok", 1 * T + 11))  # head 1's column strip: query 11, the last
    check_walkthrough(page, t, 1, 1, 11)
    assert page.texts("#explain .ex-more") == []
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
def test_a_link_opens_a_walkthrough(tmp_path, browser):
    from inspection.trace import load_trace, save_trace, trace_ids

    ids = [0, 5, 17, 3, 42, 17, 9, 63, 1, 2, 30, 11]
    trace = trace_ids(biased_model(), ids)
    t = load_trace(save_trace(trace, tmp_path / "explain.npz"))
    page = browser(save_views(biased_model(), ids, LABELS, tmp_path / "attention.html"), "#layer=1&head=0&focus=7&explain=1")
    check_walkthrough(page, t, 1, 0, 7)
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
def test_a_long_text_s_walkthrough_lists_the_keys_the_terminal_lists_with_numpy_s_numbers(tmp_path, browser):
    """40 tokens: past inspection.views.walkthrough.ALL_KEYS the walkthrough lists the first key, the 8 strongest and the last
    4 (with "…" where it skips), on the page as in the terminal; q·k_j is NumPy's product of the recorded q and k."""
    from inspection.trace import load_trace, save_trace, trace_ids

    ids = [(7 * i + 3) % 64 for i in range(40)]
    labels = [f"t{i}" for i in ids]
    model = biased_model(block_size=48)
    trace = trace_ids(model, ids)
    t = load_trace(save_trace(trace, tmp_path / "explain.npz"))
    page = browser(save_views(model, ids, labels, tmp_path / "attention.html"), "#layer=1&head=1&focus=33&explain=1")
    shown = page.texts("#ex-keys td.j")
    look = look_at(model, ids, labels, 33)
    terminal = VIEWS["walkthrough"].text(VIEWS["walkthrough"].record(look, Settings(explain=(1, 1), query=33)), "en")
    lines = terminal.splitlines()
    header = next(n for n, line in enumerate(lines) if line.split()[:1] == ["j"] and "q·k_j" in line)
    listed = [row.split()[0] for row in lines[header + 1 : header + 1 + len(shown)]]
    assert shown == listed and "…" in shown  # the same keys, and the same gaps
    keys = [int(j) for j in shown if j != "…"]
    att_row = t.att[1, 1, 33, :34]
    assert keys == sorted({0, *np.argsort(-att_row, kind="stable")[:8].tolist(), 30, 31, 32, 33, 34, 35, 36})
    dots = [float(x) for x in page.texts("#ex-keys td.s") if x.strip()]
    np.testing.assert_allclose(dots, t.k[1, 1, keys].astype(np.float64) @ t.q[1, 1, 33], atol=1e-4)
    assert page.texts("#explain .ex-some") == [f"   {len(keys) - 3} of the 34 keys are listed: the first, the most "
                                               "attended, the last few."]  # as the terminal says it
    assert page.texts("#explain .ex-some")[0] in terminal
    assert page.problems() == ([], "")


def hangul_drawn_by_other_fonts(page) -> list:
    """Every rendered element whose own text holds Hangul that a font other than the page's embedded one drew, as
    Chromium reports the fonts it used for the element's text (CSS.getPlatformFontsForNode: each font's glyph count,
    and whether it is a web font): with the embedded font first for Hangul, the web font's glyphs must cover every
    Hangul syllable of the text. Elements drawn with no font at all are not rendered (a closed <details>, a hidden
    panel) and are left out."""
    page.call("DOM.enable", session=page.session)
    page.call("CSS.enable", session=page.session)
    root = page.call("DOM.getDocument", session=page.session, depth=-1)["root"]
    hangul, bad, nodes = re.compile("[\uac00-\ud7a3]"), [], [root]
    while nodes:
        node = nodes.pop()
        children = node.get("children", [])
        nodes += [c for c in children if c.get("nodeType") == 1]
        text = "".join(c.get("nodeValue", "") for c in children if c.get("nodeType") == 3)
        if not hangul.search(text) or node["nodeName"] in ("SCRIPT", "STYLE", "TITLE"):
            continue
        fonts = page.call("CSS.getPlatformFontsForNode", session=page.session, nodeId=node["nodeId"])["fonts"]
        embedded = sum(f["glyphCount"] for f in fonts if f["isCustomFont"])
        if fonts and embedded < len(hangul.findall(text)):
            bad.append((node["nodeName"], text[:30], [f["familyName"] for f in fonts]))
    return bad


@pytest.mark.slow
@needs_chromium
def test_every_korean_text_of_the_page_is_drawn_with_its_embedded_font(tmp_path, browser):
    """The Korean page with every panel open (walkthrough, path, lens, roles, glossary): no Hangul falls back to a
    system font, which on a machine without a Korean font (CI's) draws empty boxes."""
    from inspection.views.roles import measure_heads, roles_record

    ids, model = [0, 5, 17, 3, 42, 17, 9, 63, 1, 2, 30, 11], biased_model()
    look = look_at(model, ids, LABELS)
    look.label = lambda i: f"토큰{i}"  # every vocabulary label in Korean: the lens and the path name them
    records = {name: VIEWS[name].record(look, Settings()) for name in ("maps", "walkthrough", "path", "lens")}
    records["roles"] = roles_record(measure_heads(model, np.arange(1, 64), list(range(1, 64)), eot_id=0))
    (tmp_path / "attention.html").write_text(page_html(records, "ko"), encoding="utf-8")
    page = browser(tmp_path / "attention.html", "#layer=1&head=1&focus=6&explain=1&lang=ko")
    page.evaluate("document.getElementById('glossary').open = true")
    assert page.texts("#path th") and page.texts("#explain th") and page.texts("#lens")[0]  # the panels are drawn
    from inspection.glossary import GLOSSARY

    assert page.texts("#glossary-list dt") == [name for _, name, _, _ in GLOSSARY]  # Korean first: "head 끄기 (...)"
    assert hangul_drawn_by_other_fonts(page) == []
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
def test_page_steps_through_the_decoding_one_cached_row_at_a_time(tmp_path, browser):
    T, prefill = len(LABELS), 8
    weights = random_maps(1, 2, T, seed=3)
    page = browser(save_html(weights, LABELS, tmp_path / "attention.html", prefill=prefill))
    assert page.evaluate("document.getElementById('stepper').hidden") is False
    assert page.evaluate("[document.getElementById('step').max, document.getElementById('step').value]") == ["4", "4"]
    page.click(*page.centre("#step-back"))
    page.click(*page.centre("#step-back"))  # step 2: the cache holds 10 keys, the newest row is token 9
    assert page.evaluate("document.getElementById('step-text').textContent").startswith(
        f"step 2 of 4: token 9 “{LABELS[9]}” went in; its query, compared with the 10 cached keys, mixed their "
        "values and chose token 10")
    assert page.evaluate("document.querySelectorAll('#tokens .tok.later').length") == T - 10
    for kind in ("outgoing", "incoming"):  # tokens after the cache's end show no weight
        shown = np.array(page.texts(f"#{kind} .w")).reshape(2, T)
        assert (shown[:, 10:] == "").all() and (shown[:, :10] != "").all()
    out = np.array([[float(w) for w in row[:10]] for row in np.array(page.texts("#outgoing .w")).reshape(2, T)])
    np.testing.assert_allclose(out, weights[0, :, 9, :10], atol=6e-4)  # the focus follows the newest row
    # the heatmap leaves the rows and columns still to come blank
    pixel = page.evaluate("""(() => { const c = document.querySelector('#maps canvas'), d = c.dataset, n = Number(d.cell);
        const at = (q, k) => Array.from(c.getContext('2d').getImageData(Number(d.left) + k * n + 1,
                                                                       Number(d.top) + q * n + 1, 1, 1).data).slice(0, 3);
        return [at(11, 2), at(9, 2)]; })()""")
    assert pixel[0] == [250, 250, 250] and pixel[1] != [250, 250, 250]
    page.evaluate("""const s = document.getElementById("step"); s.value = "0"; s.dispatchEvent(new Event("input"));""")
    assert page.evaluate("document.getElementById('step-text').textContent").startswith(
        "prefill: tokens 0..7 in one forward; the cache holds 8 keys and their values")
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
def test_page_shows_head_roles_and_only_the_chosen_layers(tmp_path, browser):
    T = len(LABELS)
    weights = random_maps(3, 2, T, seed=4)
    from inspection.views.roles import ROLES
    scores = {role: [[0.0, 0.0]] * 3 for role in ROLES} | {"self": [[0.5 + layer / 10, 0.51 + layer / 10]
                                                                      for layer in range(3)]}
    roles = {"scores": scores, "chance": {role: 0.01 for role in ROLES}, "repeat": 2, "loss_first_copy": 1.0,
             "loss_second_copy": 1.0, "loss_drop": 0.0}  # a roles record (inspection/views/roles.py) made by hand
    page = browser(save_html(weights, LABELS, tmp_path / "attention.html", roles=roles, layers=[0, 2]),
                   "#layer=2&head=all&focus=5")
    assert page.texts("#layer option") == ["layer 0", "layer 2"]
    assert page.texts("#maps figcaption") == ["layer 2 head 0 · self 0.70", "layer 2 head 1 · self 0.71"]
    shown = np.array([float(w) for w in page.texts("#outgoing .w")]).reshape(2, T)
    np.testing.assert_allclose(shown, weights[2, :, 5], atol=6e-4)
    assert table_rows(page, "#stats table")[1][-1] == "self 0.70"
    assert page.evaluate("document.getElementById('stepper').hidden") is True  # not from decoding
    page.click(*page.centre("#tokens .tok", 3))
    assert page.evaluate("document.getElementById('explain').children.length") == 0  # no trace, no walkthrough
    assert page.problems() == ([], "")
