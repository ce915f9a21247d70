"""The traced intermediates of attention (inspection/trace.py) and the walkthrough of one head
(inspection/views/walkthrough.py), and the walkthrough drawn on the page (inspection/views/walkthrough.js): x, q,
k_j, v_j and q ⊙ k_j as cells per dimension, the scores' steps as coloured columns, y as the weighted stack of the
value rows, and a decoding's KV cache a row per step; every cell's number (data-v) checked against the trace.

    python -m pytest tests/test_walkthrough.py -q
"""

import math
import re

import numpy as np
import pytest
import torch

from cli.errors import UserError
from cli.messages import messages
from inspection.html import page as page_html
from inspection.trace import load_trace, save_trace, trace_ids
from inspection.trace import resolve_query
from inspection.views import Settings, compute, walkthrough
from model.config import GPTConfig
from model.gpt import GPT
from model.sampling import Sampling, stream_with_logits
from tests.conftest import CHROMIUM, biased_model, look_at, toy_run


def explain_head(model, ids, layer, head, query, labels=None, lang="en"):
    """The walkthrough's text of head layer.head at token `query` of `ids`, as --explain prints it."""
    look = look_at(model, ids, labels, query)
    return walkthrough.text(walkthrough.record(look, Settings(explain=(layer, head), query=query)), lang)

C, H, D = 32, 2, 16  # biased_model's n_embd, heads and head size
IDS = [0, 5, 17, 3, 42, 17, 9, 63, 1]


def test_trace_recomputes_each_block_output_to_1e_5():
    model = biased_model()
    trace = trace_ids(model, IDS)
    outputs = []  # each block's output, caught by our own hooks on the same kind of forward
    hooks = [b.register_forward_hook(lambda m, args, out: outputs.append(out[0][0])) for b in model.blocks]
    idx = torch.tensor([IDS])
    model.forward_with_attention(idx)
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        first = model.tok_emb(idx)[0] + model.pos_emb.weight[: len(IDS)]
        np.testing.assert_allclose(trace.resid[0], first.numpy(), atol=1e-6)
        for layer, block in enumerate(model.blocks):
            r = torch.from_numpy(trace.resid[layer] + trace.out[layer])  # x + attention sublayer
            r = r + block.mlp(block.ln_2(r))  # then the MLP
            np.testing.assert_allclose(r.numpy(), outputs[layer].numpy(), atol=1e-5, rtol=0)
    # and the fast path gives the same logits as ever
    torch.testing.assert_close(model(idx, all_logits=True)[0], model.forward_with_attention(idx)[0], atol=1e-5, rtol=0)


def test_trace_follows_the_textbook_formulas():
    model = biased_model(1)
    t = trace_ids(model, IDS)
    T = len(IDS)
    for layer, block in enumerate(model.blocks):
        W, b = block.attn.c_attn.weight.detach().numpy(), block.attn.c_attn.bias.detach().numpy()  # (3C, C)
        x = t.x[layer].astype(np.float64)
        with torch.no_grad():
            np.testing.assert_allclose(x, block.ln_1(torch.from_numpy(t.resid[layer])).numpy(), atol=1e-5)
        for i, name in enumerate("qkv"):  # q = x W_Q + b_Q, per head: columns h*D..(h+1)*D
            full = x @ W[i * C : (i + 1) * C].T + b[i * C : (i + 1) * C]  # (T, C)
            np.testing.assert_allclose(getattr(t, name)[layer], full.reshape(T, H, D).transpose(1, 0, 2), atol=1e-5)
        q, k, v = (getattr(t, n)[layer].astype(np.float64) for n in "qkv")
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(D)  # (H, T, T), future keys included
        np.testing.assert_allclose(t.scores[layer], scores, atol=1e-5)
        masked = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
        weights = np.exp(masked - masked.max(-1, keepdims=True))
        np.testing.assert_allclose(t.att[layer], weights / weights.sum(-1, keepdims=True), atol=1e-6)
        np.testing.assert_allclose(t.y[layer], t.att[layer].astype(np.float64) @ v, atol=1e-5)
        W_O, b_O = block.attn.c_proj.weight.detach().numpy(), block.attn.c_proj.bias.detach().numpy()
        concat = t.y[layer].transpose(1, 0, 2).reshape(T, C)  # heads side by side
        np.testing.assert_allclose(t.out[layer], concat @ W_O.T + b_O, atol=1e-5)
    maps = model.attention_maps(torch.tensor([IDS]))[0].detach().numpy()
    assert np.array_equal(t.att, maps)  # the very attention of attention.npz
    hooked = [m for m in model.modules() if m._forward_hooks or m._forward_pre_hooks]
    assert not hooked  # every hook removed


