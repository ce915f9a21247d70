"""The decoding step with bf16 or int8 weights (model/speed/decode_weights.py): the rounding, the kernels, the step.

python -m pytest tests/test_decode_weights.py -q
"""

import copy

import pytest
import torch

from cli.errors import ModelInputError
from model import GPT, GPTConfig
from model.sampling import generate, stream_with_logits
from model.speed import speed_up
from model.speed import decode_weights
from model.speed.decode_weights import apply, check_format, pack, quantize_rows
from model.speed.fast_gpt import DecodeStep
from tests.conftest import TINY_MODEL as TINY

BF16_STEP = 2.0**-8  # the relative spacing of bf16 numbers: what one rounding of a value can change


def test_int8_rows_by_hand():
    w = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0], [0.3, 0.1, -0.1]])
    q, scale = quantize_rows(w)
    # row 0: max |w| 2 -> scale 2/127; 1 / (2/127) = 63.5 rounds to even 64, 0.5 -> 31.75 -> 32
    # row 1: all zero -> q 0 whatever the (tiny) scale; row 2: 0.1 / (0.3/127) = 42.33 -> 42
    assert q.dtype == torch.int8
    assert q.tolist() == [[64, -127, 32], [0, 0, 0], [127, 42, -42]]
    torch.testing.assert_close(scale[[0, 2]], torch.tensor([2 / 127, 0.3 / 127]))
    assert 0 < scale[1] < 1e-30


@pytest.mark.parametrize("weights", ["bf16", "int8"])
@pytest.mark.parametrize("rows", [1, 3])
def test_a_map_multiplies_by_the_rounded_weight(weights, rows):
    """apply(x) = round(x) @ W_stored.T + bias, where W_stored is the bf16 weight or q * scale; the kernel's
    sums come back as bf16, so the result is one bf16 rounding off (in float64 the reference is exact)."""
    torch.manual_seed(0)
    w, bias = torch.randn(48, 32), torch.randn(48)
    x = torch.randn(rows, 32) if rows > 1 else torch.randn(32)
    stored = pack(w, weights)
    if weights == "bf16":
        w_stored = stored.double()
    else:
        q, scale = stored
        w_stored = q.double() * scale.double()[:, None]
    want = x.bfloat16().double() @ w_stored.T + bias.double()
    got = apply(x, bias, stored)
    assert got.dtype == torch.float32 and got.shape == want.shape
    sums = (want - bias.double()).abs()
    assert ((got.double() - want).abs() <= sums * BF16_STEP + 1e-5).all()
    # and the rounding is really there: the fp32 product differs by more than float32 noise
    assert (got.double() - (x.double() @ w.double().T + bias.double())).abs().max() > 1e-4


def stored_values(stored) -> torch.Tensor:
    """The fp32 matrix a stored form stands for: the bf16 weight, or q * scale."""
    return stored.float() if isinstance(stored, torch.Tensor) else stored[0].float() * stored[1].float()[:, None]


def dequantized(model, weights):
    """A copy of model whose matrices hold the values the step's stored weights stand for (fp32 modules).
    The head gets its own matrix: the step looks tokens up in the fp32 embedding it was tied to."""
    copied = copy.deepcopy(model)
    for module in copied.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight = torch.nn.Parameter(stored_values(pack(module.weight.detach(), weights)))
    assert copied.lm_head.weight is not copied.tok_emb.weight
    return copied


def logit_errors(model, reference, weights, batch) -> list[float]:
    """max |step logits - reference logits| / max |reference logits| at each of 7 cached steps."""
    idx = torch.randint(0, 64, (batch, 12))
    ref_cache, cache = model.new_kv_cache(batch), model.new_kv_cache(batch)
    step, errors = DecodeStep(model, weights), []
    with torch.inference_mode():
        for c in (cache, ref_cache):  # the same prompt keys (generate's prefill uses the model's own weights)
            reference(idx[:, :5], kv_cache=c)
        for t in range(5, 12):
            got = step(idx[:, t : t + 1], cache)  # (B, V)
            want = reference(idx[:, t : t + 1], kv_cache=ref_cache)[0][:, -1]
            errors.append(((got - want).abs().max() / want.abs().max()).item())
    assert torch.backends.mkldnn.enabled
    return errors


