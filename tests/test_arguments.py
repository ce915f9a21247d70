"""The notebook API's arguments checked where they enter (cli/arguments.py): every public function of the README's
"In a notebook" section (inference's generate_text, score_text, load_run; inspection's compute and its Settings,
head_stats, draw_head, attribute, patch, ...; the notebook views nb.*) swept with bad arguments (None, a wrong type, a wrong shape, out of
range, a bad lang): each is one UserError that names the argument, raised at entry, never an IndexError, an
AttributeError or a KeyError from deep inside; and good calls still work.

    python -m pytest tests/test_arguments.py -q
"""

import numpy as np
import pytest
import torch

import train
from cli.messages import use_language
from inference import generate_text, load_run, score_file, score_text, stream_text
from types import SimpleNamespace

from inspection import (Settings, VIEWS, attribute, compute, draw_head, draw_layer, head_stats, labeller, measure_heads,
                        patch, word_maps, word_spans)
from inspection import notebook as nb
from inspection.labels import format_top_attended
from inspection.views.maps import format_stats_table
from inspection.views.roles import format_roles_table
from cli.arguments import ArgumentTypeError, ArgumentValueError, need_int, need_maps, need_token_ids
from cli.errors import UserError
from tests.conftest import TINY, random_maps

TEXT = "대한민국 국회는 법률을 제정한다"
DEEP = (IndexError, AttributeError, KeyError, ZeroDivisionError)  # what a check at entry never lets escape


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, data_cache):
    """A tiny run trained two steps, loaded, with the maps of TEXT and what the calls below take."""
    out = tmp_path_factory.mktemp("arguments") / "run"
    assert train.main(["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1",
                       "--train.sample_tokens=0", "--train.max_steps=2", "--train.eval_interval=2",
                       "--out", str(out)]) == 0  # fmt: skip
    run = load_run(out, device="cpu")
    found = compute(run, TEXT, ["maps"])["maps"]
    maps = SimpleNamespace(att=found["att"], labels=found["tokens"], trace=found["trace"])

    class Ctx:
        pass

    c = Ctx()
    c.run, c.maps, c.model, c.dir = run, maps, run.model, out
    c.stats, c.label = head_stats(maps.att), labeller(run.tokenizer)
    c.record = attribute(run.model, maps.trace)
    return c


