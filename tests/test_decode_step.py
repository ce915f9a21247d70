"""DecodeStep (model/speed/decode_step.py), the module-free single-token step, against the model's own cached forward.

python -m pytest tests/test_decode_step.py -q
"""

import pytest
import torch

from model import GPT, GPTConfig
from model.speed.decode_step import DecodeStep
from tests.conftest import TINY_MODEL as TINY



@pytest.mark.parametrize("batch", [1, 3])  # one row takes the matrix-vector path, several the matrix one
@pytest.mark.parametrize("bias, mlp", [(True, True), (False, True), (True, False)])  # mlp false: attention-only
def test_steps_give_the_model_logits_and_the_same_cache(bias, mlp, batch):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY, bias=bias, mlp=mlp)).eval()
    if bias:  # GPT-2 init zeroes the biases; make them matter
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("bias"):
                    p.normal_(0, 0.5)
    idx = torch.randint(0, 64, (batch, 12))
    ref_cache, cache = model.new_kv_cache(batch), model.new_kv_cache(batch)
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
    assert torch.backends.mkldnn.enabled  # the step's switch is restored
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
    assert torch.backends.mkldnn.enabled  # restored though the step failed half-way


@pytest.mark.parametrize("activation", ["gelu", "gelu_new"])
def test_the_step_keeps_a_layer_s_gelu_form(activation):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY, activation=activation)).eval()
    other = "tanh" if activation == "gelu" else "none"
    model.blocks[1].mlp.gelu = torch.nn.GELU(approximate=other)  # a layer of the other form, so each is checked
    with torch.no_grad():  # inputs of order 1 and more, where the two forms differ by up to ~1e-3
        model.blocks[1].mlp.c_fc.weight.mul_(20)
    idx = torch.randint(0, 64, (1, 6))
    ref_cache, cache = model.new_kv_cache(1), model.new_kv_cache(1)
    with torch.inference_mode():
        model(idx[:, :5], kv_cache=ref_cache)
        model(idx[:, :5], kv_cache=cache)
        want = model(idx[:, 5:], kv_cache=ref_cache)[0][:, -1]
        torch.testing.assert_close(DecodeStep(model)(idx[:, 5:], cache), want, rtol=0, atol=1e-5)


def test_overlapping_blocks_in_two_threads_restore_the_setting():
    """Thread A enters, B enters, A leaves, B leaves: a plain save/restore would leave oneDNN off."""
    import threading

    from model.speed.decode_step import native_cpu_kernels

    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with native_cpu_kernels():
            a_inside.set()
            b_inside.wait(5)
        a_left.set()

    def b():
        a_inside.wait(5)
        with native_cpu_kernels():
            b_inside.set()
            a_left.wait(5)
            seen["off while B is inside"] = not torch.backends.mkldnn.enabled

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"off while B is inside": True}
    assert torch.backends.mkldnn.enabled


def test_only_fp32_cpu_models_in_eval_mode_take_the_step():
    from model.speed import speed_up

    model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=16)).eval()
    assert model.decode_step() is None  # the textbook network: every token through forward
    speed_up(model)
    assert isinstance(model.decode_step(), DecodeStep)
    assert model.train().decode_step() is None  # dropout: the modules
    assert model.eval().to(torch.bfloat16).decode_step() is None  # measured no faster in bf16
