"""The views (inspection/views/__init__.py): `compute` makes every record asked for from one recording forward, with
heads switched off in one place, the same numbers as each view's record alone; and the score view
(inspection/views/score.py) of a whole text, with heads off beside the full model's.

    python -m pytest tests/test_views.py -q
"""

import numpy as np
import pytest
import torch

from common.heads_off import HeadsOff
from inference.scoring import score_text
from inspection import trace as trace_module
from inspection.views import OF_TEXT, VIEWS, Settings, compute
from cli.errors import ModelInputError
from tests.conftest import biased_model, look_at, toy_run

IDS = [0, 5, 17, 3, 42, 17, 9, 63, 1]


def test_one_forward_makes_every_record_and_each_is_the_view_s_own(monkeypatch):
    run = toy_run(biased_model(1))
    forwards = []
    record = trace_module.trace_ids
    monkeypatch.setattr("inspection.views.trace_ids", lambda *a: forwards.append(1) or record(*a))
    names = [name for name in OF_TEXT if name != "patch"]
    settings = Settings(explain=(1, 0), head=(0, 1), query=4)
    records = compute(run, IDS, names, settings)
    assert forwards == [1] and list(records) == names  # one recording forward, the records in the order asked
    look = look_at(run.model, IDS, query=4)
    for name in names:  # each equal to the view's record of a Look made by hand
        alone = VIEWS[name].record(look, settings)
        text = VIEWS[name].text(records[name], "en")
        assert text == VIEWS[name].text(alone, "en"), name
        assert "Traceback" not in text and (text or name == "words")


def test_heads_switched_off_by_compute_are_the_hook_s_and_back_on_after():
    run = toy_run(biased_model(2))
    with torch.no_grad(), HeadsOff(run.model, [(1, 0)], "zero"):
        off = run.model(torch.tensor([IDS]))[0][0, -1]
    records = compute(run, IDS, ["lens", "maps"], Settings(mode="zero"), off="1.0")
    lens = records["lens"]
    np.testing.assert_allclose(lens["p"][-1][-1][0], off.softmax(-1).max().item(), atol=1e-6)
    assert records["maps"]["off"] == [["", ""], ["zero", ""]]
    assert not any(m._forward_pre_hooks for m in run.model.modules())  # on again
    for empty in (None, "", []):  # none off (nb.heads(...).with_role gives "" for a role no head has)
        assert compute(run, IDS, ["maps"], off=empty)["maps"]["off"] == [["", ""], ["", ""]]
    for bad in (0, "1.x", [(1, 0, 0)]):
        with pytest.raises(ModelInputError, match="^off"):
            compute(run, IDS, ["maps"], off=bad)


def test_a_text_is_cut_to_the_context_and_the_query_read_against_it():
    run = toy_run(biased_model(3, block_size=8))
    records = compute(run, list(range(1, 13)), ["maps"], Settings(query=-2))
    assert records["maps"]["ids"] == list(range(5, 13))  # the last block_size tokens
    with pytest.raises(Exception, match="--query 9 is outside the 8 tokens"):
        compute(run, list(range(1, 13)), ["lens"], Settings(query=9))
    with pytest.raises(ModelInputError, match="explain: head 5.0 is not in this model"):
        compute(run, IDS[:5], ["walkthrough"], Settings(explain="5.0"))


def test_the_score_view_is_score_text_s_and_says_the_cost_of_the_heads_off():
    run = toy_run(biased_model(4, block_size=8))
    text = " ".join(f"t{i}" for i in (list(range(1, 20)) * 2))  # longer than the context: scored whole
    full = score_text(run, text)
    records = compute(run, text, ["score"], Settings(mode="zero"), off="0.1")
    with HeadsOff(run.model, [(0, 1)], "zero"):
        off = score_text(run, text)
    got = records["score"]
    assert got["tokens"] == off.tokens == 37 and got["bits_per_char"] == pytest.approx(off.bits_per_char, abs=1e-9)
    assert got["full"]["bits_per_char"] == pytest.approx(full.bits_per_char, abs=1e-9) and got["off"] == ["0.1"]
    line = VIEWS["score"].text(got, "en").splitlines()[-1]
    assert line == (f"with heads 0.1 off: {off.bits_per_char - full.bits_per_char:+.4f} bits/char against the full "
                    f"model's {full.bits_per_char:.4f}")
    assert compute(run, text, ["score"])["score"]["full"] is None
