"""The reference attention (model/attention.py) against numbers worked out by hand, and the layer with the
speed layer's kernels (model/speed/kernels.py) against its textbook steps.

python -m pytest tests/test_attention.py -q
"""

import math

import pytest
import torch

from model import GPTConfig
from model.attention import CausalSelfAttention, causal_mask, reference_attention
from model.speed import speed_up

# Worked on paper, d = 4 so sqrt(d) = 2:
#   q = [[1, 1,    0, 0],      k = [[2, 0, 0, 0],      v = [[1, 0],
#        [0, ln 3, 0, 0]]           [0, 2, 0, 0]]           [3, 4]]
#   q kᵀ = [[2, 2], [0, 2 ln 3]]  ->  / 2  ->  scores = [[1, 1], [0, ln 3]]
#   softmax row 0: e/(e+e) = [1/2, 1/2];   row 1: [1, 3]/(1+3) = [1/4, 3/4]
#   y row 0 = 1/2 [1, 0] + 1/2 [3, 4] = [2, 2];   y row 1 = 1/4 [1, 0] + 3/4 [3, 4] = [2.5, 3]
# Causal: query 0 may only see key 0, so its scores become [1, -inf] -> att [1, 0] -> y [1, 0];
# query 1 sees both keys and is unchanged.
Q = torch.tensor([[1.0, 1.0, 0.0, 0.0], [0.0, math.log(3), 0.0, 0.0]])
K = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0]])
V = torch.tensor([[1.0, 0.0], [3.0, 4.0]])


def tiny_config(**overrides):
    return GPTConfig(**{"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32, **overrides})


def test_reference_attention_matches_hand_computation():
    y, att = reference_attention(Q, K, V)
    torch.testing.assert_close(att, torch.tensor([[0.5, 0.5], [0.25, 0.75]]))
    torch.testing.assert_close(y, torch.tensor([[2.0, 2.0], [2.5, 3.0]]))


def test_reference_attention_causal_matches_hand_computation():
    y, att = reference_attention(Q, K, V, causal=True)
    torch.testing.assert_close(att, torch.tensor([[1.0, 0.0], [0.25, 0.75]]))
    torch.testing.assert_close(y, torch.tensor([[1.0, 0.0], [2.5, 3.0]]))


def test_causal_mask_is_bottom_right_aligned_for_fewer_queries():
    # the last query of two keys sees both, exactly like row 1 above
    assert causal_mask(1, 2).tolist() == [[True, True]]
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    y, att = reference_attention(Q[1:], K, V, causal=True)
    torch.testing.assert_close(att, torch.tensor([[0.25, 0.75]]))
    torch.testing.assert_close(y, torch.tensor([[2.5, 3.0]]))


def test_reference_attention_takes_leading_axes_and_a_broadcast_mask():
    q, k, v = (t.expand(3, 2, *t.shape) for t in (Q, K, V))  # (3, 2, T, d): batch and heads
    only_self = torch.eye(2, dtype=torch.bool)  # (T, T) broadcasts over both leading axes
    y, att = reference_attention(q, k, v, mask=only_self)
    assert y.shape == (3, 2, 2, 2) and att.shape == (3, 2, 2, 2)
    torch.testing.assert_close(att, only_self.float().expand(3, 2, 2, 2))
    torch.testing.assert_close(y, V.expand(3, 2, 2, 2))  # each query copies its own value


def test_masked_weights_are_exactly_zero_and_rows_sum_to_one():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    _, att = reference_attention(q, k, v, causal=True)
    assert torch.all(att[..., ~causal_mask(5, 7)] == 0)
    torch.testing.assert_close(att.sum(-1), torch.ones(2, 3, 5))


@pytest.mark.parametrize("T", [1, 7])
def test_fast_and_explicit_paths_agree(T):
    torch.manual_seed(0)
    attn = speed_up(CausalSelfAttention(tiny_config(dropout=0.1))).eval()  # eval: dropout off on both paths
    x = torch.randn(2, T, 32)
    y_fast, none = attn(x)
    y_explicit, att = attn(x, need_attn=True)
    assert none is None and att.shape == (2, 2, T, T)
    torch.testing.assert_close(y_fast, y_explicit, atol=1e-5, rtol=0)


def test_fast_and_explicit_paths_agree_on_a_chunk_after_cached_keys():
    from model.kv_cache import KVCache

    torch.manual_seed(0)
    attn = speed_up(CausalSelfAttention(tiny_config())).eval()
    x = torch.randn(2, 8, 32)
    full, _ = attn(x)
    outputs = {}
    for need_attn in (False, True):  # Tq = 3 queries after 5 cached keys: bottom-right mask
        cache = KVCache(1, 2, 2, 16, 16)
        attn(x[:, :5], cache)
        cache.advance(5)
        outputs[need_attn], att = attn(x[:, 5:], cache, need_attn=need_attn)
    assert att.shape == (2, 2, 3, 8)
    torch.testing.assert_close(outputs[False], outputs[True], atol=1e-5, rtol=0)
    torch.testing.assert_close(outputs[False], full[:, 5:], atol=1e-5, rtol=0)


def test_training_dropout_is_random_and_eval_is_not():
    torch.manual_seed(0)
    attn = speed_up(CausalSelfAttention(tiny_config(dropout=0.5)))
    x = torch.randn(1, 6, 32)
    assert not torch.equal(attn(x)[0], attn(x)[0])
    assert not torch.equal(attn(x, need_attn=True)[0], attn(x, need_attn=True)[0])
    attn.eval()
    assert torch.equal(attn(x)[0], attn(x)[0])


@pytest.mark.parametrize("max_keys, expected", [(512, []), (4, [(torch.bfloat16, True)])])
def test_under_cpu_bf16_autocast_the_attention_runs_in_bf16(monkeypatch, max_keys, expected):
    """bf16 on a CPU without dropout (docs/speed.md): up to FEW_PASS_MAX_KEYS keys the few-pass steps, beyond
    them PyTorch's fused kernel, both on the bf16 q, k, v; either lands on the explicit path's fp32 numbers up
    to bf16 rounding."""
    from model.speed import kernels as attention_kernels

    monkeypatch.setattr(attention_kernels, "FEW_PASS_MAX_KEYS", max_keys)
    torch.manual_seed(0)
    attn = speed_up(CausalSelfAttention(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8))).eval()
    x = torch.randn(2, 8, 8)
    seen = []
    kernel = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda q, k, v, **kw: seen.append((q.dtype, torch.is_autocast_enabled("cpu"))) or kernel(q, k, v, **kw))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        fast, _ = attn(x)
    assert seen == expected  # 8 keys: the fused kernel only past a limit of 4
    assert fast.dtype == torch.bfloat16
    with torch.no_grad():
        exact, _ = attn(x, need_attn=True)
    torch.testing.assert_close(fast.float(), exact, atol=0.03, rtol=0.03)


