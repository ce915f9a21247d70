"""Tests for hf/import_gpt2.py: an imported Hugging Face GPT-2 is the same model here, token for token.

Random `GPT2LMHeadModel`s are built here (each activation; a byte-level BPE tokenizer and a `▁`-style
one made with the tokenizers library, the latter with KoGPT2's special-token ids) and saved with
save_pretrained. After the import our logits, attention maps and greedy tokens equal transformers',
meta.json names the model's own end-of-text token, and an export gives back the original tensors.
Then the refusals, each one line through `main` with exit code 2 and nothing written.
Needs the `hf` extra (transformers); skipped without it.

    python -m pytest tests/test_import_gpt2.py -q
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch
from tokenizers import Tokenizer

transformers = pytest.importorskip("transformers")

from data.tokenizer import tokenizer_hash  # noqa: E402
from hf.export_gpt2 import export  # noqa: E402
from hf.import_gpt2 import import_hf, main  # noqa: E402
from model.sampling import generate  # noqa: E402
from storage.checkpoint import load_model  # noqa: E402
from tests.tiny_hf import N_POSITIONS, PROMPT, TOKENIZERS, eot_of, metaspace_tokenizer, save_hf_model  # noqa: E402

@pytest.fixture(scope="module", params=[(k, a) for k in TOKENIZERS for a in ("gelu", "gelu_new", "gelu_pytorch_tanh")],
                ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def imported(request, tmp_path_factory):
    """(transformers' model (eager attention), ours after the import, the tokenizer, its kind, src, out)."""
    kind, activation = request.param
    base = tmp_path_factory.mktemp(f"{kind}-{activation}")
    tok = TOKENIZERS[kind]()
    save_hf_model(tok, base / "src", eot_of(kind)[1], activation)
    hf = transformers.GPT2LMHeadModel.from_pretrained(base / "src", attn_implementation="eager").eval()
    assert main([str(base / "src"), str(base / "out")]) == 0
    return hf, load_model(base / "out"), tok, kind, base / "src", base / "out"


def prompt_ids(tok, n=N_POSITIONS) -> torch.Tensor:
    ids = tok.encode(PROMPT).ids
    assert len(ids) >= 12
    return torch.tensor([ids[:n]])  # (1, T)


def test_logits_equal_transformers(imported):
    hf, ours, tok, _, _, _ = imported
    idx = prompt_ids(tok)
    with torch.no_grad():
        expected = hf(idx).logits  # (1, T, V)
    got, _ = ours(idx, all_logits=True)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)
    assert expected.std() > 0.5  # not two near-constant tensors


def test_attention_maps_equal_transformers(imported):
    hf, ours, tok, _, _, _ = imported
    idx = prompt_ids(tok)
    _, maps = ours.forward_with_attention(idx)  # (1, L, nh, T, T)
    with torch.no_grad():
        attentions = hf(idx, output_attentions=True).attentions  # L x (1, nh, T, T)
    assert len(attentions) == maps.size(1) == 2
    for layer, att in enumerate(attentions):
        torch.testing.assert_close(maps[:, layer], att, atol=1e-5, rtol=0)
    assert maps.max() > 0.5  # sharp maps


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_tokens_equal_transformers(imported, use_cache):
    hf, ours, tok, _, _, _ = imported
    idx = prompt_ids(tok, 6)
    n = N_POSITIONS - idx.size(1)  # stay inside the learned positions, where both are defined
    expected = hf.generate(idx, attention_mask=torch.ones_like(idx), max_new_tokens=n, do_sample=False,
                           eos_token_id=None, pad_token_id=0)  # fmt: skip
    got = generate(ours, idx, n, temperature=0, use_cache=use_cache)
    assert got.tolist() == expected.tolist()
    assert len(set(got[0, 6:].tolist())) > 1  # not one token repeated