def test_the_recording_forward_holds_every_step_of_the_pass():
    model = biased_model(2)
    t = trace_ids(model, IDS)
    idx = torch.tensor([IDS])
    with torch.no_grad():
        np.testing.assert_array_equal(t.tok, model.tok_emb.weight[IDS].numpy())  # wte's rows, as they are
        np.testing.assert_array_equal(t.pos, model.pos_emb.weight[: len(IDS)].numpy())  # wpe's rows
        np.testing.assert_allclose(t.resid[0], t.tok + t.pos, atol=1e-6)
        for layer, block in enumerate(model.blocks):
            np.testing.assert_allclose(t.mid[layer], t.resid[layer] + t.out[layer], atol=1e-6)
            np.testing.assert_allclose(t.x2[layer], block.ln_2(torch.from_numpy(t.mid[layer])).numpy(), atol=1e-6)
            hidden = block.mlp.gelu(block.mlp.c_fc(torch.from_numpy(t.x2[layer])))
            np.testing.assert_allclose(t.hidden[layer], hidden.numpy(), atol=1e-6)
            np.testing.assert_allclose(t.mlp[layer], block.mlp.c_proj(hidden).numpy(), atol=1e-6)
            np.testing.assert_allclose(t.block[layer], t.mid[layer] + t.mlp[layer], atol=1e-6)
            if layer + 1 < len(model.blocks):  # what one block hands on is what the next receives
                np.testing.assert_array_equal(t.block[layer], t.resid[layer + 1])
        np.testing.assert_allclose(t.final, model.ln_f(torch.from_numpy(t.block[-1])).numpy(), atol=1e-6)
        np.testing.assert_allclose(t.logits, model(idx, all_logits=True)[0][0].numpy(), atol=1e-6, rtol=0)
    assert t.hidden.shape == (2, len(IDS), 4 * C) and t.streams().shape == (3, len(IDS), C)
    for layer, block in enumerate(model.blocks):  # W_O as out = concat(y) W_O + b_O, and each head's part of out
        np.testing.assert_array_equal(t.w_o[layer], block.attn.c_proj.weight.detach().numpy().T)
        for head in range(H):
            np.testing.assert_allclose(t.shares()[layer, head], t.y[layer, head] @ t.w_o[layer][head * D : (head + 1) * D],
                                       atol=1e-5)


def test_an_attention_only_model_records_no_mlp():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32, mlp=False)).eval()
    t = trace_ids(model, IDS)
    assert t.hidden.shape == (2, len(IDS), 0) and not t.mlp.any()
    np.testing.assert_array_equal(t.block[0], t.resid[1])
    np.testing.assert_array_equal(t.mid, t.block)


def test_explain_npz_round_trips(tmp_path):
    trace = trace_ids(biased_model(), IDS)
    back = load_trace(save_trace(trace, tmp_path / "explain.npz"))
    with np.load(tmp_path / "explain.npz", allow_pickle=False) as f:
        assert sorted(f.files) == sorted(["ids", "tok", "pos", "resid", "x", "q", "k", "v", "scores", "att", "y", "out",
                                          "mid", "x2", "hidden", "mlp", "block", "final", "logits", "w_o", "off"])
        assert f["q"].shape == (2, H, len(IDS), D) and f["scores"].shape == (2, H, len(IDS), len(IDS))
        assert f["out"].shape == (2, len(IDS), C) and f["q"].dtype == np.float32
    for name in ("q", "scores", "att", "out", "hidden", "logits", "off"):
        assert np.array_equal(getattr(back, name), getattr(trace, name))
    assert back.ids.tolist() == IDS


def test_resolve_query_counts_negative_indices_from_the_end():
    assert resolve_query(-1, 9) == 8 and resolve_query(0, 9) == 0 and resolve_query(-9, 9) == 0
    for bad in (9, -10):
        with pytest.raises(UserError, match=r"--query .* outside the 9 tokens of the text; give 0..8 or -1..-9"):
            resolve_query(bad, 9)


def numbers(text):
    return [float(x) for x in re.findall(r"-?\d+\.\d+", text)]


def section(text, start, end):
    return text[text.index(start) : text.index(end, text.index(start))]