def test_few_pass_steps_without_dropout_against_the_reference_on_a_chunk_after_cached_keys():
    """3 queries after 5 earlier keys, no dropout: softmax(q kᵀ/√d with the bottom-right mask) @ v."""
    from model.speed.kernels import few_pass_attention

    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 3, 8), torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 4)
    expected, _ = reference_attention(q, k, v, causal=True)
    torch.testing.assert_close(few_pass_attention(q, k, v, 0.0), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("T", [1, 7])
def test_cpu_dropout_kernel_equals_the_textbook_steps_with_the_same_mask(T):
    """In training on a CPU the layer runs `few_pass_attention` (model/speed/kernels.py); with the random
    generator in the same state it draws the same dropout masks as the textbook steps (`attend`), so the
    outputs and every gradient agree up to rounding."""
    torch.manual_seed(0)
    attn = speed_up(CausalSelfAttention(tiny_config(dropout=0.3))).train()
    x = torch.randn(2, T, 32)
    results = []
    for need_attn in (False, True):
        torch.manual_seed(1)
        xi = x.clone().requires_grad_()
        y, _ = attn(xi, need_attn=need_attn)
        y.square().sum().backward()
        results.append((y.detach(), xi.grad, attn.c_attn.weight.grad.clone()))
        attn.zero_grad()
    for fast, explicit in zip(*results):
        torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)


def test_cpu_dropout_kernel_against_the_reference_on_a_chunk_after_cached_keys():
    """3 queries after 5 earlier keys (the bottom-right mask): softmax(q kᵀ/√d, masked), the kept weights
    scaled by 1/(1 - p), times v; the mask drawn as model/speed/kernels.py draws it for that shape."""
    from model.speed.kernels import few_pass_attention
    from model.speed.kernels import keep_mask

    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 3, 8), torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 4)
    torch.manual_seed(5)
    keep, p = keep_mask((6, 3, 8), 0.25, "cpu")
    _, att = reference_attention(q, k, v, causal=True)
    expected = (att * keep.view(2, 3, 3, 8) / (1 - p)) @ v
    torch.manual_seed(5)
    torch.testing.assert_close(few_pass_attention(q, k, v, 0.25), expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(few_pass_attention(q, k, v, 1.0), torch.zeros(2, 3, 3, 4))


def test_cpu_dropout_kernel_under_bf16_autocast():
    """Training in bf16 on a CPU: the kernel's matmuls run in bf16 and land near the fp32 numbers (same mask)."""
    torch.manual_seed(0)
    attn = speed_up(CausalSelfAttention(tiny_config(dropout=0.2))).train()
    x = torch.randn(2, 7, 32)
    torch.manual_seed(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low, _ = attn(x)
    torch.manual_seed(1)
    exact, _ = attn(x)
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), exact, atol=0.05, rtol=0.05)
