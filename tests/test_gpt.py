"""GPTConfig validation (model/config.py) and the GPT network (model/gpt.py): shapes, causality, attention maps,
init, loss, counts.

python -m pytest tests/test_gpt.py -q
"""

import math

import pytest
import torch

from cli.errors import ModelConfigError, ModelInputError, UserError
from model import GPT, GPTConfig
from model.attention import reference_attention
from tests.conftest import TINY_MODEL as TINY



def tiny_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**TINY, **overrides})).eval()


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"n_embd": 30, "n_head": 4}, "not divisible by model.n_head"),
        ({"n_layer": 0}, "model.n_layer = 0 must be a positive integer"),
        ({"block_size": -1}, "model.block_size"),
        ({"vocab_size": 2.5}, "model.vocab_size"),
        ({"n_head": True}, "model.n_head"),
        ({"dropout": 1.0}, "model.dropout = 1.0 must be a number in [0, 1)"),
        ({"dropout": -0.1}, "model.dropout"),
        ({"bias": "yes"}, "model.bias"),
        ({"layer_norm_eps": 0}, "model.layer_norm_eps"),
        ({"activation": "relu"}, "model.activation = 'relu' is not one of 'gelu', 'gelu_new', 'gelu_pytorch_tanh'"),
    ],
)
def test_config_rejects_bad_values_with_a_clear_message(overrides, words):
    with pytest.raises(ModelConfigError) as err:
        GPTConfig(**{**TINY, **overrides})
    assert words in str(err.value)
    assert isinstance(err.value, UserError) and isinstance(err.value, ValueError)


def test_config_typo_is_an_error():
    with pytest.raises(TypeError):
        GPTConfig(**TINY, n_layers=3)


def test_modules_are_named_as_the_contract_says_and_the_head_is_tied():
    model = tiny_model()
    block = model.blocks[0]
    assert {"tok_emb", "pos_emb", "drop", "blocks", "ln_f", "lm_head"} <= dict(model.named_children()).keys()
    assert block.attn.c_attn.weight.shape == (96, 32) and block.attn.c_proj.weight.shape == (32, 32)
    assert block.mlp.c_fc.weight.shape == (128, 32) and block.mlp.c_proj.weight.shape == (32, 128)
    assert model.lm_head.weight is model.tok_emb.weight


def test_gpt2_initialisation():
    model = tiny_model(n_embd=64, n_head=2)
    residual_std = 0.02 / math.sqrt(2 * 2)
    for block in model.blocks:
        for weight in (block.attn.c_proj.weight, block.mlp.c_proj.weight):
            assert abs(weight.std().item() - residual_std) < 0.1 * residual_std
        assert abs(block.mlp.c_fc.weight.std().item() - 0.02) < 0.002
        assert all(torch.all(b == 0) for b in (block.attn.c_attn.bias, block.attn.c_proj.bias, block.mlp.c_fc.bias))
    assert abs(model.tok_emb.weight.std().item() - 0.02) < 0.002


def test_init_std_scales_every_initial_weight():
    model = tiny_model(n_embd=64, n_head=2, init_std=0.1)
    assert abs(model.tok_emb.weight.std().item() - 0.1) < 0.01
    assert abs(model.pos_emb.weight.std().item() - 0.1) < 0.01
    assert abs(model.blocks[0].attn.c_attn.weight.std().item() - 0.1) < 0.01
    assert abs(model.blocks[1].attn.c_proj.weight.std().item() - 0.1 / math.sqrt(2 * 2)) < 0.01


def test_an_attention_only_model_has_no_mlp_and_adds_only_attention_to_the_stream():
    model = tiny_model(mlp=False)
    assert all(block.mlp is None and block.ln_2 is None for block in model.blocks)
    assert not any(".mlp." in name or ".ln_2." in name for name, _ in model.named_parameters())
    assert model.num_params() == tiny_model().num_params() - 2 * (8 * 32 * 32 + 5 * 32 + 2 * 32)  # per layer
    idx = torch.randint(0, 64, (2, 10))
    with torch.no_grad():  # by hand: the residual stream is the embeddings plus each block's attention output
        x = model.tok_emb(idx) + model.pos_emb.weight[:10]
        for block in model.blocks:
            x = x + block.attn(block.ln_1(x))[0]
        torch.testing.assert_close(model(idx, all_logits=True)[0], model.lm_head(model.ln_f(x)))


def test_forward_shapes_with_and_without_targets():
    model = tiny_model()
    idx = torch.randint(0, 64, (3, 10))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 10, 64) and loss.shape == ()
    last, none = model(idx)
    assert last.shape == (3, 1, 64) and none is None
    every, _ = model(idx, all_logits=True)
    assert every.shape == (3, 10, 64)
    torch.testing.assert_close(every, logits)
    torch.testing.assert_close(last[:, 0], logits[:, -1])