def score_rows(text):
    """The rows of the steps 3-6 table: after its header, up to the first line that is not a row."""
    lines = text.splitlines()
    n = next(n for n, line in enumerate(lines) if line.split()[:3] == ["j", "token", "q·k_j"]) + 1
    rows = []
    while lines[n].split() and (lines[n].split()[0].isdigit() or lines[n].split() == ["…"]):
        rows.append(lines[n])
        n += 1
    return rows


def test_walkthrough_prints_the_models_numbers_in_the_textbook_order():
    model = biased_model()
    t = trace_ids(model, IDS)
    labels = ["<|endoftext|>", "대한", "민국", "␣은", "<0xEC>", "민국", "↵", "a", "b"]
    layer, head, i = 1, 0, 5
    w_o = model.blocks[layer].attn.c_proj.weight.detach().T.numpy()
    text = explain_head(model, IDS, layer, head, i, labels)
    marks = ["1. The query", "2. Into head", "3. The dot products q·k_j", "4. Divided by √d_k they are the scores", "5. Masked", "6. Softmax", "7. y =",
             "8. Where y goes"]
    steps = [text.index(m) for m in marks]
    assert steps == sorted(steps)  # the textbook's order
    assert text.startswith("Layer 1, head 0, query token 5 '민국' of 9 tokens (n_embd 32, 2 heads of d_k = 16")
    assert "√16 = 4.0000" in text and "d_k = 16" in text
    x_rows = section(text, "|x_j|", "\n2. ").strip().splitlines()[1:]
    assert [r.split()[0] for r in x_rows] == [str(j) for j in range(i + 1)]  # the keys 0..5
    for j, row in enumerate(x_rows):
        assert "…]" in row  # shortened, with the marker
        values = numbers(row)
        np.testing.assert_allclose(values[:4], t.x[layer, j, :4], atol=1e-4)
        assert values[4] == pytest.approx(np.linalg.norm(t.x[layer, j]), abs=1e-4)
    q_line = next(line for line in text.splitlines() if line.strip().startswith("q = ["))
    np.testing.assert_allclose(numbers(q_line)[:4], t.q[layer, head, i, :4], atol=1e-4)
    rows = score_rows(text)
    assert [int(r.split()[0]) for r in rows] == list(range(len(IDS)))
    for j, row in enumerate(rows):
        cells = row.split()
        assert cells[1] == labels[j]
        qk, scaled = float(cells[2]), float(cells[3])
        assert qk == pytest.approx(t.scores[layer, head, i, j] * 4, abs=1e-4)
        assert scaled == pytest.approx(t.scores[layer, head, i, j], abs=1e-4)
        assert cells[4] == ("-∞" if j > i else cells[3])
        assert float(cells[5]) == pytest.approx(t.att[layer, head, i, j], abs=1e-4)
    assert "Σ w_j = 1.000000" in text
    y_line = next(line for line in text.splitlines() if line.startswith("7. y = Σ_j w_j v_j"))
    np.testing.assert_allclose(numbers(y_line)[:4], t.y[layer, head, i, :4], atol=1e-4)
    top = section(text, "(by norm w_j |v_j|)", "\n8. ").strip().splitlines()[2:5]  # the rows, not the why below
    w, v = t.att[layer, head, i], t.v[layer, head]
    expected = sorted(range(i + 1), key=lambda j: -w[j] * np.linalg.norm(v[j]))[:3]
    assert [int(r.split()[0]) for r in top] == expected
    out_line = next(line for line in text.splitlines() if line.strip().startswith("out_5 = ["))
    np.testing.assert_allclose(numbers(out_line)[:4], t.out[layer, i, :4], atol=1e-4)
    share = t.y[layer, head, i] @ w_o[:D]  # this head's rows of W_O
    share_line = next(line for line in text.splitlines() if "this head's share" in line)
    np.testing.assert_allclose(numbers(share_line)[:4], share[:4], atol=1e-4)


def test_walkthrough_of_a_long_text_lists_a_selection_and_says_so():
    model = biased_model(block_size=64)
    ids = list(range(1, 41))
    t = trace_ids(model, ids)
    text = explain_head(model, ids, 0, 1, 30)
    assert re.search(r"\n   \d+ of the 31 keys are listed: the first, the most attended, the last few", text)
    rows = score_rows(text)
    listed = [int(r.split()[0]) for r in rows if r.split()[0] != "…"]
    strongest = np.argsort(-t.att[0, 1, 30, :31], kind="stable")[:8]
    assert {0, *strongest.tolist(), 27, 28, 29, 30, 31, 32, 33} <= set(listed) and 34 not in listed
    assert "…" in [r.split()[0] for r in rows]
    assert "and 6 more later keys, all masked" in text