def test_the_checkpoint_carries_the_model_s_settings_and_tokenizer(imported):
    _, ours, tok, kind, src, out = imported
    hf_config = json.loads((src / "config.json").read_text())
    c = ours.config
    assert (c.block_size, c.n_embd, c.n_layer, c.n_head) == (N_POSITIONS, 32, 2, 2)
    assert c.vocab_size == tok.get_vocab_size() + 3 and c.activation == hf_config["activation_function"]
    assert c.layer_norm_eps == 1e-5 and c.bias
    assert ours.lm_head.weight is ours.tok_emb.weight
    assert "lm_head.weight" not in safetensors.torch.load_file(out / "model.safetensors")  # stored once
    assert (out / "tokenizer.json").read_bytes() == (src / "tokenizer.json").read_bytes()
    meta = json.loads((out / "meta.json").read_text())
    eot, eot_id = eot_of(kind)
    assert meta["eot_token"] == eot and meta["eot_id"] == eot_id == tok.token_to_id(eot)
    assert meta["vocab_size"] == tok.get_vocab_size() and meta["dtype"] == "uint16"
    assert meta["tokenizer_hash"] == tokenizer_hash(Tokenizer.from_file(str(out / "tokenizer.json")))
    assert meta["imported_from"] == str(src.resolve())
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "meta.json", "model.safetensors", "tokenizer.json"]
    assert not any(p.name.startswith(".") for p in out.parent.iterdir()), "a temporary directory was left behind"


def test_import_then_export_gives_back_the_original_tensors(imported, tmp_path):
    _, _, _, kind, src, out = imported
    export(out, tmp_path / "again")
    original = safetensors.torch.load_file(src / "model.safetensors")
    again = safetensors.torch.load_file(tmp_path / "again" / "model.safetensors")
    assert sorted(again) == sorted(original)
    for name, t in original.items():
        assert again[name].dtype == t.dtype and torch.equal(again[name], t), name
    hf_config = json.loads((src / "config.json").read_text())
    config = json.loads((tmp_path / "again" / "config.json").read_text())
    for key in ("activation_function", "n_positions", "vocab_size", "layer_norm_epsilon", "eos_token_id"):
        assert config[key] == hf_config[key], key
    special = json.loads((tmp_path / "again" / "special_tokens_map.json").read_text())
    assert special["eos_token"] == eot_of(kind)[0]


def test_a_jamo_run_comes_back_from_its_export_with_equal_logits(tmp_path):
    """data.unit = "jamo": exported, then imported, the checkpoint computes the same logits with the same tokenizer."""
    from data.tokenizer import train_tokenizer
    from tests.test_export_gpt2 import DOCS, PROBES, random_model, save_run

    jamo = train_tokenizer(DOCS, vocab_size=400, unit="jamo")
    run = save_run(random_model(jamo), jamo, tmp_path / "run")
    export(run, tmp_path / "hf")
    assert main([str(tmp_path / "hf"), str(tmp_path / "back")]) == 0
    back = Tokenizer.from_file(str(tmp_path / "back" / "tokenizer.json"))
    assert tokenizer_hash(back) == tokenizer_hash(jamo)
    idx = torch.tensor([jamo.encode(" ".join(PROBES)).ids[:16]])  # (1, 16)
    expected, _ = load_model(run)(idx, all_logits=True)
    got, _ = load_model(tmp_path / "back")(idx, all_logits=True)
    assert idx.size(1) == 16 and torch.equal(got, expected)


@pytest.fixture(scope="module")
def tok():
    return metaspace_tokenizer()


@pytest.fixture()
def src(tok, tmp_path) -> Path:
    save_hf_model(tok, tmp_path / "src", eot_id=1)
    return tmp_path / "src"


def edit_json(file: Path, **changes):
    obj = json.loads(file.read_text())
    for key, value in changes.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    file.write_text(json.dumps(obj))


