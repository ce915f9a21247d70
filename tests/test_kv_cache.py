"""KVCache bookkeeping (model/kv_cache.py), and cached forwards equal to full forwards (prefill, steps, chunks).

python -m pytest tests/test_kv_cache.py -q
"""

import pytest
import torch

from model import GPT, GPTConfig, KVCache
from tests.conftest import TINY_MODEL as TINY



def tiny_model():
    torch.manual_seed(0)
    return GPT(GPTConfig(**TINY)).eval()


def test_update_writes_in_place_and_returns_the_filled_prefix():
    cache = KVCache(n_layer=2, batch_size=1, n_head=2, max_len=8, head_dim=3)
    assert cache.k.shape == cache.v.shape == (2, 1, 2, 8, 3) and cache.pos == 0
    k1, v1 = torch.ones(1, 2, 5, 3), 2 * torch.ones(1, 2, 5, 3)
    k, v = cache.update(1, k1, v1)
    assert k.shape == (1, 2, 5, 3) and torch.equal(k, k1) and torch.equal(v, v1)
    assert k.data_ptr() == cache.k[1].data_ptr()  # a view of the buffer, not a copy
    assert torch.all(cache.k[0] == 0)  # other layers untouched
    cache.advance(5)
    k, v = cache.update(1, 3 * torch.ones(1, 2, 2, 3), 4 * torch.ones(1, 2, 2, 3))
    assert k.shape == (1, 2, 7, 3)
    assert k[0, 0, :, 0].tolist() == [1, 1, 1, 1, 1, 3, 3] and v[0, 0, :, 0].tolist() == [2] * 5 + [4] * 2
    cache.advance(2)
    with pytest.raises(ValueError, match="overflow"):
        cache.update(0, torch.ones(1, 2, 2, 3), torch.ones(1, 2, 2, 3))
    cache.reset()
    assert cache.pos == 0


def test_update_refuses_another_batch_size():
    cache = KVCache(1, 4, 2, 8, 3)
    with pytest.raises(ValueError, match="batch size 4"):
        cache.update(0, torch.ones(1, 2, 1, 3), torch.ones(1, 2, 1, 3))


def test_new_kv_cache_follows_the_model():
    model = tiny_model()
    cache = model.new_kv_cache(3)
    assert cache.k.shape == (2, 3, 2, 16, 16) and cache.k.dtype == torch.float32
    assert model.new_kv_cache(1, max_len=4, dtype=torch.float64).k.shape == (2, 1, 2, 4, 16)


def test_cached_forward_equals_full_forward_for_prefill_steps_and_a_chunk():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 16))
    full, _ = model(idx, all_logits=True)  # (B, 16, V)
    cache = model.new_kv_cache(2)
    buffer = cache.k.data_ptr()
    with torch.no_grad():
        prefill, _ = model(idx[:, :6], kv_cache=cache, all_logits=True)
        steps = [model(idx[:, t : t + 1], kv_cache=cache)[0] for t in range(6, 9)]
        chunk, _ = model(idx[:, 9:13], kv_cache=cache, all_logits=True)  # 4 queries after 9 cached keys
        last, _ = model(idx[:, 13:16], kv_cache=cache)  # last position only
    assert cache.pos == 16 and cache.k.data_ptr() == buffer  # filled in place, never reallocated
    torch.testing.assert_close(prefill, full[:, :6], atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat(steps, dim=1), full[:, 6:9], atol=1e-5, rtol=0)
    torch.testing.assert_close(chunk, full[:, 9:13], atol=1e-5, rtol=0)
    torch.testing.assert_close(last, full[:, 15:16], atol=1e-5, rtol=0)


def test_forward_advances_the_cache_once_per_call():
    model = tiny_model()
    cache = model.new_kv_cache(1)
    with torch.no_grad():
        model(torch.zeros(1, 5, dtype=torch.long), kv_cache=cache)
        assert cache.pos == 5
        model(torch.zeros(1, 1, dtype=torch.long), kv_cache=cache)
    assert cache.pos == 6


def test_a_reset_cache_gives_the_same_logits_as_a_fresh_one():
    model = tiny_model()
    idx = torch.randint(0, 64, (1, 10))
    cache = model.new_kv_cache(1)
    with torch.no_grad():
        model(torch.randint(0, 64, (1, 12)), kv_cache=cache)
        cache.reset()
        reused, _ = model(idx, kv_cache=cache, all_logits=True)
        fresh, _ = model(idx, all_logits=True)
    torch.testing.assert_close(reused, fresh, atol=1e-5, rtol=0)
