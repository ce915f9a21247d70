"""Patching between two texts (inspection/views/patch.py), on the hand-built copying model whose circuit is known:
the grid puts the recovery where the circuit reads, the cone holds, and each head is patched alone or together.

python -m pytest tests/test_patch.py -q
"""

import pytest

from inspection.views import Settings, compute
from inspection.views.patch import named_patch, patch, text
from cli.errors import UserError
from tests.conftest import CHROMIUM, copying_model, toy_run

# The copying model predicts, at the last 3, the token that followed 3 before: 5 on the clean text, 4 on the
# corrupted one (token 2 changed from 5 to 4).
CLEAN = [0, 3, 5, 2, 6, 1, 3]
CORRUPT = [0, 3, 4, 2, 6, 1, 3]


@pytest.fixture(scope="module")
def record():
    return patch(copying_model(), CLEAN, CORRUPT, heads=[(0, 0), (1, 0)])


def test_the_grid_recovers_where_the_circuit_reads_and_nowhere_before_the_change(record):
    assert (record["token"], record["versus"], record["changed"]) == (5, 4, [2])
    assert record["clean_diff"] > 1 and record["corrupt_diff"] < -1
    grid = record["grid"]  # stages: embeddings, after block 0, after block 1
    assert len(grid) == 3 and all(len(row) == len(CLEAN) for row in grid)
    assert grid[0][2] == pytest.approx(1, abs=1e-6)  # the changed token itself
    assert grid[1][2] > 0.9  # the induction head copies token 2's value from the stream after block 0
    assert abs(grid[1][3]) < 0.1  # token 3 holds 5 as its previous token, which the last 3 does not match
    assert all(row[t] == 0 for row in grid for t in (0, 1))  # the cone: nothing changed before token 2
    assert grid[2][-1] == pytest.approx(1, abs=1e-6) and all(x == 0 for x in grid[2][:-1])  # the prediction itself


def test_the_induction_head_carries_the_difference_and_the_previous_token_head_does_not(record):
    assert record["heads"]["1.0"] > 0.9
    assert abs(record["heads"]["0.0"]) < 0.1 and abs(record["heads"]["0.1"]) < 0.1
    assert record["together_heads"] == ["0.0", "1.0"] and record["together"] > 0.9


def test_texts_of_different_lengths_are_refused():
    with pytest.raises(UserError, match="the same number of tokens"):
        patch(copying_model(), CLEAN, CORRUPT[:-1])
    with pytest.raises(UserError, match="nothing is left to recover"):
        patch(copying_model(), CLEAN, CLEAN)


def test_the_text_says_the_same_numbers_in_both_languages(record):
    named = named_patch(record, lambda i: f"t{i}", CLEAN, CORRUPT)
    en, ko = (text(named, lang) for lang in ("en", "ko"))
    import re
    numbers = lambda text: sorted(re.findall(r"-?\d+\.\d+", text))  # noqa: E731
    assert numbers(en) == numbers(ko) and en != ko


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_page_draws_the_grid_of_the_python_record(record, tmp_path, browser):
    from inspection.html import page as page_html

    corrupted = " ".join(f"t{i}" for i in CORRUPT)
    records = compute(toy_run(copying_model()), CLEAN, ["maps", "patch"], Settings(corrupt=corrupted,
                                                                                   patch_heads=[(0, 0), (1, 0)]))
    assert records["patch"]["grid"] == record["grid"]  # the view's record is the function's
    (tmp_path / "attention.html").write_text(page_html(records), encoding="utf-8")
    page = browser(tmp_path / "attention.html", "#lang=ko")
    cells = [float(x) for x in page.texts(".patch-grid td")]
    assert cells == pytest.approx([x for row in record["grid"] for x in row], abs=0.006)  # shown to 2 decimals
    assert "1.0 " in page.texts("#patch p")[2] and "원뿔(cone) 모양인 이유" in page.texts("#patch p")[-1]
    assert page.problems() == ([], "")