def test_the_end_of_text_token_comes_from_the_tokenizer_files_when_config_json_has_none(src, tmp_path):
    edit_json(src / "config.json", eos_token_id=None)
    (src / "tokenizer_config.json").write_text(json.dumps({"eos_token": {"content": "<sys>", "special": True}}))
    import_hf(src, tmp_path / "a")
    assert json.loads((tmp_path / "a" / "meta.json").read_text())["eot_token"] == "<sys>"
    (src / "tokenizer_config.json").unlink()
    (src / "special_tokens_map.json").write_text(json.dumps({"eos_token": "<usr>"}))
    import_hf(src, tmp_path / "b")
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert (meta["eot_token"], meta["eot_id"]) == ("<usr>", 2)


def test_a_pytorch_model_bin_in_openai_s_layout_imports_the_same_weights(src, tmp_path):
    """Old files: no `transformer.` prefix, the causal-mask buffers saved, the tied head stored twice."""
    tensors = safetensors.torch.load_file(src / "model.safetensors")
    old = {k.removeprefix("transformer."): t for k, t in tensors.items()}
    for layer in range(2):
        old[f"h.{layer}.attn.bias"] = torch.ones(1, 1, N_POSITIONS, N_POSITIONS).tril()
        old[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    old["lm_head.weight"] = tensors["transformer.wte.weight"].clone()
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(src / name, legacy / name)
    torch.save(old, legacy / "pytorch_model.bin")
    import_hf(src, tmp_path / "a")
    import_hf(legacy, tmp_path / "b")
    a = safetensors.torch.load_file(tmp_path / "a" / "model.safetensors")
    b = safetensors.torch.load_file(tmp_path / "b" / "model.safetensors")
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_a_hub_id_is_read_from_the_local_cache_only(src, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "cache"
    snapshot = cache / "hub" / "models--someone--tiny-gpt2" / "snapshots" / "0123abcd"
    shutil.copytree(src, snapshot)
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("0123abcd")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(cache))
    assert main(["someone/tiny-gpt2", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["imported_from"] == "someone/tiny-gpt2@0123abcd"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "elsewhere"))  # takes precedence over HF_HOME
    capsys.readouterr()
    assert main(["someone/tiny-gpt2", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing is downloaded" in err and "huggingface-cli download" in err
    assert not (tmp_path / "out2").exists()


def refused(argv, capsys) -> str:
    """main(argv)'s one stderr line, after checking it returned 2 and wrote nothing."""
    out = Path(argv[1])
    before = sorted(p.name for p in out.parent.iterdir())
    capsys.readouterr()
    assert main([str(a) for a in argv]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert sorted(p.name for p in out.parent.iterdir()) == before  # no OUT, no temporary directory
    return captured.err


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"model_type": "llama"}, "model_type 'llama'"),
        ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx = true"),
        ({"reorder_and_upcast_attn": True}, "reorder_and_upcast_attn = true"),
        ({"add_cross_attention": True}, "add_cross_attention = true"),
        ({"scale_attn_weights": False}, "scale_attn_weights = false"),
        ({"tie_word_embeddings": False}, "tie_word_embeddings = false"),
        ({"n_inner": 64}, "n_inner = 64"),
        ({"activation_function": "relu"}, "activation_function = 'relu'"),
        ({"n_layer": None}, "lacks n_layer"),
        ({"n_positions": 24}, "transformer.wpe.weight has shape (32, 32) but config.json implies (24, 32)"),
        ({"n_layer": 3}, "lacks 12 tensors (transformer.h.2."),
        ({"n_head": 3}, "not divisible by model.n_head = 3"),
        ({"eos_token_id": 999}, "eos_token_id 999, which tokenizer.json does not have"),
    ],
)
def test_refuses_settings_the_network_does_not_implement(src, tmp_path, capsys, changes, words):
    edit_json(src / "config.json", **changes)
    err = refused([src, tmp_path / "out"], capsys)
    assert words in err


def test_refuses_an_untied_head(src, tmp_path, capsys):
    tensors = safetensors.torch.load_file(src / "model.safetensors")
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"] + 1
    safetensors.torch.save_file(tensors, src / "model.safetensors")
    assert "differs from wte (an untied head)" in refused([src, tmp_path / "out"], capsys)