ATT = random_maps(2, 2, 4)
# function, argument, the call with the bad value in that argument, the bad values
SWEEP = [
    ("generate_text", "run", lambda c, v: generate_text(v, "가", 2), [None, "runs/x", 3]),
    ("generate_text", "prompt", lambda c, v: generate_text(c.run, v, 2), [None, 123, ["a", "b"], [], 2.5, b"x"]),
    ("generate_text", "max_new_tokens", lambda c, v: generate_text(c.run, "가", v), ["5", None, 2.5, -1]),
    ("generate_text", "num_samples", lambda c, v: generate_text(c.run, "가", 2, v), ["2", None, 0, 10**6]),
    ("generate_text", "temperature", lambda c, v: generate_text(c.run, "가", 2, temperature=v),
     ["hot", None, -1, float("nan"), 10**400]),
    ("generate_text", "top_p", lambda c, v: generate_text(c.run, "가", 2, top_p=v), ["x", 0, 2]),
    ("generate_text", "top_k", lambda c, v: generate_text(c.run, "가", 2, top_k=v), ["x", 0, 2.5]),
    ("generate_text", "repetition_penalty", lambda c, v: generate_text(c.run, "가", 2, repetition_penalty=v),
     ["x", None, 0, 10**400]),
    ("generate_text", "seed", lambda c, v: generate_text(c.run, "가", 2, seed=v), ["1", -1, True, 2.0, 2**64]),
    ("stream_text", "sampling", lambda c, v: stream_text(c.run, "가", 2, sampling=v), ["greedy", 0.8]),
    ("score_text", "run", lambda c, v: score_text(v, "가나다"), [None, "runs/x"]),
    ("score_text", "text", lambda c, v: score_text(c.run, v), [None, 123, ["가"]]),
    ("score_text", "stride", lambda c, v: score_text(c.run, "가나다", stride=v), ["4", 2.5, 0]),
    ("score_file", "path", lambda c, v: score_file(c.run, v), [None, 123]),
    ("load_run", "path", lambda c, v: load_run(v), [123, ["runs"]]),
    ("use_language", "lang", lambda c, v: use_language(v), ["fr", 5, ["ko"]]),
    ("compute", "run", lambda c, v: compute(v, "가", ["maps"]), [None, "runs/x"]),
    ("compute", "text", lambda c, v: compute(c.run, v, ["maps"]), [None, 5, [1.5], [], [10**6], ""]),
    ("compute", "names", lambda c, v: compute(c.run, "가", v), [None, "nope", ["maps", "x"]]),
    ("compute", "settings", lambda c, v: compute(c.run, "가", ["maps"], v), [None, {"query": 1}]),
    ("compute", "off", lambda c, v: compute(c.run, "가", ["maps"], off=v), [5, "1.x", [(1, 0, 0)], ["1.0", 9]]),
    ("Settings", "query", lambda c, v: Settings(query=v), ["1", None, 2.5, True]),
    ("Settings", "explain", lambda c, v: Settings(explain=v), ["x", 5, (1,), ("1", "0")]),
    ("Settings", "head", lambda c, v: Settings(head=v), ["1", [1, 0, 0]]),
    ("Settings", "sampling", lambda c, v: Settings(sampling=v), [0.8, None]),
    ("Settings", "why", lambda c, v: Settings(why=v), ["ab", (5, None), ("a",)]),
    ("Settings", "corrupt", lambda c, v: Settings(corrupt=v), [5]),
    ("Settings", "patch_heads", lambda c, v: Settings(patch_heads=v), ["x", [(1, 0, 0)]]),
    ("Settings", "layers", lambda c, v: Settings(layers=v), [5, ["0"], [-1]]),
    ("Settings", "heads_text", lambda c, v: Settings(heads_text=v), [5]),
    ("Settings", "mode", lambda c, v: Settings(mode=v), ["half", None]),
    ("head_stats", "att", lambda c, v: head_stats(v),
     [None, "maps", np.ones((2, 3, 4)), np.ones((2, 2, 3, 4)), [[1.0]], np.ones((1, 1, 0, 0)),
      np.full((1, 1, 2, 2), np.inf)]),
    ("format_stats_table", "stats", lambda c, v: format_stats_table(v),
     [{}, None, [1], {"entropy": np.zeros((1, 1))}]),
    ("format_stats_table", "lang", lambda c, v: format_stats_table(c.stats, lang=v), ["fr", 5]),
    ("format_top_attended", "att", lambda c, v: format_top_attended(v, ["a", "b"]), [None, ATT]),
    ("format_top_attended", "labels", lambda c, v: format_top_attended(ATT[0, 0], v), [None, "abcd", ["a"]]),
    ("format_top_attended", "k", lambda c, v: format_top_attended(ATT[0, 0], list("abcd"), v), ["3", 0]),
    ("draw_head", "att", lambda c, v: draw_head(v, list("abcd"), 0, 0), [None, ATT[0]]),
    ("draw_head", "labels", lambda c, v: draw_head(ATT, v, 0, 0), [None, "abcd", ["a"], [1, 2, 3, 4]]),
    ("draw_head", "layer", lambda c, v: draw_head(ATT, list("abcd"), v, 0), [None, 9, "0"]),
    ("draw_head", "head", lambda c, v: draw_head(ATT, list("abcd"), 0, v), [None, 9, "0"]),
    ("draw_head", "lang", lambda c, v: draw_head(ATT, list("abcd"), 0, 0, lang=v), ["fr"]),
    ("draw_layer", "heads", lambda c, v: draw_layer(ATT, list("abcd"), 0, heads=v), [5, [9], ["0"]]),
    ("word_maps", "att", lambda c, v: word_maps(v, [[0], [1]]), [None, np.ones((3, 4))]),
    ("word_maps", "words", lambda c, v: word_maps(ATT, v), [None, [[]], [[99]], ["ab"], 5, [[0, 1], [1, 2]]]),
    ("word_spans", "labels", lambda c, v: word_spans(v), [None, 5, "abc", [1, 2]]),
    ("attribute", "model", lambda c, v: attribute(v, c.maps.trace), [None, "gpt"]),
    ("attribute", "trace", lambda c, v: attribute(c.model, v), [None, ATT]),
    ("attribute", "query", lambda c, v: attribute(c.model, c.maps.trace, v), ["1", None, 99]),
    ("attribute", "token", lambda c, v: attribute(c.model, c.maps.trace, token=v), ["가", 10**6]),
    ("attribute", "versus", lambda c, v: attribute(c.model, c.maps.trace, versus=v), ["가", 10**6]),
    ("patch", "model", lambda c, v: patch(v, [0, 1], [0, 2]), [None]),
    ("patch", "clean_ids", lambda c, v: patch(c.model, v, [0, 2]), [None, "가", [], [10**6, 1]]),
    ("patch", "corrupt_ids", lambda c, v: patch(c.model, [0, 1], v), [None, [0.5, 1], np.array([0.5, 1.0]),
                                                                      torch.tensor([[0, 1]])]),
    ("patch", "heads", lambda c, v: patch(c.model, [0, 1], [0, 2], heads=v), [5, "1.x", [(1, 0, 0)], [("1", "0")]]),
    ("measure_heads", "model", lambda c, v: measure_heads(v, [0, 1, 2], [1, 2]), [None]),
    ("measure_heads", "text_ids", lambda c, v: measure_heads(c.model, v, [1, 2]), [None, "가", [10**6]]),
    ("measure_heads", "vocab_ids", lambda c, v: measure_heads(c.model, [0, 1, 2], v), [None, [1.5]]),
    ("measure_heads", "eot_id", lambda c, v: measure_heads(c.model, [0, 1, 2], [1, 2], v), ["0", 10**6]),
    ("format_roles_table", "roles", lambda c, v: format_roles_table(v), [None, {}]),
    ("format_roles_table", "lang", lambda c, v: format_roles_table(None, v), ["fr"]),
    ("nb.page", "run", lambda c, v: nb.page(v, TEXT), [None, 5]),
    ("nb.page", "text", lambda c, v: nb.page(c.run, v), [None, 5]),
    ("nb.page", "mode", lambda c, v: nb.page(c.run, TEXT, mode=v), ["half", None]),
    ("nb.page", "height", lambda c, v: nb.page(c.run, TEXT, height=v), ["tall", 0]),
    ("nb.page", "sampling", lambda c, v: nb.page(c.run, TEXT, sampling=v), [0.8]),
    ("nb.walkthrough", "head", lambda c, v: nb.walkthrough(c.run, TEXT, v), [None, 5, "x", (1,), ("1", "0")]),
    ("nb.walkthrough", "query", lambda c, v: nb.walkthrough(c.run, TEXT, "1.0", v), ["1", None]),
    ("nb.walkthrough", "text", lambda c, v: nb.walkthrough(c.run, v, "1.0"), [None]),
    ("nb.path", "query", lambda c, v: nb.path(c.run, TEXT, v), ["-1", 99]),
    ("nb.path", "sampling", lambda c, v: nb.path(c.run, TEXT, sampling=v), ["greedy"]),
    ("nb.lens", "text", lambda c, v: nb.lens(c.run, v), [None]),
    ("nb.lens", "query", lambda c, v: nb.lens(c.run, TEXT, v), [1.5]),
    ("nb.why", "token", lambda c, v: nb.why(c.run, TEXT, token=v), [5]),
    ("nb.why", "versus", lambda c, v: nb.why(c.run, TEXT, versus=v), [5]),
    ("nb.why", "off", lambda c, v: nb.why(c.run, TEXT, off=v), [5, "1.x"]),
    ("nb.score", "text", lambda c, v: nb.score(c.run, v), [None]),
    ("nb.heads", "text_file", lambda c, v: nb.heads(c.run, text_file=v), [5]),
    ("nb.heads", "mode", lambda c, v: nb.heads(c.run, mode=v), ["half"]),
    ("nb.over_training", "run_dir", lambda c, v: nb.over_training(v, TEXT), [None, 5]),
    ("nb.over_training", "text", lambda c, v: nb.over_training(c.dir, v), [None]),
    ("nb.heads_over_training", "run_dir", lambda c, v: nb.heads_over_training(v), [None]),
    ("nb.language", "lang", lambda c, v: nb.language(v), ["fr", None, 5]),
]
CASES = [pytest.param(call, name, bad, id=f"{fn}-{name}-{bad!r:.20}")
         for fn, name, call, bads in SWEEP for bad in bads]  # fmt: skip


