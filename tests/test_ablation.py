"""Switching heads off (model/ablation.py), for a look or for good (train.heads_off), and what each head is worth
(inspection/importance.py).

    python -m pytest tests/test_ablation.py -q
"""

import re

import pytest
import torch

from inspection.importance import head_importance
from model.ablation import KeptOff, ablated, check_heads, has_hooks, head_means, parse_heads_off
from model.config import ModelInputError
from model.sampling import generate
from model.speed import speed_up
from tests.conftest import biased_model, copying_model


def ids(seed=0, B=3, T=16):
    return torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(seed))


def test_switching_no_head_off_gives_exactly_the_normal_forward():
    model, x = biased_model(), ids()
    with ablated(model, []):
        assert not has_hooks(model)
        off = model(x, all_logits=True)[0]
    assert torch.equal(off, model(x, all_logits=True)[0])


def test_zeroing_every_head_of_a_layer_leaves_only_c_proj_s_bias():
    """With every head of layer 0 zeroed, that layer's attention adds c_proj's bias to each token and nothing
    else: the model computes what a hand-written forward without that attention computes."""
    model, x = biased_model(), ids()
    seen = []
    hook = model.blocks[0].attn.register_forward_hook(lambda m, args, out: seen.append(out[0]))
    with ablated(model, [(0, 0), (0, 1)]):
        logits = model(x, all_logits=True)[0]
    hook.remove()
    bias = model.blocks[0].attn.c_proj.bias
    assert torch.equal(seen[0], bias.expand_as(seen[0]))
    with torch.no_grad():  # by hand: block 0 = x + bias + MLP, block 1 as usual
        h = model.tok_emb(x) + model.pos_emb.weight[:16] + bias
        b0 = model.blocks[0]
        h = h + b0.mlp(b0.ln_2(h))
        h = model.blocks[1](h)[0]
        expected = model.lm_head(model.ln_f(h))
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)


def test_mean_ablation_gives_the_head_its_mean_output_over_the_text():
    model, x = biased_model(), ids(1, B=4)
    means = head_means(model, x, batch=3)  # two chunks
    ys = []  # every head's y, read from the explicit path's probe
    hook = model.blocks[1].attn.probe.register_forward_hook(lambda m, a, kw, out: ys.append(kw["y"]), with_kwargs=True)
    model.forward_with_attention(x)
    hook.remove()
    y = ys[0]  # (B, nh, T, hs)
    torch.testing.assert_close(means[1], y.transpose(1, 2).reshape(-1, 32).mean(0), rtol=0, atol=1e-6)
    outs = []
    with ablated(model, [(1, 1)], means):  # a hook registered after the ablation's sees what it did
        hook = model.blocks[1].attn.c_proj.register_forward_pre_hook(lambda m, args: outs.append(args[0]))
        model(x)
    hook.remove()
    torch.testing.assert_close(outs[0][..., 16:], means[1, 16:].expand(4, 16, 16))  # head 1: its mean, everywhere
    torch.testing.assert_close(outs[0][..., :16], y[:, 0])  # head 0 untouched


def test_cached_and_uncached_decoding_switch_off_the_same_heads():
    model = speed_up(biased_model(block_size=32))  # its decoding step would skip the hooks: the modules run
    prompt = ids(2, B=2, T=5)
    full = model(prompt)[0]
    with ablated(model, [(1, 0), (0, 1)]):
        assert (model(prompt)[0] - full).abs().max() > 1e-3  # the heads matter (logits of this model are ~0.1)
        cached = generate(model, prompt, 40, temperature=0)  # past block_size: the cache slides too
        uncached = generate(model, prompt, 40, temperature=0, use_cache=False)
        with pytest.raises(ModelInputError, match="weights bf16 decode without the model's modules"):
            generate(model, prompt, 4, temperature=0, weights="bf16")
    assert torch.equal(cached, uncached)
    assert not has_hooks(model)  # and are back on
    assert torch.equal(model(prompt)[0], full)


