"""The path of a token through the whole forward pass (inspection/views/path.py): the model's own numbers.

    python -m pytest tests/test_path.py -q
"""

import copy
import json
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from inspection.html import page as page_html
from inspection.trace import trace_ids
from inspection.views import VIEWS, Settings, path as path_view
from inspection.views.path import Sampling, forward_path
from inspection.trace import resolve_query
from model.sampling import generate, sampling_probs
from model.speed import speed_up
from tests.conftest import CHROMIUM, biased_model, look_at


def format_path(path, query=-1, lang="en"):
    """The path view's text of token `query` (as --explain path --query prints it)."""
    return path_view.text({**path, "query": resolve_query(query, path["T"])}, lang)


def write_page(model, labels, path_file, sampling=Sampling()):
    """attention.html of IDS with the maps, the walkthrough and the path (drawn with `sampling`), its tokens `labels`."""
    look, settings = look_at(model, IDS, labels), Settings(sampling=sampling)
    records = {name: VIEWS[name].record(look, settings) for name in ("maps", "walkthrough", "path")}
    path_file.write_text(page_html(records), encoding="utf-8")
    return path_file

IDS = [0, 5, 17, 3, 42, 17, 9, 63, 1]


@pytest.fixture(scope="module")
def model():
    return biased_model(3)


def path_of(model, sampling=Sampling()):
    return forward_path(model, trace_ids(model, IDS), lambda i: f"t{i}", sampling)


def test_the_embedding_rows_are_tok_emb_s_and_pos_emb_s(model):
    path = path_of(model)
    wte, wpe = model.tok_emb.weight.detach().numpy(), model.pos_emb.weight.detach().numpy()
    np.testing.assert_allclose(path["tok_dims"], wte[IDS, :4], atol=1e-6)  # the record keeps 6 decimals
    np.testing.assert_allclose(path["tok_norm"], np.linalg.norm(wte[IDS], axis=-1), atol=1e-6)
    np.testing.assert_allclose(path["pos_dims"], wpe[: len(IDS), :4], atol=1e-6)
    np.testing.assert_allclose(path["sum_dims"], wte[IDS, :4] + wpe[: len(IDS), :4], atol=1e-6)


def test_each_block_hands_the_next_its_input_and_the_logits_are_the_model_s(model):
    path = path_of(model)
    b = path["blocks"]
    assert b["block_norm"][0] == b["resid_norm"][1]  # block 0's output is block 1's input, as recorded
    np.testing.assert_allclose(b["resid_norm"][0], path["sum_norm"], atol=1e-6)
    with torch.no_grad():
        logits = model(torch.tensor([IDS]), all_logits=True)[0][0].double()  # (T, V)
    softmax = path["sampling"]["stages"][0]
    assert softmax["name"] == "softmax"
    top = torch.tensor(softmax["top"])  # (T, 10)
    np.testing.assert_allclose(softmax["logit"], logits.gather(1, top).numpy(), atol=1e-6)
    np.testing.assert_allclose(softmax["p"], logits.softmax(-1).gather(1, top).numpy(), atol=1e-6)
    assert top[:, 0].tolist() == logits.argmax(-1).tolist()
    np.testing.assert_allclose(path["logit_max"], logits.max(-1).values.numpy(), atol=1e-6)


def test_each_head_s_strongest_key_and_its_share_of_out(model):
    trace = trace_ids(model, IDS)
    path = forward_path(model, trace, str)
    layer, head, i = 1, 1, 6
    j = path["blocks"]["key"][layer][head][i]
    assert j <= i and trace.att[layer, head, i, j] == trace.att[layer, head, i].max()
    d = trace.d_head
    w_o = model.blocks[layer].attn.c_proj.weight.detach().numpy().T[head * d : (head + 1) * d]  # (d, C)
    share = np.linalg.norm(trace.y[layer, head, i] @ w_o)
    assert path["blocks"]["share"][layer][head][i] == pytest.approx(share, abs=1e-6)
    # the shares of all heads, plus b_O, make out
    w_all = model.blocks[layer].attn.c_proj.weight.detach().numpy().T
    out = sum(trace.y[layer, h, i] @ w_all[h * d : (h + 1) * d] for h in range(2)) + model.blocks[layer].attn.c_proj.bias.detach().numpy()
    np.testing.assert_allclose(out, trace.out[layer, i], atol=1e-5)