def test_refuses_missing_or_damaged_files(src, tmp_path, capsys):
    (src / "tokenizer.json").rename(tmp_path / "tokenizer.json")
    assert "has no tokenizer.json" in refused([src, tmp_path / "out"], capsys)
    (tmp_path / "tokenizer.json").rename(src / "tokenizer.json")
    weights = (src / "model.safetensors").read_bytes()
    (src / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    assert "damaged or truncated" in refused([src, tmp_path / "out"], capsys)
    (src / "model.safetensors").unlink()
    assert "has no model.safetensors or pytorch_model.bin" in refused([src, tmp_path / "out"], capsys)
    (src / "config.json").unlink()
    assert "has no config.json" in refused([src, tmp_path / "out"], capsys)
    assert "does not exist" in refused([tmp_path / "no such dir", tmp_path / "out"], capsys)


def test_refuses_a_tokenizer_with_more_tokens_than_embedding_rows(tok, tmp_path, capsys):
    save_hf_model(tok, tmp_path / "src", eot_id=1, extra_rows=-5)
    err = refused([tmp_path / "src", tmp_path / "out"], capsys)
    assert f"has {tok.get_vocab_size()} tokens but the embedding only {tok.get_vocab_size() - 5} rows" in err


class Payload:
    """Unpickling this calls open(marker, "w"): code run by merely loading the file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_a_malicious_pickle_is_refused_and_never_run(src, tmp_path, capsys):
    marker = tmp_path / "pwned"
    (src / "model.safetensors").unlink()
    state = {"transformer.wte.weight": torch.zeros(3, 32), "payload": Payload(marker)}
    torch.save(state, src / "pytorch_model.bin")
    err = refused([src, tmp_path / "out"], capsys)
    assert "never unpickled" in err
    assert not marker.exists()
    torch.load(src / "pytorch_model.bin", weights_only=False)  # the payload works: a full unpickle runs it
    assert marker.exists()


def test_refuses_a_non_empty_out_unless_forced(src, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert "not empty" in refused([src, out], capsys)
    assert "holds notes.txt, which this command does not write" in refused([src, out, "--force"], capsys)
    (out / "notes.txt").rename(out / "meta.json")  # now an (older) import's file: --force replaces that
    assert main([str(src), str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "meta.json", "model.safetensors", "tokenizer.json"]
    assert "contains the checkpoint" in refused([src, src, "--force"], capsys)
    capsys.readouterr()
    assert main([str(src)]) == 2  # no OUT: argparse's message, as one line
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "out" in err and err.count("\n") == 1


@pytest.mark.slow
def test_the_module_runs_as_a_command(tmp_path):
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-m", "hf.import_gpt2", str(tmp_path / "missing"), str(tmp_path / "o")],
                            cwd=root, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    assert result.returncode == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_an_attention_only_model_comes_back_attention_only_and_fine_tunes_as_one(tmp_path, data_cache):
    # exported, its MLPs are zeros that GPT-2 computes as nothing; imported, it is mlp = false again (not an MLP model
    # of zeros), the same logits, and `train.init_from` of the export takes --model.mlp=false
    import train
    from tests.conftest import TINY

    base = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.max_steps=2", "--train.eval_interval=2"]
    assert train.main([*base, "--model.mlp=false", "--out", str(tmp_path / "run")]) == 0
    export(tmp_path / "run", tmp_path / "hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["mlp"] is False
    import_hf(tmp_path / "hf", tmp_path / "back")
    original, back = load_model(tmp_path / "run" / "last"), load_model(tmp_path / "back")
    assert back.config.mlp is False and not any("mlp" in name for name, _ in back.named_parameters())
    ids = torch.tensor([[1, 5, 9, 2, 7]])
    torch.testing.assert_close(back(ids, all_logits=True)[0], original(ids, all_logits=True)[0], atol=1e-5, rtol=1e-5)
    assert train.main([*base, "--model.mlp=false", f"--train.init_from={tmp_path / 'hf'}", "--out",
                       str(tmp_path / "tuned")]) == 0