def test_the_walkthrough_says_why_in_this_head_s_own_numbers():
    model = biased_model()
    t = trace_ids(model, IDS)
    layer, head, i = 1, 0, 5
    w_o = model.blocks[layer].attn.c_proj.weight.detach().T.numpy()
    text = explain_head(model, IDS, layer, head, i)
    scaled = t.scores[layer, head, i, : i + 1].astype(np.float64)
    raw = scaled * math.sqrt(D)  # q·k_j before the division
    undivided = np.exp(raw - raw.max()) / np.exp(raw - raw.max()).sum()
    assert f"the standard deviation of q·k_j is {raw.std():.4f}, of the scores {scaled.std():.4f}" in text
    assert f"{t.att[layer, head, i].max():.4f} with the division, {undivided.max():.4f} without it" in text
    terms = t.att[layer, head, i, : i + 1] * np.linalg.norm(t.v[layer, head, : i + 1], axis=-1)
    assert f"is {100 * terms.max() / terms.sum():.1f}% of Σ_j w_j |v_j|" in text
    shares = [np.linalg.norm(t.y[layer, h, i] @ w_o[h * D : (h + 1) * D]) for h in range(H)]
    assert f"at this token: 0: {shares[0]:.4f}, 1: {shares[1]:.4f}." in text
    assert "q is what token 5 looks for" in text and text.rstrip().endswith("and compare.")


# ---- the walkthrough drawn on the page ----------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
PAGE_IDS = [0, 5, 17, 3, 42, 17, 9, 63, 1, 2, 30, 11]


def values(page, selector):
    """The data-v numbers of the cells `selector` picks, in order ("-Infinity" for a masked key)."""
    return [float(v) for v in page.evaluate(f"Array.from(document.querySelectorAll({selector!r}), (e) => e.dataset.v)")]


