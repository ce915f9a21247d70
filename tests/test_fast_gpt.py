"""FastGPT (model/speed/fast_gpt.py): the training loss made a slice of logits at a time against a case worked out by
hand and against F.cross_entropy on the whole logits (the loss and every gradient, ignored targets, bf16 autocast);
DecodeStep, the module-free single-token step, against the model's own cached forward.

python -m pytest tests/test_fast_gpt.py -q
"""

import math

import pytest
import torch
import torch.nn.functional as F

from model import GPT, GPTConfig
from model.speed import fast_gpt as head_loss_module
from model.speed import speed_up
from model.speed.fast_gpt import ChunkedHeadLoss, DecodeStep, sliced_loss
from tests.conftest import TINY_MODEL as TINY


def test_a_case_by_hand():
    # logits [ln 3, 0]: softmax [3/4, 1/4]; target 1 -> loss -ln(1/4) = ln 4
    x = torch.tensor([[math.log(3)]], requires_grad=True)
    weight = torch.tensor([[1.0], [0.0]], requires_grad=True)
    loss = ChunkedHeadLoss.apply(x, weight, torch.tensor([1]), torch.float32)
    (2 * loss).backward()  # the gradient arriving from above is 2
    assert loss.item() == pytest.approx(math.log(4))
    # d loss / d logits = softmax - one-hot = [3/4, -3/4]; d/dx = that @ weight = 3/4; d/dW = its outer product with x
    assert x.grad.item() == pytest.approx(2 * 0.75)
    torch.testing.assert_close(weight.grad, 2 * torch.tensor([[0.75 * math.log(3)], [-0.75 * math.log(3)]]))


def plain_and_chunked(x, weight, targets, autocast=False):
    """Loss and gradients (x, weight) of the plain loss and of the chunked one, for the same inputs."""
    results = []
    for chunked in (False, True):
        xs, w = x.clone().requires_grad_(), weight.clone().requires_grad_()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if chunked:
                loss = sliced_loss(xs, w, targets)
            else:
                loss = F.cross_entropy(F.linear(xs, w).flatten(0, 1), targets.flatten(), ignore_index=-1)
        (loss * 0.25).backward()  # as train.py divides by grad_accum
        results.append((loss.detach(), xs.grad, w.grad))
    return results


@pytest.mark.parametrize("slice_logits", [1 << 20, 40 * 50])  # one slice; slices of 50 rows, the last shorter
def test_loss_and_gradients_equal_the_plain_loss_with_ignored_targets(monkeypatch, slice_logits):
    monkeypatch.setattr(head_loss_module, "SLICE_LOGITS", slice_logits)
    torch.manual_seed(0)
    x, weight = torch.randn(3, 70, 8), torch.randn(40, 8)  # 210 rows, vocabulary 40, width 8
    targets = torch.randint(0, 40, (3, 70))
    targets[0, :13] = -1
    (plain, *plain_grads), (chunked, *chunked_grads) = plain_and_chunked(x, weight, targets)
    torch.testing.assert_close(chunked, plain)
    for ours, reference in zip(chunked_grads, plain_grads):
        torch.testing.assert_close(ours, reference)
    assert chunked_grads[0][0, :13].abs().max() == 0  # an ignored target sends no gradient to its row


def test_under_bf16_autocast_it_stays_near_the_plain_loss():
    torch.manual_seed(0)
    x, weight, targets = torch.randn(2, 64, 16), torch.randn(300, 16) * 0.3, torch.randint(0, 300, (2, 64))
    (plain, *plain_grads), (chunked, *chunked_grads) = plain_and_chunked(x, weight, targets, autocast=True)
    assert chunked.dtype == torch.float32 and chunked.item() == pytest.approx(plain.item(), rel=1e-3)
    for ours, reference in zip(chunked_grads, plain_grads):
        assert ours.dtype == torch.float32  # the gradients come back in the inputs' dtype
        assert (ours - reference).abs().max() < 0.02 * reference.abs().max()  # bf16 products: ~3 digits


