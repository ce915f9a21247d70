"""The NLL of a token stream (model/nll.py): every token predicted once, the windows by hand, bits per char."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig
from model.nll import bits_per_char, stream_nll, windows, windows_per_batch
from tests.fake_device import cuda_queries, stand_in_cuda


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
    cpu, mps = torch.device("cpu"), torch.device("mps")
    assert windows_per_batch(128, 4096, cpu) == 8  # 2**22 / (128 * 4096)
    assert windows_per_batch(128, 2048, cpu) == 16
    assert windows_per_batch(1024, 50257, cpu) == 1  # GPT-2's vocabulary: one window, never none
    assert windows_per_batch(128, 4096, mps) == 128  # 2**26 / (128 * 4096)


def test_on_cuda_a_batch_of_windows_fills_half_the_free_memory(monkeypatch):
    """The final scoring on a large GPU: at gpu.toml's shape (T = 1,024, V = 32,000) a window's logits cost
    3 x 4 x 1,024 x 32,000 = 393,216,000 bytes; a stand-in GPU (tests/fake_device.py) with 70 GiB free and 4 GiB
    cached by the allocator holds 0.5 x 79,456,894,976 / 393,216,000 = 101.03 of them, where 2**26 logits made 2.
    A T4 with 1 GiB free takes 1."""
    gpu = torch.device("cuda", 0)
    cuda_queries(monkeypatch, free=70 * 2**30, reserved=6 * 2**30, allocated=2 * 2**30)
    assert windows_per_batch(1024, 32000, gpu) == 101
    cuda_queries(monkeypatch, free=2**30)
    assert windows_per_batch(1024, 32000, gpu) == 1
    assert windows_per_batch(128, 4096, gpu) == 85  # 0.5 x 2**30 / (12 x 128 x 4096)


def test_the_stream_scored_on_a_gpu_in_large_batches_is_the_cpus_score():
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, n_embd=32)).eval()
    tokens = np.random.default_rng(1).integers(0, 50, size=300)
    on_cpu = stream_nll(model, tokens)
    with stand_in_cuda(free=16 * 12 * 16 * 50):  # 8 windows a batch on the stand-in GPU, not the CPU's 5,242
        model.to("cuda")
        assert windows_per_batch(16, 50, model.tok_emb.weight.device) == 8
        assert stream_nll(model, tokens) == (pytest.approx(on_cpu[0], rel=1e-12), on_cpu[1])


def test_bits_per_char_by_hand():
    assert bits_per_char(math.log(2) * 30, 10) == pytest.approx(3.0)