def test_the_record_holds_the_most_attended_key_and_q_times_k_of_it():
    model = biased_model()
    records = compute(toy_run(model), PAGE_IDS, ["walkthrough"], Settings(layers=(0, 1)))["walkthrough"]
    t = trace_ids(model, PAGE_IDS)
    best = t.att.argmax(-1)  # (L, H, T)
    np.testing.assert_array_equal(records["best"], best)
    L, H, T = best.shape
    for layer, head, i in [(0, 0, 0), (1, 1, 11), (1, 0, 6)]:
        j = best[layer, head, i]
        np.testing.assert_allclose(records["qk"][layer, head, i], t.q[layer, head, i] * t.k[layer, head, j], atol=1e-6)
        assert records["qk"][layer, head, i].sum() == pytest.approx(t.scores[layer, head, i, j] * math.sqrt(t.d_head),
                                                                     abs=1e-4)  # their sum is the score before ÷√d_k


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("layer, head, i", [(1, 0, 9), (0, 1, 3)])
def test_the_cells_draw_the_trace_s_q_k_v_their_products_the_scores_and_y(tmp_path, browser, layer, head, i):
    model = biased_model()
    path = tmp_path / "attention.html"
    path.write_text(page_html(compute(toy_run(model), PAGE_IDS, ["maps", "walkthrough"])), encoding="utf-8")
    page = browser(path, f"#layer={layer}&head={head}&focus={i}&explain=1")
    t = trace_ids(model, PAGE_IDS)
    d, T = t.d_head, len(PAGE_IDS)
    att = t.att[layer, head, i]
    j = int(np.argmax(att))
    q, k, v = t.q[layer, head, i], t.k[layer, head, j], t.v[layer, head, j]
    for row, expected in [("q", q), ("k", k), ("v", v), ("qk", q.astype(np.float64) * k)]:
        shown = values(page, f"#explain tr.ex-{row} td.cell")
        assert len(shown) == d  # every dimension
        np.testing.assert_allclose(shown, expected, atol=1e-4)
    x_rows = np.concatenate([t.x[layer, i, :4], t.x[layer, j, :4]])  # the record keeps x's first 4 values
    np.testing.assert_allclose(values(page, "#explain tr.ex-x td.cell"), x_rows, atol=1e-4)
    # steps 3 to 6 as columns over keys 0..i and up to 3 masked ones
    keys = list(range(min(T, i + 4)))
    scores = t.scores[layer, head, i, keys]
    np.testing.assert_allclose(values(page, "#ex-keys td.s"), scores * math.sqrt(d), atol=1e-4)
    np.testing.assert_allclose(values(page, "#ex-keys td.ss"), scores, atol=1e-4)
    masked = values(page, "#ex-keys td.m")
    np.testing.assert_allclose(masked[: i + 1], scores[: i + 1], atol=1e-4)
    assert masked[i + 1 :] == [-math.inf] * (len(keys) - i - 1)
    np.testing.assert_allclose(values(page, "#ex-keys td.w"), att[keys], atol=1e-4)
    # y: the rows v_j of the keys 0..i, each with its weight, then y
    rows = page.evaluate("Array.from(document.querySelectorAll('#explain .ex-stack tr.ex-wv'), "
                         "(r) => Number(r.dataset.j))")
    assert rows == list(range(i + 1))
    np.testing.assert_allclose(values(page, "#explain .ex-stack tr.ex-wv td.barcell"), att[: i + 1], atol=1e-4)
    np.testing.assert_allclose(np.reshape(values(page, "#explain .ex-stack tr.ex-wv td.cell"), (i + 1, d)),
                               t.v[layer, head, : i + 1], atol=1e-4)
    y = values(page, "#explain .ex-stack tr.ex-ysum td.cell")
    np.testing.assert_allclose(y, t.y[layer, head, i], atol=1e-4)
    np.testing.assert_allclose(y, att[: i + 1] @ t.v[layer, head, : i + 1].astype(np.float64), atol=1e-4)
    title = page.evaluate("document.querySelector('#explain tr.ex-q td.cell').title")
    assert title == f"q[0] = {q[0]:.4f}"  # the number on hover
    assert page.evaluate("document.getElementById('kv-section').hidden") is True  # no decoding on this page
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_kv_cache_grows_a_row_per_step_and_only_the_new_row_is_computed(tmp_path, browser, lang):
    model = biased_model(block_size=24)
    run = toy_run(model)
    prompt, new = [0, 5, 17, 3, 42], 6
    recorded = []
    steps = stream_with_logits(model, torch.tensor([prompt]), new, Sampling(temperature=0), attention=recorded)
    ids = prompt + [int(column[0]) for column, _ in steps]
    records = compute(run, ids, ["maps", "walkthrough"], recorded=recorded)
    path = tmp_path / "attention.html"
    path.write_text(page_html(records, lang), encoding="utf-8")
    page = browser(path, "#layer=1&head=1")
    t = trace_ids(model, ids)
    d, labels = t.d_head, records["maps"]["tokens"]
    assert page.evaluate("document.getElementById('kv-section').hidden") is False
    for step in (0, 1, 3, new):
        page.evaluate(f"setStep({step})")
        n = len(prompt) + step
        rows = page.evaluate("Array.from(document.querySelectorAll('#kv tr.kv-row'), (r) => [Number(r.dataset.j), "
                             "r.classList.contains('new')])")
        assert [j for j, _ in rows] == list(range(n))  # a row per token so far
        fresh = [j for j, is_new in rows if is_new]
        assert fresh == (list(range(n)) if step == 0 else [n - 1])  # the prefill's rows, then one row a step
        cells = np.reshape(values(page, "#kv tr.kv-row td.cell"), -1)
        k_and_v = np.concatenate([t.k[1, 1, :n], t.v[1, 1, :n]], axis=-1)  # (n, 2d): each row's K, then its V
        q = t.q[1, 1, n - 1]
        np.testing.assert_allclose(cells, np.concatenate([k_and_v.reshape(-1), q]), atol=1e-4)  # q beside the new row
        assert len(cells) == n * 2 * d + d
        caption = page.evaluate("document.querySelector('#kv .kv-caption').textContent")
        say = messages(lang)  # the prefill's rows, else the token that went in
        assert caption == (say("page.kv_prefill", layer=1, head=1, last=n - 1, keys=n) if step == 0 else
                           say("page.kv_step", layer=1, head=1, step=step, last=n - 1, token=labels[n - 1], keys=n))
    page.evaluate("CACHE_ROWS = 4; setStep(2)")  # a long decoding: its last rows drawn, the earlier ones counted
    rows = page.evaluate("Array.from(document.querySelectorAll('#kv tr.kv-row'), (r) => Number(r.dataset.j))")
    assert rows == [3, 4, 5, 6] and page.texts("#kv tr.kv-more") == [messages(lang)("page.kv_more", n=3)]
    assert page.problems() == ([], "")
