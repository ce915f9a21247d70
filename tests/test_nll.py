"""The NLL of a token stream (model/nll.py): every token predicted once, the windows by hand, bits per char."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig
from model.nll import bits_per_char, stream_nll, windows, windows_per_batch


def test_stream_nll_predicts_every_token_but_the_first_exactly_once():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=32))
    tokens = np.random.default_rng(0).integers(0, 50, size=50).astype(np.uint16)
    nll, count = stream_nll(model, tokens, stride=16)
    assert count == 49
    t = torch.from_numpy(tokens.astype(np.int64))

    def window_nll(start, first_counted):  # input t[start:start+16] predicts t[start+1:start+17]
        logits, _ = model(t[start : start + 16][None], all_logits=True)
        losses = F.cross_entropy(logits[0], t[start + 1 : start + 17], reduction="none")
        return losses[first_counted - (start + 1) :].sum().item()

    # three full windows cover targets 1..48; target 49 comes from the window ending at it, full context
    expected = window_nll(0, 1) + window_nll(16, 17) + window_nll(32, 33) + window_nll(33, 49)
    assert nll == pytest.approx(expected, rel=1e-5)
    # stride 8: after the first window, each window counts only its last 8 targets (8+ tokens of context)
    nll, count = stream_nll(model, tokens, stride=8)
    expected = sum(window_nll(s, first) for s, first in [(0, 1), (8, 17), (16, 25), (24, 33), (32, 41), (33, 49)])
    assert count == 49 and nll == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("n, block_size, stride", [(10, 4, 2), (10, 4, 4), (10, 4, 1), (3, 4, 2), (5, 4, 3), (40, 16, 8)])
def test_windows_predict_every_target_exactly_once(n, block_size, stride):
    starts, first = windows(n, block_size, stride)
    T = min(block_size, n - 1)
    predicted = []
    for s, f in zip(starts.tolist(), first.tolist()):
        assert 0 <= s and s + T <= n - 1
        predicted += [t for t in range(s + 1, s + T + 1) if t >= f]
        assert f - s - 1 >= min(T - stride, s)  # context before the first new target
    assert predicted == list(range(1, n))


def test_windows_by_hand():
    starts, first = windows(10, 4, 2)
    assert starts.tolist() == [0, 2, 4, 5]
    assert first.tolist() == [1, 5, 7, 9]




def test_default_stride_is_half_the_window_and_batching_does_not_change_the_sum(monkeypatch):
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=32))
    tokens = np.random.default_rng(1).integers(0, 50, size=100)
    nll, count = stream_nll(model, tokens)
    assert count == 99 and nll == pytest.approx(stream_nll(model, tokens, stride=8)[0], abs=0)
    monkeypatch.setattr("model.nll.CPU_LOGITS_PER_BATCH", 16 * 50)  # one window per forward pass
    assert windows_per_batch(16, 50, torch.device("cpu")) == 1
    assert stream_nll(model, tokens)[0] == pytest.approx(nll, rel=1e-7)


def test_a_batch_of_windows_is_bounded_by_its_logits():
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert windows_per_batch(128, 4096, cpu) == 8  # 2**22 / (128 * 4096)
    assert windows_per_batch(128, 2048, cpu) == 16
    assert windows_per_batch(1024, 50257, cpu) == 1  # GPT-2's vocabulary: one window, never none
    assert windows_per_batch(128, 4096, gpu) == 128  # 2**26 / (128 * 4096)


def test_bits_per_char_by_hand():
    assert bits_per_char(math.log(2) * 30, 10) == pytest.approx(3.0)