def test_heads_are_checked():
    model = biased_model()
    assert check_heads(model, [(1, 0), (0, 1)]) == [(0, 1), (1, 0)]
    with pytest.raises(ModelInputError, match=r"head 9\.9 is not in this model: it has layers 0\.\.1 and heads 0\.\.1"):
        check_heads(model, [(9, 9)])
    with pytest.raises(ModelInputError, match=r"head 1\.0 is given twice"):
        check_heads(model, [(1, 0), (0, 0), (1, 0)])


def test_importance_of_the_hand_built_copying_model():
    """Its previous-token head 0.0 and induction head 1.0 carry the whole in-context loss drop; its zeroed
    heads 0.1 and 1.1 output zeros already, so zero-ablating them changes nothing."""
    text = torch.randint(1, 8, (64,), generator=torch.Generator().manual_seed(1)).numpy()
    imp = head_importance(copying_model(), text, list(range(1, 8)), eot_id=0, means=None)
    assert imp.full_drop > 13
    assert imp.drop[0, 0] > 0.8 * imp.full_drop and imp.drop[1, 0] > 0.99 * imp.full_drop
    assert imp.loss[0, 1] == imp.drop[0, 1] == imp.loss[1, 1] == imp.drop[1, 1] == 0


def test_a_kept_off_head_gives_its_batch_mean_while_training_and_the_measured_mean_after():
    """train.heads_off's hook (KeptOff): in training, head 1.0's dims of every token are that batch's mean of its
    own raw output, with no gradient into its q, k and v; in evaluation they are `means`, which `measure` takes
    over every token of the windows; the other head is untouched either way."""
    model, x = biased_model(), ids()
    c, hs = model.config.n_embd, model.config.head_dim
    kept = KeptOff(model, [(1, 0)], "mean")
    raw, given = [], []
    proj = model.blocks[1].attn.c_proj
    hooks = [proj.register_forward_pre_hook(lambda m, a: raw.append(a[0].detach().clone()), prepend=True),
             proj.register_forward_pre_hook(lambda m, a: given.append(a[0].detach().clone()))]
    model.train()
    loss = model(x, x)[1]
    batch_mean = raw[0][..., :hs].mean((0, 1))
    torch.testing.assert_close(given[0][..., :hs], batch_mean.expand(*x.shape, hs), rtol=0, atol=1e-6)
    assert torch.equal(given[0][..., hs:], raw[0][..., hs:])
    loss.backward()
    grad = model.blocks[1].attn.c_attn.weight.grad  # rows: W_Q, W_K, W_V of every head, side by side
    for part in range(3):
        assert torch.count_nonzero(grad[part * c : part * c + hs]) == 0  # head 1.0 learns nothing
        assert torch.count_nonzero(grad[part * c + hs : (part + 1) * c]) > 0  # head 1.1 does
    windows = ids(1, 4, 16)
    kept.measure(model, windows)
    raw.clear()
    model.eval()
    with torch.no_grad():
        model(windows)
    torch.testing.assert_close(kept.means[1, :hs], raw[0][..., :hs].mean((0, 1)), rtol=0, atol=1e-6)
    given.clear()
    with torch.no_grad():
        model(x)
    assert torch.equal(given[0][..., :hs], kept.means[1, :hs].expand(*x.shape, hs))
    for hook in hooks:
        hook.remove()
    record = kept.record()
    assert record["heads"] == ["1.0"] and record["mode"] == "mean" and record["means"]["1.0"] == kept.means[1, :hs].tolist()


def test_train_heads_off_names_heads_and_layers_and_refuses_what_cannot_be():
    assert parse_heads_off(["1.1", "0"], 2, 3) == [(0, 0), (0, 1), (0, 2), (1, 1)]
    for names, message in ((["2.0"], "layer 2; this model has layers 0..1"), (["1.3"], "head 1.3 is not in this model"),
                           (["1.0", "1.0"], "head 1.0 is given twice"), (["0", "1"], "names every head"),
                           (["x"], 'names "x"'), (["1.a"], 'names "1.a"')):
        with pytest.raises(ModelInputError, match=re.escape(message)):
            parse_heads_off(names, 2, 3)