def test_the_model_trained_for_the_loss_alone_gets_the_same_loss_and_gradients():
    """`model(idx, targets, loss_only=True)` with the speed layer on, as train.py calls it: the tied embedding's
    gradient, which sums the head's and the lookup's, is the plain forward's."""
    torch.manual_seed(0)
    model = speed_up(GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.0)))
    idx, targets = torch.randint(0, 64, (4, 16)), torch.randint(0, 64, (4, 16))
    runs = []
    for loss_only in (False, True):
        model.zero_grad(set_to_none=True)
        logits, loss = model(idx, targets, loss_only=loss_only)
        loss.backward()
        runs.append((logits, loss, {name: p.grad.clone() for name, p in model.named_parameters()}))
    (logits, plain, plain_grads), (none, chunked, chunked_grads) = runs
    assert logits.shape == (4, 16, 64) and none is None
    torch.testing.assert_close(chunked, plain)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(chunked_grads[name], grad, msg=name)
    with torch.no_grad():  # without autograd the plain loss runs: still the same number
        torch.testing.assert_close(model(idx, targets, loss_only=True)[1], plain)


def test_compiled_the_slices_are_traced_into_the_graph_with_the_same_loss_and_gradients(monkeypatch):
    """torch.compile traces `ChunkedHeadLoss` (forward and backward through AOTAutograd: no graph break) and
    gets the plain loss's numbers; 'aot_eager' runs that traced graph without generating code, in seconds."""
    monkeypatch.setattr(head_loss_module, "SLICE_LOGITS", 40 * 50)  # several slices, the last one shorter
    torch.manual_seed(0)
    x, weight, targets = torch.randn(210, 8), torch.randn(40, 8), torch.randint(0, 40, (210,))
    targets[:13] = -1
    torch._dynamo.reset()
    compiled = torch.compile(sliced_loss, backend="aot_eager", fullgraph=True)  # fullgraph: a break is an error
    (plain, *plain_grads), _ = plain_and_chunked(x[None], weight, targets[None])
    xs, w = x.clone().requires_grad_(), weight.clone().requires_grad_()
    loss = compiled(xs, w, targets)
    (loss * 0.25).backward()
    torch.testing.assert_close(loss.detach(), plain)
    torch.testing.assert_close(xs.grad, plain_grads[0][0])
    torch.testing.assert_close(w.grad, plain_grads[1])


def both_losses(N: int, targets: list[int], V: int = 7, C: int = 4):
    """(the plain loss's outcome, the sliced loss's): each ("ok", loss, grad x, grad weight) or ("error", type)."""
    torch.manual_seed(0)
    x0, w0 = torch.randn(N, C), torch.randn(V, C)
    outcomes = []
    for loss_of in (lambda x, w, t: F.cross_entropy(x @ w.T, t, ignore_index=-1), sliced_loss):
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        try:
            loss = loss_of(x, w, torch.tensor(targets, dtype=torch.long))
            loss.backward()
            outcomes.append(("ok", loss.detach(), x.grad, w.grad))
        except (IndexError, RuntimeError) as e:
            outcomes.append(("error", type(e).__name__))
    return outcomes


# targets x shapes: what the plain loss does at each edge, the sliced loss does too (nan where it gives nan, the
# same zero gradients, the same refusal)
@pytest.mark.parametrize("N, targets", [
    (3, [1, 2, 0]), (3, [-1, 2, -1]), (3, [-1, -1, -1]), (1, [-1]), (0, []),  # some, all, the only one ignored; none
    (2, [-100, 1]), (2, [1, 7]), (2, [-2, 1]), (1, [6]),  # out of range below and above; the last class
])  # fmt: skip
def test_every_edge_of_the_targets_is_the_plain_loss_s(N, targets):
    plain, sliced = both_losses(N, targets)
    assert plain[0] == sliced[0], (plain, sliced)
    if plain[0] == "error":
        assert plain[1] == sliced[1] == "IndexError"
        return
    torch.testing.assert_close(sliced[1], plain[1], equal_nan=True)
    for got, want in zip(sliced[2:], plain[2:]):
        assert torch.isfinite(got).all()  # all ignored: zero gradients, not 0/0
        torch.testing.assert_close(got, want)


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

    from model.speed.fast_gpt import native_cpu_kernels

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
    model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=16)).eval()
    assert not hasattr(model.new_kv_cache(1), "step")  # the textbook network: every token through forward
    speed_up(model)
    assert isinstance(model.new_kv_cache(1).step, DecodeStep)  # bound once, for the whole decoding
    assert model.train().new_kv_cache(1).step is None  # dropout: the modules
    assert model.eval().to(torch.bfloat16).new_kv_cache(1).step is None  # measured no faster in bf16
    hook = model.blocks[0].register_forward_hook(lambda *args: None)
    assert model.to(torch.float32).new_kv_cache(1).step is None  # a hook would be skipped: the modules
    hook.remove()