@pytest.mark.parametrize("call, name, bad", CASES)
def test_each_bad_argument_is_one_line_naming_it(ctx, call, name, bad):
    try:
        call(ctx, bad)
    except UserError as e:
        message = str(e)
    except DEEP as e:  # raised inside, not at entry
        pytest.fail(f"{type(e).__name__} escaped: {e}")
    else:
        pytest.fail(f"no error for {name}={bad!r}")
    assert name.removeprefix("nb.") in message, message  # names the argument ("head's layer" names head)
    assert "\n" not in message


def test_the_sweep_covers_the_notebook_api():
    assert len(CASES) >= 150
    names = {fn for fn, *_ in SWEEP}
    assert {"generate_text", "score_text", "head_stats", "format_stats_table", "attribute", "patch", "draw_head",
            "compute", "Settings",
            "nb.page", "nb.walkthrough", "nb.path", "nb.lens", "nb.why", "nb.score", "nb.heads", "nb.over_training",
            "nb.heads_over_training", "nb.language"} <= names  # fmt: skip


# the review's cases (../shared/reviews/probe-2026-12-04.md N07-N51), each with the line it now says
REVIEW = [
    ("N07", lambda c: generate_text(c.run, None), ArgumentTypeError, "prompt must be a str (the text to continue)"),
    ("N10", lambda c: generate_text(c.run, "x", max_new_tokens="5"), ArgumentTypeError,
     "max_new_tokens must be an int >= 0, got str"),
    ("N15", lambda c: generate_text(c.run, "x", temperature="hot"), ArgumentTypeError,
     "temperature must be a number, got str"),
    ("N26", lambda c: generate_text(c.run, ["a", "b"]), ArgumentTypeError, "prompt must be a str"),
    ("N25", lambda c: generate_text(None, "x"), ArgumentTypeError, "run must be a Run"),
    ("N08", lambda c: generate_text(c.run, 123), ArgumentTypeError, "prompt must be a str (the text to continue) or"),
    ("N43", lambda c: head_stats(c.maps.att[0]), ArgumentValueError,
     "att must be attention maps of shape (layers, heads, T, T), got shape (2, "),
    ("N45", lambda c: head_stats(np.ones((2, 2, 3, 4))), ArgumentValueError, "got shape (2, 2, 3, 4)"),
    ("N46", lambda c: head_stats(None), ArgumentTypeError, "att must be attention maps"),
    ("N50", lambda c: format_stats_table({}), ArgumentValueError, "stats must be head_stats(att)'s dict"),
    ("N51", lambda c: format_stats_table(c.stats, lang="fr"), ArgumentValueError, "lang = 'fr' is not one of"),
]