@pytest.mark.parametrize("sampling", [Sampling(0.7, 5, 0.9, seed=1), Sampling(1.3, None, 0.5), Sampling(0.5, 3, None)])
def test_every_sampling_stage_is_model_sampling_s_distribution(model, sampling):
    path = path_of(model, sampling)
    with torch.no_grad():
        logits = model(torch.tensor([IDS]), all_logits=True)[0][0].double()
    settings = {}
    stages = path["sampling"]["stages"][1:]
    assert [s["name"] for s in stages] == [n for n in ("temperature", "top_k", "top_p") if getattr(sampling, n) is not None]
    for stage in stages:
        settings[stage["name"]] = stage["value"]
        probs = sampling_probs(logits, **settings)
        np.testing.assert_allclose(stage["p"], probs.gather(1, torch.tensor(stage["top"])).numpy(), atol=1e-6)
        assert stage["kept"] == (probs > 0).sum(-1).tolist()
    final = sampling_probs(logits, sampling.temperature, sampling.top_k, sampling.top_p)
    chosen = torch.tensor(path["sampling"]["chosen"])
    assert (final.gather(1, chosen[:, None]) > 0).all()  # never a token the settings removed
    np.testing.assert_allclose(path["sampling"]["chosen_p"], final.gather(1, chosen[:, None])[:, 0].numpy(), atol=1e-6)
    if sampling.top_k is not None:
        assert max(stages[-1]["kept"]) <= sampling.top_k


def test_greedy_chooses_the_top_logit(model):
    greedy = path_of(model, Sampling(0.0))
    assert greedy["sampling"]["chosen"] == [row[0] for row in greedy["sampling"]["stages"][0]["top"]]


SETTINGS = {"greedy": Sampling(0.0), "temperature": Sampling(1.3), "top-k": Sampling(0.9, top_k=5),
            "top-p": Sampling(1.0, top_p=0.6), "repetition penalty": Sampling(0.8, repetition_penalty=3.0)}


@pytest.mark.parametrize("speed", [False, True])
@pytest.mark.parametrize("name", SETTINGS)
def test_the_path_draws_the_token_a_decoding_writes(model, name, speed):
    """20 seeds, each setting: the path's token at the last position is the first token model.sampling.generate
    writes after the text (and, for 5 seeds, at every position, after the text up to there), with the textbook
    network and with the speed layer (whose cached decoding computes the logits another way)."""
    model = speed_up(copy.deepcopy(model)) if speed else model
    ids, draws = torch.tensor([IDS]), set()
    for seed in range(20):
        sampling = replace(SETTINGS[name], seed=seed, eos_token_id=0)  # 0: the end of text, never penalised
        chosen = path_of(model, sampling)["sampling"]["chosen"]
        for i in range(len(IDS)) if seed < 5 else [len(IDS) - 1]:
            assert chosen[i] == generate(model, ids[:, : i + 1], 1, sampling)[0, -1].item(), (seed, i)
        draws.add(chosen[-1])
    assert len(draws) == 1 if name == "greedy" else len(draws) > 3  # the seeds do draw different tokens


def test_the_repetition_penalty_is_a_stage_on_the_tokens_seen_so_far(model):
    """Its stage holds softmax of the penalised logits: at token i, the tokens of IDS[:i+1] but the end of text."""
    path = path_of(model, Sampling(1.0, repetition_penalty=2.0, eos_token_id=0))
    stage = path["sampling"]["stages"][1]
    assert stage["name"] == "repetition_penalty" and stage["value"] == 2.0
    with torch.no_grad():
        logits = model(torch.tensor([IDS]), all_logits=True)[0][0].double()  # (T, V)
    for i in (0, 4, 8):
        seen = set(IDS[: i + 1]) - {0}
        by_hand = torch.tensor([(x / 2 if x > 0 else x * 2) if j in seen else x for j, x in enumerate(logits[i].tolist())])
        np.testing.assert_allclose(stage["p"][i], by_hand.softmax(-1)[stage["top"][i]].numpy(), atol=1e-6)


