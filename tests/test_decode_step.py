"""DecodeStep, the module-free single-token step, against the model's own cached forward.

python -m pytest tests/test_decode_step.py -q
"""

import pytest
import torch

from model import GPT, GPTConfig
from model.decode_step import DecodeStep

TINY = {"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}


@pytest.mark.parametrize("bias", [True, False])
def test_steps_give_the_model_logits_and_the_same_cache(bias):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY, bias=bias)).eval()
    if bias:  # GPT-2 init zeroes the biases; make them matter
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.normal_(0, 0.5)
    idx = torch.randint(0, 64, (3, 12))
    ref_cache, cache = model.new_kv_cache(3), model.new_kv_cache(3)
    step = DecodeStep(model)
    with torch.inference_mode():
        model(idx[:, :5], kv_cache=ref_cache)
        model(idx[:, :5], kv_cache=cache)
        for t in range(5, 12):
            want = model(idx[:, t : t + 1], kv_cache=ref_cache)[0][:, -1]  # (B, V)
            got = step(idx[:, t : t + 1], cache)
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
            full = model(idx[:, : t + 1])[0][:, -1]  # no cache at all
            torch.testing.assert_close(got, full, rtol=0, atol=1e-5)
    assert cache.pos == ref_cache.pos == 12
    torch.testing.assert_close(cache.k, ref_cache.k, rtol=0, atol=1e-6)
    torch.testing.assert_close(cache.v, ref_cache.v, rtol=0, atol=1e-6)


def test_a_full_cache_is_refused():
    model = GPT(GPTConfig(**TINY)).eval()
    cache = model.new_kv_cache(1, max_len=4)
    step = DecodeStep(model)
    with torch.inference_mode():
        model(torch.zeros(1, 4, dtype=torch.long), kv_cache=cache)
        with pytest.raises(ValueError, match="overflow"):
            step(torch.zeros(1, 1, dtype=torch.long), cache)