@pytest.mark.parametrize("case, call, kind, message", REVIEW, ids=[r[0] for r in REVIEW])
def test_the_review_s_calls_name_their_argument(ctx, case, call, kind, message):
    # a TypeError for a wrong type, a ValueError for a wrong value: `except TypeError/ValueError` keep working
    with pytest.raises(kind) as e:
        call(ctx)
    assert message in str(e.value) and isinstance(e.value, UserError)
    assert isinstance(e.value, TypeError if kind is ArgumentTypeError else ValueError)


def test_maps_of_nan_give_nan_not_a_number():
    stats = head_stats(np.full((1, 1, 4, 4), np.nan))  # N47: entropy was 0.0000
    assert all(np.isnan(stats[name]).all() for name in stats)
    one = random_maps(1, 2, 4)
    one[0, 1, 2, 0] = np.nan  # one NaN: its head's entropy NaN, the other head's a number
    entropy = head_stats(one)["entropy"]
    assert np.isnan(entropy[0, 1]) and np.isfinite(entropy[0, 0])


def test_good_calls_still_work(ctx):
    run = ctx.run
    greedy = generate_text(run, "가", 4, temperature=0)
    assert isinstance(greedy, list) and len(greedy) == 1 and isinstance(greedy[0], str)
    ids = run.encode_prompt("가")
    streamed = "".join(p[0] for _, p in stream_text(run, ids, np.int64(4), temperature=0))  # ids, numpy ints too
    assert streamed == greedy[0]
    assert np.isfinite(score_text(run, TEXT, stride=np.int64(4)).bits_per_char)
    stats = head_stats(torch.from_numpy(ctx.maps.att))  # a tensor as the array
    assert stats["entropy"].shape == (2, 2) and np.allclose(stats["entropy"], ctx.stats["entropy"])
    assert format_stats_table(ctx.stats, lang="ko").count("\n") == 4
    assert draw_head(ctx.maps.att, ctx.maps.labels, 1, np.int64(1)) is not None
    assert word_maps(ATT, [[0, 1], [2], [3]]).shape == (2, 2, 3, 3)
    why = compute(run, TEXT, ["why"], Settings(why=("#3", "#4")))["why"]
    assert why["focus"]["token_id"] == 3 and "+" in VIEWS["why"].text(why, "en")
    assert nb.lens(run, TEXT, 2) and nb.walkthrough(run, TEXT, (1, 0))
    seeded = generate_text(run, "가", 4, seed=np.int64(7))  # numpy's integers are ints here as everywhere
    assert seeded == generate_text(run, "가", 4, seed=7)
    ids = run.encode_prompt(TEXT)
    other = ids[:-1] + [ids[-2]]
    try:  # arrays and tensors are token ids too; the record is the lists' record
        assert patch(run.model, np.array(ids), torch.tensor(other)) == patch(run.model, ids, other)
    except UserError as e:  # a tiny model's two texts may be too close to patch: refused alike both ways
        with pytest.raises(UserError, match=str(e)[:40]):
            patch(run.model, ids, other)


def test_the_checks_say_the_range_and_take_numpy_integers():
    assert need_int("k", np.int64(3), lo=1) == 3 and type(need_int("k", np.int64(3))) is int
    with pytest.raises(ArgumentTypeError, match="^k must be an int >= 1, got bool$"):
        need_int("k", True, lo=1)
    with pytest.raises(ArgumentValueError, match="^n must be an int between 1 and 4, got 5$"):
        need_int("n", 5, 1, 4)
    assert need_token_ids("ids", torch.tensor([1, 2]), 4) is not None
    with pytest.raises(ArgumentTypeError, match="float"):
        need_token_ids("ids", np.array([1.0]))
    with pytest.raises(ArgumentValueError, match="in 0..3, got 4..4"):
        need_token_ids("ids", np.array([4]), 4)
    assert need_maps("att", np.eye(3), dims=2).shape == (3, 3)