def test_the_text_says_each_step_in_both_languages_with_the_same_numbers(model):
    path = path_of(model, Sampling(0.8, 4, 0.9, seed=2))
    en, ko = format_path(path, 5, "en"), format_path(path, 5, "ko")
    numbers = lambda text: sorted(re.findall(r"-?\d+(?:[.,]\d+)*", text))  # noqa: E731
    assert numbers(en) == numbers(ko) and en != ko
    for word in ("tok_emb[17]", "pos_emb[5]", "block 1", "temperature 0.8", "top-k 4", "top-p 0.9", "--ablate"):
        assert word in en and word in ko, word
    assert "t17" in en.splitlines()[0]
    with pytest.raises(Exception, match="--query 9"):
        format_path(path, 9)


def test_an_attention_only_model_s_path_names_no_mlp():
    """model.mlp = false (the lesson run): the blocks' text and lines say attention only, with no MLP step."""
    from model import GPT, GPTConfig
    from tests.conftest import TINY_MODEL

    torch.manual_seed(0)
    plain = GPT(GPTConfig(**TINY_MODEL, mlp=False)).eval()
    for lang in ("en", "ko"):
        text = format_path(path_of(plain), 5, lang)
        assert "model.mlp = false" in text and not any(w in text for w in ("ln_2", "GELU", "+ MLP", "MLP 더함")), text
        assert "GELU" in format_path(path_of(biased_model(3)), 5, lang)


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def floats(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+", text)]


@pytest.mark.slow
@needs_chromium
def test_the_page_draws_the_path_a_head_s_lines_and_bars_that_follow_the_settings(model, tmp_path, browser):
    trace = trace_ids(model, IDS)
    labels = [f"토큰{i}" for i in IDS]
    path = forward_path(model, trace, lambda i: f"t{i}", Sampling(0.8, 5, None, seed=1))
    page = browser(write_page(model, labels, tmp_path / "attention.html", Sampling(0.8, 5, None, seed=1)),
                   "#layer=1&head=1&focus=6")
    with torch.no_grad():
        logits = model(torch.tensor([IDS]), all_logits=True)[0][0].double()  # (T, V)
    # the path of token 6: the embedding rows, each head's strongest key, the logits: the model's numbers
    np.testing.assert_allclose(floats(page.texts("#path .path-tok")[0])[:4], model.tok_emb.weight[IDS[6], :4].detach(), atol=1e-4)
    heads = page.texts("table.path-heads td:nth-child(4)")  # att, layer by layer, head by head
    np.testing.assert_allclose([floats(c)[0] for c in heads], trace.att[:, :, 6].max(-1).reshape(-1), atol=1e-4)
    top = torch.tensor(path["sampling"]["stages"][0]["top"][6])
    np.testing.assert_allclose([float(c) for c in page.texts("table.path-softmax td:nth-child(4)")],
                               logits[6, top].numpy(), atol=1e-4)
    # the lines of head 1.1: every query's, one per key it gives at least 0.01, token 6's drawn as thick as its attention
    drawn = page.evaluate("Array.from(document.querySelectorAll('#lines line'), l => [Number(l.dataset.q), "
                          "Number(l.dataset.k), Number(l.dataset.att), Number(l.getAttribute('stroke-width'))])")
    q, k = np.tril_indices(len(IDS))
    kept = trace.att[1, 1, q, k] >= 0.01
    assert [(a, b) for a, b, _, _ in drawn] == list(zip(q[kept].tolist(), k[kept].tolist()))
    np.testing.assert_allclose([w for _, _, w, _ in drawn], trace.att[1, 1, q[kept], k[kept]], atol=1e-4)
    att = [w for a, _, w, _ in drawn if a == 6]
    widths = [width for a, _, _, width in drawn if a == 6]
    np.testing.assert_allclose(widths, 0.6 + 6 * np.asarray(att), atol=0.006)  # thickness grows with the attention
    assert {width for a, _, _, width in drawn if a != 6} == {1}  # the other queries' lines faint
    # the bars of the next token move with temperature, top-k and top-p, as model.sampling computes them
    for temperature, top_k, top_p in [(0.8, 5, None), (0.3, None, None), (2.0, 3, None), (1.0, None, 0.6)]:
        page.evaluate(f"""for (const [id, v] of [["temperature", "{temperature}"], ["top-k", "{top_k or ''}"],
            ["top-p", "{top_p or ''}"]]) {{ const e = document.getElementById(id); e.value = v;
            e.dispatchEvent(new Event("input")); }}""")
        shown = [floats(c)[0] for c in page.texts("#bars td.barcell")]
        expected = sampling_probs(logits[-1:], temperature, top_k, top_p)[0]
        np.testing.assert_allclose(shown, expected.sort(descending=True).values[: len(shown)].numpy(), atol=1e-4)
        assert len(shown) == min(10, int((expected > 0).sum()))
    # the same numbers in Korean, with the why-texts in Korean
    en = page.evaluate("document.getElementById('path').textContent")
    page.evaluate("""const s = document.getElementById("lang"); s.value = "ko"; s.dispatchEvent(new Event("change"));""")
    ko = page.evaluate("document.getElementById('path').textContent")
    assert floats(en) == floats(ko) and "residual stream을" in ko and "이전" not in en
    # the lines and the bars in Korean, with the same numbers
    assert "모든 query(왼쪽)에서" in page.texts("#lines figcaption")[0]
    np.testing.assert_allclose(page.evaluate("Array.from(document.querySelectorAll('#lines line[data-q=\"6\"]'), "
                                             "l => Number(l.dataset.att))"), att, atol=0)
    assert "개가 0보다 큰 확률을 가집니다" in page.texts("#bars p")[0]
    page.evaluate("""const e = document.getElementById("temperature"); e.value = "0.5"; e.dispatchEvent(new Event("input"));""")
    expected = sampling_probs(logits[-1:], 0.5, None, 0.6)[0]  # top-p 0.6 is still set from the last round
    np.testing.assert_allclose([floats(c)[0] for c in page.texts("#bars td.barcell")],
                               expected.sort(descending=True).values[: int((expected > 0).sum())].numpy()[:10], atol=1e-4)
    assert page.problems() == ([], "")


@pytest.mark.slow
@needs_chromium
def test_the_page_s_one_sampling_rule_is_python_s_on_random_logits_with_ties(model, tmp_path, browser):
    """The offline page's bars run path.js's samplingProbs, the page's one copy of model/sampling.py's rule: on 400
    random rows (logits in steps of 0.5, so many tie; top-k and top-p cut through the ties) it keeps the same tokens
    with the same probabilities as sampling_probs (float64: the page computes in doubles from float32 logits)."""
    page = browser(write_page(model, None, tmp_path / "attention.html"))
    rng = np.random.default_rng(0)
    cases = []
    for _ in range(400):
        V = int(rng.integers(2, 40))
        logits = (rng.integers(-8, 9, V) * 0.5).tolist()  # float32 exactly
        temperature = float(rng.choice([0.0, 0.3, 0.8, 1.0, 2.5]))
        top_k = None if rng.random() < 0.3 else int(rng.integers(1, V + 3))
        top_p = None if rng.random() < 0.3 else float(rng.choice([0.05, 0.25, 0.5, 0.75, 0.9, 1.0]))
        cases.append([logits, temperature, top_k, top_p])
    shown = page.evaluate(f"{json.dumps(cases)}.map(([l, t, k, p]) => Array.from(samplingProbs(Float32Array.from(l), t, k, p)))")
    for (logits, temperature, top_k, top_p), got in zip(cases, shown):
        want = sampling_probs(torch.tensor([logits], dtype=torch.float64), temperature, top_k, top_p)[0].numpy()
        assert ((np.asarray(got) > 0) == (want > 0)).all(), (logits, temperature, top_k, top_p)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert page.problems() == ([], "")


def test_a_record_from_a_later_token_is_the_whole_record_s_tail(model):
    trace = trace_ids(model, IDS)
    whole, tail = (forward_path(model, trace, str, Sampling(0.9, 6, seed=3), first) for first in (0, 7))
    assert tail["first"] == 7 and len(tail["tok_norm"]) == 2 and len(tail["blocks"]["att"][1][0]) == 2
    assert tail["blocks"]["att"][1][0] == whole["blocks"]["att"][1][0][7:]
    assert tail["sampling"]["stages"][-1]["p"] == whole["sampling"]["stages"][-1]["p"][7:]
    assert format_path(tail, 8) == format_path(whole, 8)  # the text of a token the tail holds is the same
    with pytest.raises(ValueError, match="tokens 7..8, not token 3"):
        format_path(tail, 3)
    look = look_at(model, IDS)
    last = path_view.record(look, Settings(sampling=Sampling(0.9, 6, seed=3), last_only=True))
    assert last["first"] == 8 and last["query"] == 8  # a live keystroke: the last token alone
    assert last["blocks"]["att"] == [[row[-1:] for row in layer] for layer in tail["blocks"]["att"]]
