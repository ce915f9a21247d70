"""Why this token (inspection/views/why.py): the shares add up to the logit difference, each is what removing
its part from the stream changes, by hand; the tokens a head pushes; naming tokens.

python -m pytest tests/test_why.py -q
"""

import numpy as np
import pytest
import torch

from inspection.html import page as page_html
from inspection.trace import trace_ids
from inspection.views import Settings, compute, why
from inspection.views.why import attribute, shares_per_token, token_id
from cli.errors import UserError
from tests.conftest import CHROMIUM, biased_model, look_at, toy_run

IDS = [0, 5, 17, 3, 42, 17, 9, 63, 1]


@pytest.fixture(scope="module")
def model():
    return biased_model(4)  # biases and LayerNorm gains random: every part counts


@pytest.mark.parametrize("query", [2, -1])
def test_the_shares_add_up_to_the_logit_difference(model, query):
    record = attribute(model, trace_ids(model, IDS), query)
    total = sum(p["share"] for p in record["parts"])
    assert total == pytest.approx(record["logit_diff"], abs=1e-4)
    assert record["logit_diff"] > 0 and record["token"] != record["versus"]  # the choice against its runner-up
    names = {p["name"] for p in record["parts"]}
    assert {"tok_emb", "pos_emb", "head 0.0", "head 1.1", "attention bias 0", "MLP 1", "ln_f bias"} <= names
    assert len(names) == 2 + 2 * 2 + 2 + 2 + 1
    shares = [abs(p["share"]) for p in record["parts"]]
    assert shares == sorted(shares, reverse=True)


@torch.no_grad()
def test_each_share_is_what_removing_its_part_from_the_final_stream_changes_by_hand(model):
    """Head 1.0 at token 6, computed from the model's weights with σ held: ln_f(stream) − ln_f(stream − part), its
    logits through the tied head, token minus versus."""
    trace = trace_ids(model, IDS)
    record = attribute(model, trace, 6, token=11, versus=40)
    stream = torch.tensor(trace.block[-1, 6], dtype=torch.float64)
    ln_f = model.ln_f
    sigma = torch.sqrt(stream.var(unbiased=False) + ln_f.eps)

    def read(x):  # ln_f with this stream's σ, then logit(11) − logit(40)
        y = (x - x.mean()) / sigma * ln_f.weight.double() + ln_f.bias.double()
        return float(y @ (model.tok_emb.weight[11] - model.tok_emb.weight[40]).double())

    y_head = torch.tensor(trace.y[1, 0, 6], dtype=torch.float64)  # (d,)
    w_o = model.blocks[1].attn.c_proj.weight.double()  # (C, C): out = y W_O^T
    part = w_o[:, :16] @ y_head  # head 0's columns
    share = next(p["share"] for p in record["parts"] if p["name"] == "head 1.0")
    assert share == pytest.approx(read(stream) - read(stream - part), abs=1e-6)
    mlp = torch.tensor(trace.mlp[0, 6], dtype=torch.float64)
    assert next(p["share"] for p in record["parts"] if p["name"] == "MLP 0") == pytest.approx(
        read(stream) - read(stream - mlp), abs=1e-6)
    assert record["logit_diff"] == pytest.approx(read(stream), abs=1e-4)  # the model's own logits, at this σ


@torch.no_grad()
def test_a_head_pushes_the_tokens_its_output_alone_adds_most_to(model):
    trace = trace_ids(model, IDS)
    record = attribute(model, trace, -1)
    head = next(p for p in record["parts"] if p["name"] == "head 0.1")
    y = torch.tensor(trace.y[0, 1, -1], dtype=torch.float64)
    part = model.blocks[0].attn.c_proj.weight.double()[:, 16:] @ y
    sigma = np.sqrt(trace.block[-1, -1].astype(np.float64).var() + model.ln_f.eps)
    logits = ((part - part.mean()) / sigma * model.ln_f.weight.double()) @ model.tok_emb.weight.double().T
    assert head["up"] == logits.argsort(descending=True, stable=True)[:5].tolist()
    assert head["down"] == logits.argsort(stable=True)[:5].tolist()


def test_every_token_s_shares_for_the_page_are_the_single_token_records(model):
    trace = trace_ids(model, IDS)
    page = shares_per_token(model, trace)
    for i in (1, 5, 8):
        record = attribute(model, trace, i)
        by_name = {p["name"]: p["share"] for p in record["parts"]}
        assert (page["token"][i], page["versus"][i]) == (record["token"], record["versus"])
        assert page["sigma"][i] == pytest.approx(record["sigma"], rel=1e-12)  # the σ the page says is held
        np.testing.assert_allclose([page["shares"][k][i] for k in range(len(page["names"]))],
                                   [by_name[n] for n in page["names"]], atol=1e-6)


def test_tokens_are_named_as_the_tables_show_them_and_bad_ones_refused(model):
    labels = {"␣법률": 7, "가": 3}
    assert token_id("␣법률", labels, 64) == 7 and token_id("#12", labels, 64) == 12
    with pytest.raises(UserError, match="is not one token of this model's vocabulary"):
        token_id("법률", labels, 64)
    with pytest.raises(UserError, match="is not a token id of this model"):
        token_id("#64", labels, 64)
    trace = trace_ids(model, IDS)
    with pytest.raises(UserError, match="the same"):
        attribute(model, trace, -1, token=3, versus=3)
    with pytest.raises(UserError, match="--query 9"):
        attribute(model, trace, 9)


def test_the_table_says_the_same_numbers_in_both_languages(model):
    record = why.record(look_at(model, IDS), Settings())
    en, ko = (why.text(record, lang) for lang in ("en", "ko"))
    assert en != ko and "몫" in ko
    import re
    numbers = lambda text: sorted(re.findall(r"-?\d+\.\d+", text))  # noqa: E731
    assert numbers(en) == numbers(ko)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_page_draws_the_shares_of_the_focused_token_from_the_python_record(model, tmp_path, browser):
    trace = trace_ids(model, IDS)
    (tmp_path / "attention.html").write_text(page_html(compute(toy_run(model), IDS, ["maps", "why"])), encoding="utf-8")
    page = browser(tmp_path / "attention.html", "#layer=1&head=0&focus=5")
    record = attribute(model, trace, 5)
    names = page.texts("table.why-parts td:nth-child(1)")
    shares = [float(x) for x in page.texts("table.why-parts td:nth-child(2)")]
    assert names == [p["name"] for p in record["parts"][:12]]  # Python's ranking
    np.testing.assert_allclose(shares, [p["share"] for p in record["parts"][:12]], atol=1e-4)
    assert f"“t{record['token']}” against “t{record['versus']}”" in page.texts("#why p")[0]
    assert f"σ held at its computed {record['sigma']:.4f}" in page.texts("#why p")[0]  # the σ why.exact speaks of
    from cli.messages import messages

    assert messages("en")("why.exact") in page.texts("#why p.hint")  # beside the shares: direct, not switching off
    page.click(*page.centre("#tokens .tok", len(IDS) - 1))  # the last token: what each head pushes, too
    heads = page.texts("table.why-heads td:nth-child(2)")
    last = attribute(model, trace, -1)
    assert heads == [" ".join(f"t{t}" for t in p["up"]) for p in last["parts"] if p["kind"] == "head"]
    assert page.problems() == ([], "")