def test_targets_of_minus_one_are_ignored():
    model = tiny_model()
    idx, targets = torch.randint(0, 64, (2, 8)), torch.randint(0, 64, (2, 8))
    logits, _ = model(idx)
    masked = targets.clone()
    masked[:, :5] = -1
    _, loss = model(idx, masked)
    logits, _ = model(idx, all_logits=True)
    expected = torch.nn.functional.cross_entropy(logits[:, 5:].reshape(-1, 64), targets[:, 5:].reshape(-1))
    torch.testing.assert_close(loss, expected)


def test_sequence_longer_than_block_size_is_refused_with_the_limit():
    model = tiny_model()
    with pytest.raises(ModelInputError, match="block_size of 16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    cache = model.new_kv_cache(1)
    model(torch.zeros(1, 10, dtype=torch.long), kv_cache=cache)
    with pytest.raises(ModelInputError, match="at most 6 tokens"):
        model(torch.zeros(1, 7, dtype=torch.long), kv_cache=cache)


def test_changing_a_token_changes_no_earlier_logit():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 12))
    changed = idx.clone()
    changed[:, 7] = (idx[:, 7] + 1) % 64
    before, _ = model(idx, all_logits=True)
    after, _ = model(changed, all_logits=True)
    torch.testing.assert_close(before[:, :7], after[:, :7], atol=0, rtol=0)
    assert not torch.allclose(before[:, 7:], after[:, 7:])


def test_forward_with_attention_gives_the_same_logits_and_proper_maps():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 9))
    logits, maps = model.forward_with_attention(idx)
    fast, _ = model(idx, all_logits=True)
    torch.testing.assert_close(logits, fast, atol=1e-5, rtol=0)
    assert maps.shape == (2, 2, 2, 9, 9)  # (B, n_layer, n_head, T, T)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, 2, 9))
    assert torch.all(maps.triu(diagonal=1) == 0)
    assert torch.equal(model.attention_maps(idx), maps)


def test_maps_are_the_weights_each_block_computes_from_its_own_q_and_k():
    model = tiny_model()
    idx = torch.randint(0, 64, (2, 9))
    inputs = []  # what each attention layer receives (the ln_1 output), caught by a hook
    hooks = [b.attn.register_forward_hook(lambda m, args, out: inputs.append(args[0])) for b in model.blocks]
    _, maps = model.forward_with_attention(idx)
    for hook in hooks:
        hook.remove()
    for layer, (block, x) in enumerate(zip(model.blocks, inputs)):
        q, k, v = block.attn.c_attn(x).split(32, dim=2)  # (B, T, C) each
        q, k, v = (t.view(2, 9, 2, 16).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        _, att = reference_attention(q, k, v, causal=True)
        torch.testing.assert_close(maps[:, layer], att, atol=1e-6, rtol=0)


def test_loss_at_init_is_about_ln_vocab():
    model = tiny_model()
    torch.manual_seed(1)
    idx, targets = torch.randint(0, 64, (8, 16)), torch.randint(0, 64, (8, 16))
    _, loss = model(idx, targets)
    assert abs(loss.item() - math.log(64)) < 0.1


def test_a_few_steps_overfit_one_batch():
    model = tiny_model().train()
    torch.manual_seed(1)
    idx = torch.randint(0, 64, (4, 16))
    x, y = idx[:, :-1], idx[:, 1:]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    _, first = model(x, y)
    for _ in range(40):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.3 * first.item()


def test_dropout_is_active_in_training_and_off_in_eval():
    model = tiny_model(dropout=0.2)
    idx = torch.randint(0, 64, (2, 8))
    assert torch.equal(model(idx)[0], model(idx)[0])
    model.train()
    assert not torch.equal(model(idx)[0], model(idx)[0])


def test_model_without_biases_runs():
    model = tiny_model(bias=False)
    assert not any(name.endswith("bias") for name, _ in model.named_parameters())
    logits, loss = model(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long))
    assert logits.shape == (1, 4, 64) and torch.isfinite(loss)


def test_parameter_count_and_flops_by_hand():
    model = tiny_model()
    # tok 64*32 = 2048, pos 16*32 = 512, ln_f 64; per block: ln_1 64, c_attn 32*96+96 = 3168,
    # c_proj 32*32+32 = 1056, ln_2 64, c_fc 32*128+128 = 4224, c_proj 128*32+32 = 4128 -> 12704
    assert model.num_params() == 2048 + 512 + 64 + 2 * 12704 == 28032
    assert model.num_params(non_embedding=True) == 64 + 2 * 12704 == 25472
    # 6 * (non-embedding + the tied head 2048) + 12 * L * d * T
    assert model.flops_per_token(16) == 6 * (25472 + 2048) + 12 * 2 * 32 * 16