@pytest.mark.parametrize("weights", ["bf16", "int8"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("mlp", [True, False])
def test_the_step_computes_the_model_with_its_stored_weights(weights, batch, mlp, monkeypatch):
    """With each map computed exactly from its stored matrix, the step gives the logits of the fp32 model
    that holds those matrices (every map wired to its own weight, the tied head included). With the real
    kernels, which round each map's input and output to bf16, the logits stay within a few bf16 steps."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY, mlp=mlp, init_std=0.2)).eval()  # wide weights: logits of order 10
    reference = dequantized(model, weights)
    assert max(logit_errors(model, reference, weights, batch)) < 8 * BF16_STEP
    monkeypatch.setattr(decode_weights, "apply", lambda x, bias, stored: x @ stored_values(stored).T + bias)
    assert max(logit_errors(model, reference, weights, batch)) < 1e-6


def test_greedy_text_of_a_trained_model_keeps_its_tokens_in_bf16_and_stays_close_in_int8():
    """A model trained to repeat its context (a copy task) gives clear winners: bf16 and int8 decode the
    same greedy tokens as fp32 until two tokens are nearly tied (the claim the README makes for trained models)."""
    torch.manual_seed(0)
    model = speed_up(GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32, dropout=0.0)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(150):  # sequences made of a random 8-token pattern repeated: the next token is predictable
        pattern = torch.randint(0, 64, (16, 8))
        x = pattern.repeat(1, 4)  # (16, 32)
        _, loss = model(x[:, :-1], x[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 2.0  # it learned to copy (a random guess is ln 64 = 4.16)
    model.eval()
    prompt = torch.randint(0, 64, (2, 8)).repeat(1, 2)  # (2, 16): two repeats of a new pattern
    columns, logits = zip(*stream_with_logits(model, prompt, 24, temperature=0))
    want, logits = torch.stack(columns, 1), torch.stack(logits, 1)  # (2, 24), (2, 24, V)
    top2 = logits.topk(2, dim=-1).values
    near_tie = (top2[..., 0] - top2[..., 1] < 0.1).any(0)  # (24,): a step where some row's two best are near
    until = int(near_tie.float().argmax()) if near_tie.any() else 24  # the text is the same up to such a step
    assert until >= 12  # and most of it is clear
    for weights in ("bf16", "int8"):
        got = generate(speed_up(model, weights), prompt, 24, temperature=0)[:, 16:]
        assert torch.equal(got[:, :until], want[:, :until]), weights


def test_formats_a_model_cannot_use_are_refused():
    model = speed_up(GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=24))).eval()
    check_format("bf16", model)  # any width
    with pytest.raises(ModelInputError, match="n_embd to be a multiple of 16 .this model's is 24.; use bf16"):
        check_format("int8", model)
    with pytest.raises(ModelInputError, match="must be one of fp32, bf16, int8"):
        check_format("int4", model)
    idx = torch.zeros(1, 3, dtype=torch.long)
    speed_up(model, "bf16")
    model.to(torch.bfloat16)  # already smaller: its LayerNorms would meet fp32 activations in the step
    with pytest.raises(ModelInputError, match="model is held in bfloat16; leave weights at fp32"):
        generate(model, idx, 2, temperature=0)  # checked again where the step is made
    with pytest.raises(ModelInputError, match="model is held in bfloat16; leave weights at fp32"):
        speed_up(model, "int8")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_model_is_refused():
    model = GPT(GPTConfig(**TINY)).cuda().eval()
    with pytest.raises(ModelInputError, match="for decoding on a CPU"):
        check_format("int8", model)
