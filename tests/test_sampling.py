"""Decoding (model/sampling.py): cached = uncached (also past block_size), the sliding-window rule, filters, seeds,
eos.

python -m pytest tests/test_sampling.py -q
"""

import contextlib
import math

import pytest
import torch

from model import GPT, GPTConfig
from cli.errors import ModelInputError
from model.speed import speed_up
from model.speed.fast_gpt import DecodeStep
from model.sampling import (
    choose_next,
    generate,
    keep_top_k,
    keep_top_p,
    penalize_repetition,
    seen_tokens,
    stream,
    stream_with_logits,
    window_start,
)
from tests.conftest import TINY_MODEL as TINY

INF = float("-inf")


def tiny_model(speed: bool = False):
    """The tiny textbook network, or (`speed`) with the speed layer on: its own decoding step on a CPU."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY)).eval()
    return speed_up(model) if speed else model


def run(model, idx, steps, **options):
    """(tokens (B, steps), per-step logits (B, steps, V))."""
    columns, logits = zip(*stream_with_logits(model, idx, steps, **options))
    return torch.stack(columns, 1), torch.stack(logits, 1)


@pytest.mark.parametrize("speed", [False, True])
@pytest.mark.parametrize("prompt_len", [5, 20])  # 20 > block_size: the prompt starts the window slid
def test_greedy_cached_and_uncached_agree_far_past_block_size(prompt_len, speed):
    model = tiny_model(speed)
    idx = torch.randint(0, 64, (2, prompt_len), generator=torch.Generator().manual_seed(1))
    cached, cached_logits = run(model, idx, 40, temperature=0)
    plain, plain_logits = run(model, idx, 40, temperature=0, use_cache=False)
    assert torch.equal(cached, plain)
    torch.testing.assert_close(cached_logits, plain_logits, atol=1e-4, rtol=0)
    assert torch.equal(generate(model, idx, 40, temperature=0), torch.cat([idx, cached], 1))


@pytest.mark.parametrize("speed", [False, True])
def test_the_cache_is_fed_one_token_per_step_except_when_the_window_restarts(monkeypatch, speed):
    model = tiny_model(speed)
    fed = []  # tokens given to each forward: model calls (prefills) and DecodeStep calls (single steps)
    hook = model.register_forward_pre_hook(lambda m, args, kwargs: fed.append(args[0].size(1)), with_kwargs=True)
    step_call = DecodeStep.__call__

    def counting_step(self, column, cache):
        fed.append(column.size(1))
        return step_call(self, column, cache)

    monkeypatch.setattr(DecodeStep, "__call__", counting_step)
    generate(model, torch.zeros(1, 5, dtype=torch.long), 25, temperature=0)
    hook.remove()
    # prompt 5, then single tokens up to 16 cached; at 17 tokens restart from the last 8, ...
    assert fed == [5] + [1] * 11 + [8] + [1] * 8 + [8] + [1] * 3


class Watched:
    """A model behind a door that notes every attribute the caller reads (`used`)."""

    def __init__(self, model):
        self.__dict__.update(model=model, used=set())

    def __getattr__(self, name):
        self.used.add(name)
        return getattr(self.model, name)

    def __call__(self, *args, **kwargs):
        self.used.add("__call__")
        return self.model(*args, **kwargs)


@pytest.mark.parametrize("options", [{}, {"use_cache": False}, {"attention": []}, {"repetition_penalty": 1.3}])
def test_the_sampler_calls_nothing_but_the_model(monkeypatch, options):
    """The loop asks the model for logits (or maps) and a cache, and reads its sizes: a sped-up model picks its
    faster step for a cached token itself (model/speed/fast_gpt.py), so the loop knows no speed layer."""
    steps = []
    call = DecodeStep.__call__
    monkeypatch.setattr(DecodeStep, "__call__", lambda self, *args: steps.append(1) or call(self, *args))
    model = Watched(tiny_model(speed=True))
    idx = torch.zeros(1, 5, dtype=torch.long)
    got = generate(model, idx, 25, temperature=0, **options)
    assert model.used <= {"__call__", "config", "new_kv_cache", "forward_with_attention"}, model.used
    assert torch.equal(got, generate(tiny_model(speed=False), idx, 25, temperature=0, **options))
    assert len(steps) == (22 if not options or "repetition_penalty" in options else 0)  # the step ran inside


def test_window_rule():
    # block 16: the window grows to 16 tokens, then restarts from the last 8
    assert window_start(0, 16, 16) == 0
    assert window_start(0, 17, 16) == 9
    assert window_start(9, 24, 16) == 9  # 15 tokens
    assert window_start(9, 25, 16) == 9  # 16 tokens
    assert window_start(9, 26, 16) == 18
    assert window_start(0, 40, 16) == 32  # a long prompt
    assert window_start(0, 2, 1) == 1  # block_size 1 still keeps one token


def test_per_step_logits_are_those_of_the_documented_window():
    model = tiny_model()
    idx = torch.randint(0, 64, (1, 5), generator=torch.Generator().manual_seed(2))
    tokens, logits = run(model, idx, 25, temperature=0)
    seq = torch.cat([idx, tokens], 1)
    start = 0
    for step in range(25):
        n = 5 + step  # tokens known when this step's logits were made
        start = window_start(start, n, 16)
        expected, _ = model(seq[:, start:n])
        torch.testing.assert_close(logits[:, step], expected[:, -1], atol=1e-4, rtol=0)
    assert start == 26 - 8  # the window slid twice: at n = 17 and n = 26


def test_stream_yields_columns_and_generate_keeps_the_prompt():
    model = tiny_model()
    idx = torch.randint(0, 64, (3, 4))
    columns = list(stream(model, idx, 6, temperature=0))
    assert len(columns) == 6 and all(c.shape == (3,) for c in columns)
    out = model.generate(idx, 6, temperature=0)
    assert out.shape == (3, 10) and torch.equal(out[:, :4], idx)
    assert torch.equal(out[:, 4:], torch.stack(columns, 1))
    assert torch.equal(generate(model, idx, 0), idx)


def test_inference_mode_does_not_leak_into_the_caller_between_steps():
    for _ in stream(tiny_model(), torch.zeros(1, 2, dtype=torch.long), 3):
        assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_batched_rows_match_single_prompts():
    model = tiny_model()
    idx = torch.randint(0, 64, (3, 6))
    batched = generate(model, idx, 20, temperature=0)
    for row in range(3):
        assert torch.equal(batched[row : row + 1], generate(model, idx[row : row + 1], 20, temperature=0))


def test_seeded_sampling_is_reproducible():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 4))
    options = {"temperature": 1.0, "top_k": 20, "top_p": 0.9, "repetition_penalty": 1.3}
    a = generate(model, idx, 30, generator=torch.Generator().manual_seed(7), **options)
    b = generate(model, idx, 30, generator=torch.Generator().manual_seed(7), **options)
    c = generate(model, idx, 30, generator=torch.Generator().manual_seed(8), **options)
    assert torch.equal(a, b) and not torch.equal(a, c)
    d = generate(model, idx, 30, generator=torch.Generator().manual_seed(7), use_cache=False, **options)
    assert torch.equal(a, d)


def test_top_k_keeps_exactly_the_k_largest():
    logits = torch.tensor([[1.0, 5.0, 3.0, 4.0, 2.0], [0.0, -1.0, 2.0, 1.0, -2.0]])
    kept = keep_top_k(logits, 2)
    assert kept.tolist() == [[INF, 5.0, INF, 4.0, INF], [INF, INF, 2.0, 1.0, INF]]
    assert torch.equal(keep_top_k(logits, 10), logits)


@pytest.mark.parametrize(
    "p, kept",
    [
        (0.45, [0]),  # 0.5 alone already reaches 0.45
        (0.6, [0, 3]),  # 0.5 < 0.6, 0.5 + 0.2 = 0.7 >= 0.6
        (0.8, [0, 3, 1]),  # 0.7 < 0.8, 0.85 >= 0.8
        (1.0, [0, 1, 2, 3, 4]),
    ],
)
def test_top_p_keeps_the_smallest_set_reaching_p(p, kept):
    probs = torch.tensor([[0.5, 0.15, 0.05, 0.2, 0.1]])  # deliberately not sorted
    result = keep_top_p(probs.log(), p)
    assert torch.isfinite(result[0]).nonzero().flatten().tolist() == sorted(kept)
    torch.testing.assert_close(result[0, kept], probs.log()[0, kept])


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    idx = torch.tensor([[0, 1, 0], [3, 3, 3]])
    seen = seen_tokens(idx, 4)
    assert seen.tolist() == [[True, True, False, False], [False, False, False, True]]
    logits = torch.tensor([[2.0, -1.0, 0.5, -3.0], [2.0, -1.0, 0.5, -3.0]])
    penalized = penalize_repetition(logits, seen, 2.0)
    assert penalized.tolist() == [[1.0, -2.0, 0.5, -3.0], [2.0, -1.0, 0.5, -6.0]]


def test_repetition_penalty_changes_greedy_choices():
    model = tiny_model()
    idx = torch.randint(0, 64, (1, 4))
    plain = generate(model, idx, 30, temperature=0)
    penalized = generate(model, idx, 30, temperature=0, repetition_penalty=1e3)
    assert not torch.equal(plain, penalized)
    assert len(set(penalized[0, 4:].tolist())) == 30  # every seen token is pushed far down


def test_temperature_zero_is_deterministic_and_ignores_filters():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 4))
    greedy = generate(model, idx, 12, temperature=0)
    assert torch.equal(greedy, generate(model, idx, 12, temperature=0, top_k=3, top_p=0.5))


@pytest.mark.parametrize("temperature", [1e-300, 5e-324])  # 1/T overflows to inf; the smallest double
def test_a_tiny_temperature_is_greedy(temperature):
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 4), generator=torch.Generator().manual_seed(1))
    greedy = generate(model, idx, 12, temperature=0)
    assert torch.equal(generate(model, idx, 12, temperature=temperature, generator=torch.Generator().manual_seed(0)), greedy)
    assert torch.equal(generate(model, idx, 12, temperature=temperature, top_p=0.5, top_k=3), greedy)


def test_finished_rows_keep_emitting_eos_and_decoding_stops_when_all_are_done():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 4), generator=torch.Generator().manual_seed(3))
    free = generate(model, idx, 12, temperature=0)
    eos = free[0, 4].item()  # row 0's first token
    assert eos not in free[1, 4:6].tolist()
    out = generate(model, idx, 12, temperature=0, eos_token_id=eos)
    assert torch.all(out[0, 4:] == eos)
    assert out.shape[1] <= 16 and torch.equal(out[1, :6], free[1, :6])
    both = torch.cat([idx[:1], idx[:1]])  # two identical rows finish together, on the first step
    assert generate(model, both, 12, temperature=0, eos_token_id=eos).shape == (2, 5)


@pytest.mark.parametrize(
    "options",
    [{"temperature": -1.0}, {"temperature": math.inf}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5},
     {"repetition_penalty": 0.0}, {"repetition_penalty": math.inf}],
)
def test_bad_options_are_refused(options):
    with pytest.raises(ModelInputError):
        generate(tiny_model(), torch.zeros(1, 2, dtype=torch.long), 3, **options)


def test_empty_prompt_and_unknown_ids_are_refused():
    with pytest.raises(ModelInputError, match="empty"):
        generate(tiny_model(), torch.zeros(1, 0, dtype=torch.long), 3)
    with pytest.raises(ModelInputError, match=r"\[0, 64\)"):
        generate(tiny_model(), torch.tensor([[3, 64]]), 3)


def test_3_sampling_at_the_edges_of_its_settings_stays_finite():
    torch.manual_seed(0)
    logits = torch.randn(3, 50)
    seen = torch.zeros(3, 50, dtype=torch.bool)
    seen[:, :10] = True
    for penalty in (1e-308, 1e308):  # divides positive logits by the penalty: inf, then inf - inf = NaN
        ids = choose_next(penalize_repetition(logits, seen, penalty), temperature=0.7)
        assert ids.shape == (3,) and bool(((ids >= 0) & (ids < 50)).all())
    kept = keep_top_p(logits, 1e-320)  # rounds to 0 in float32, and every token used to be dropped
    assert (torch.isfinite(kept).sum(-1) == 1).all()
    assert choose_next(kept, temperature=1.0).tolist() == logits.argmax(-1).tolist()
    with pytest.raises(ModelInputError, match="logits hold NaN or inf"):
        choose_next(torch.full((1, 50), float("nan")))


def test_sampling_follows_the_model_distribution():
    model = tiny_model()
    idx = torch.zeros(4000, 1, dtype=torch.long)
    first = generate(model, idx, 1, generator=torch.Generator().manual_seed(0))[:, 1]
    with torch.no_grad():
        probs = model(idx[:1])[0][0, -1].softmax(-1)
    freq = torch.bincount(first, minlength=64) / 4000
    assert (freq - probs).abs().max().item() < 4 * math.sqrt(probs.max().item() / 4000)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_decoding_cached_equals_uncached_and_seeds_reproduce():
    model = tiny_model().cuda()
    idx = torch.randint(0, 64, (2, 5), device="cuda")
    cached, cached_logits = run(model, idx, 30, temperature=0)
    plain, plain_logits = run(model, idx, 30, temperature=0, use_cache=False)
    assert torch.equal(cached, plain)
    torch.testing.assert_close(cached_logits, plain_logits, atol=1e-4, rtol=0)
    a, b = (generate(model, idx, 20, generator=torch.Generator("cuda").manual_seed(0)) for _ in range(2))
    assert torch.equal(a, b)


def test_the_prompts_end_of_text_is_not_a_repeat():
    idx = torch.tensor([[0, 2, 2], [0, 3, 1]])  # both prompts start with the end-of-text id 0
    assert seen_tokens(idx, 4, eos_token_id=0).tolist() == [[False, False, True, False], [False, True, False, True]]
    assert seen_tokens(idx, 4)[:, 0].tolist() == [True, True]  # without an eos, every id counts


def test_each_decoding_step_records_its_own_attention_row_equal_to_the_full_forwards():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(2))
    recorded = []
    tokens, logits = run(model, idx, 8, temperature=0, attention=recorded)
    plain, plain_logits = run(model, idx, 8, temperature=0)
    assert torch.equal(tokens, plain)  # recording changes no token
    torch.testing.assert_close(logits, plain_logits, atol=1e-5, rtol=0)
    full = model.attention_maps(torch.cat([idx, tokens], 1))  # (B, L, nh, 13, 13)
    # the prefill (5 rows), then one row per token fed, the last generated token included
    assert [(start, tuple(m.shape[-2:])) for start, m in recorded] == [(0, (5, 5))] + [(0, (1, k)) for k in range(6, 14)]
    torch.testing.assert_close(recorded[0][1], full[..., :5, :5], atol=1e-6, rtol=0)
    for _, maps in recorded[1:]:
        k = maps.size(-1)
        torch.testing.assert_close(maps[..., 0, :], full[..., k - 1, :k], atol=1e-6, rtol=0)


def test_recorded_attention_past_block_size_follows_the_window_restart():
    model = tiny_model()
    idx = torch.randint(0, 64, (1, 5), generator=torch.Generator().manual_seed(3))
    recorded = []
    tokens, _ = run(model, idx, 14, temperature=0, attention=recorded)  # 19 tokens: the window restarts at 16
    seq = torch.cat([idx, tokens], 1)
    starts = [start for start, _ in recorded]
    assert starts[:12] == [0] * 12 and set(starts[12:]) == {9}  # 16 tokens, then at 17 the last 8 again
    window = model.attention_maps(seq[:, 9:])  # the new window's own full forward
    for start, maps in recorded[12:]:
        k = maps.size(-1)
        torch.testing.assert_close(maps[..., -1, :], window[..., k - 1, :k], atol=1e-6, rtol=0)
    assert recorded[12][1].shape[-2:] == (8, 8) and recorded[-1][1].size(-1) == 10  # the last token's row too


@pytest.mark.parametrize("on_gpu", [False, True])
def test_a_gpu_decoding_looks_at_its_checks_every_16_steps_and_a_cpu_every_step(monkeypatch, on_gpu):
    """The finite-logits check and the eos check are host syncs: on a GPU (a stand-in, tests/fake_device.py) they
    wait for steps 16, 32, ... and the last; a NaN still ends the decoding with its one line."""
    from model import sampling
    from tests.fake_device import stand_in_cuda

    looks = []
    check = sampling.check_finite
    monkeypatch.setattr(sampling, "check_finite", lambda ok, dtype: looks.append(1) or check(ok, dtype))
    with stand_in_cuda() if on_gpu else contextlib.nullcontext():
        model = tiny_model().to("cuda" if on_gpu else "cpu")
        idx = torch.zeros(1, 5, dtype=torch.long, device=model.tok_emb.weight.device)
        generate(model, idx, 40, temperature=0)
        assert len(looks) == (3 if on_gpu else 40)  # steps 16, 32 and 40
        with torch.no_grad():
            model.lm_head.weight[3] = float("nan")
        with pytest.raises(ModelInputError, match="NaN or inf"):
            generate(model, idx, 40, temperature=0)
