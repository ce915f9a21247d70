"""Checkpoints (storage/checkpoint.py): save/load round trip, run-dir resolution, atomic writes
(storage/atomic.py), damaged files -> CheckpointError.

python -m pytest tests/test_checkpoint.py -q
"""

import json

import pytest
import safetensors.torch
import torch

from cli.errors import UserError
from model import GPT, GPTConfig
from storage.atomic import atomic_write
from storage.checkpoint import CheckpointError, load_model, save_model
from tests.conftest import TINY_MODEL as TINY



def saved_model(directory, **overrides):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**TINY, **overrides})).eval()
    save_model(model, directory, extra_config={"train": {"lr": 3e-4}})
    return model


def test_round_trip_gives_identical_logits_and_keeps_the_head_tied(tmp_path):
    model = saved_model(tmp_path / "ckpt")
    loaded = load_model(tmp_path / "ckpt")
    assert not loaded.training and loaded.config == model.config
    assert loaded.lm_head.weight is loaded.tok_emb.weight
    idx = torch.randint(0, 64, (2, 10))
    assert torch.equal(loaded(idx, all_logits=True)[0], model(idx, all_logits=True)[0])
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config == {"model": {**TINY, "dropout": 0.0, "bias": True, "layer_norm_eps": 1e-5, "activation": "gelu",
                                "mlp": True, "init_std": 0.02},
                      "train": {"lr": 3e-4}}
    stored = safetensors.torch.load_file(tmp_path / "ckpt" / "model.safetensors")
    assert "lm_head.weight" not in stored and "tok_emb.weight" in stored  # the tied matrix is stored once
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["config.json", "model.safetensors"]


def test_a_checkpoint_from_before_the_activation_setting_loads_as_exact_gelu(tmp_path):
    model = saved_model(tmp_path, activation="gelu")
    config = json.loads((tmp_path / "config.json").read_text())
    del config["model"]["activation"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = load_model(tmp_path)
    assert loaded.config.activation == "gelu" and loaded.blocks[0].mlp.gelu.approximate == "none"
    idx = torch.randint(0, 64, (2, 10))
    assert torch.equal(loaded(idx, all_logits=True)[0], model(idx, all_logits=True)[0])


def test_the_activation_setting_picks_the_gelu_form(tmp_path):
    model = saved_model(tmp_path, activation="gelu_new")
    loaded = load_model(tmp_path)
    assert {b.mlp.gelu.approximate for b in loaded.blocks} == {"tanh"}
    x = torch.linspace(-4, 4, 101)
    exact = x * 0.5 * (1 + torch.erf(x / 2**0.5))
    tanh = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    torch.testing.assert_close(loaded.blocks[0].mlp.gelu(x), tanh, rtol=0, atol=1e-6)
    assert (tanh - exact).abs().max() > 1e-4  # the two forms are told apart
    idx = torch.randint(0, 64, (2, 10))
    assert torch.equal(loaded(idx, all_logits=True)[0], model(idx, all_logits=True)[0])


def test_run_dir_loads_best_then_last(tmp_path):
    saved_model(tmp_path / "run" / "last")
    assert load_model(tmp_path / "run").config.n_embd == 32
    saved_model(tmp_path / "run" / "best", n_embd=16)
    assert load_model(tmp_path / "run").config.n_embd == 16
    assert load_model(tmp_path / "run" / "last").config.n_embd == 32
    assert load_model(tmp_path / "run" / "last" / "model.safetensors").config.n_embd == 32


def test_missing_paths_and_files(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        load_model(tmp_path / "empty")
    saved_model(tmp_path / "ckpt")
    (tmp_path / "ckpt" / "config.json").unlink()
    with pytest.raises(CheckpointError, match="config.json is missing"):
        load_model(tmp_path / "ckpt")


@pytest.mark.parametrize("keep", [0.5, 0.01])
def test_truncated_weights(tmp_path, keep):
    saved_model(tmp_path)
    file = tmp_path / "model.safetensors"
    data = file.read_bytes()
    file.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(CheckpointError, match="damaged or truncated"):
        load_model(tmp_path)


def test_garbage_weights(tmp_path):
    saved_model(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(CheckpointError, match="damaged or truncated"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    "text, words",
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', 'is not a JSON object'),
        ('{"train": {}}', 'no "model" object'),
        ('{"model": {"vocab_size": 64, "block_size": 16}}', "lacks model.n_layer, model.n_head, model.n_embd"),
        (
            '{"model": {"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 3, "n_embd": 32}}',
            'bad "model" settings',
        ),
        (
            '{"model": {"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32, "x": 1}}',
            'bad "model" settings',
        ),
    ],
)
def test_bad_config_json(tmp_path, text, words):
    saved_model(tmp_path)
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(CheckpointError) as err:
        load_model(tmp_path)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_weights_that_do_not_match_the_config(tmp_path):
    saved_model(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"]["vocab_size"] = 65
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        CheckpointError, match=r"tok_emb.weight has shape \(64, 32\) but config.json implies \(65, 32\)"
    ):
        load_model(tmp_path)
    config["model"]["vocab_size"], config["model"]["n_layer"] = 64, 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"lacks 12 tensors \(blocks.2.attn.c_attn.bias, "):
        load_model(tmp_path)


def test_checkpoint_error_is_a_user_error():
    assert issubclass(CheckpointError, UserError)


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "config.json"
    target.write_text("old")

    def fail(tmp):
        with open(tmp, "w") as f:
            f.write("half")
        raise OSError("disk full")

    with pytest.raises(UserError, match=r"cannot write .*config\.json \(disk full\)"):
        atomic_write(target, fail)
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_sizes_in_config_json_are_checked_against_the_weights_header_before_allocating(tmp_path):
    saved_model(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model"]["vocab_size"] = 16_000_000  # 2 GB of embedding: allocating it first would waste seconds
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"tok_emb.weight has shape \(64, 32\) but config.json implies \(16000000, 32\)"):
        load_model(tmp_path)


def test_load_never_unpickles(tmp_path, monkeypatch):
    saved_model(tmp_path)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load called"))
    load_model(tmp_path)
