"""Tests for hf/export_gpt2.py and hf/gpt2_names.py (GPT-2's names, which the import shares): an exported run
is the same model in transformers, token for token.

For a random model (every weight drawn, LayerNorms included, so a wrong name or a missing transpose
shows), a briefly trained one, one without biases and two with heads kept off (train.heads_off, folded into the
weights): transformers loads the export with no warnings,
and its logits, attention maps, greedy continuations and tokenizer equal ours. Then the CLI's refusals.
Needs the `hf` extra (transformers); skipped without it.

    python -m pytest tests/test_export_gpt2.py -q
"""

import json
import logging
import subprocess
import sys
import unicodedata
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from data.tokenizer import EOT, train_tokenizer  # noqa: E402
from model import GPT, GPTConfig  # noqa: E402
from hf.export_gpt2 import ExportError, check_expressible, export, gpt2_weights, main  # noqa: E402
from common.heads_off import HeadsOff  # noqa: E402
from model.sampling import generate  # noqa: E402
from storage.checkpoint import load_kept_off, load_model, save_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(block_size=16, n_layer=2, n_head=2, n_embd=32)
DOCS = [
    "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.",
    "오늘은 날씨가 맑아서 공원에 산책을 나갔습니다. 바람이 시원하고 하늘이 파랬어요!",
    "한국어 문장을 토큰으로 나누는 일은 생각보다 어렵습니다.  띄어쓰기가 두 번 들어가도\n줄이 바뀌어도 괜찮아야 합니다.",
    "모든 국민은 법 앞에 평등하다. 누구든지 성별, 종교 또는 사회적 신분에 의하여 차별을 받지 아니한다.",
    "서울에서 부산까지 기차로 세 시간쯤 걸립니다. 창밖으로 논과 산이 지나갑니다.",
] * 4
# Spaces (single, double, at the ends), a line break, an emoji and rare syllables/hanja (byte fallback),
# NFD jamo (the normalizer makes them NFC) and the special token written in the text.
PROBES = [
    "대한민국의 주권은 국민에게 있다.",
    "  두 칸  띄어쓰기와\n줄바꿈 ",
    "이모지 🙂👍🏽 와 드문 글자 똠방각하 韓國 뷁",
    unicodedata.normalize("NFD", "한글 자모로 풀어 쓴 문장"),
    f"{EOT}새 문서가 시작됩니다.",
]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(DOCS, vocab_size=400)


def save_run(model: GPT, tok, run_dir: Path, kept: HeadsOff | None = None) -> Path:
    """A run dir as train.py leaves it: last/ with the weights, config.json (with `kept`'s record: the heads kept off)
    and tokenizer.json."""
    save_model(model, run_dir / "last", extra_config={"note": "test run", **({"kept_off": kept.record()} if kept else {})})
    tok.save(str(run_dir / "last" / "tokenizer.json"))
    return run_dir


def random_model(tok, bias=True, mlp=True) -> GPT:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tok.get_vocab_size(), bias=bias, mlp=mlp, dropout=0.1, layer_norm_eps=1e-6,
                          init_std=0.05, **TINY))  # fmt: skip
    with torch.no_grad():  # large random values everywhere, so the maps are far from uniform
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


def trained_model(tok) -> GPT:
    """A few dozen AdamW steps on the documents, each begun with <|endoftext|> as data/prepare.py does."""
    torch.manual_seed(1)
    ids = torch.tensor([i for doc in DOCS for i in tok.encode(EOT + doc).ids])
    model = GPT(GPTConfig(vocab_size=tok.get_vocab_size(), dropout=0.1, **TINY))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small steps fastest on one thread, even more so on busy cores
    try:
        for step in range(40):
            starts = torch.randint(0, len(ids) - TINY["block_size"] - 1, (16,))
            window = torch.stack([ids[s : s + TINY["block_size"] + 1] for s in starts.tolist()])  # (B, T + 1)
            _, loss = model(window[:, :-1], window[:, 1:])
            opt.zero_grad()
            loss.backward()
            opt.step()
            first = loss.item() if step == 0 else first
    finally:
        torch.set_num_threads(threads)
    assert loss.item() < first - 1.0, "the fixture did not train"
    return model


def load_hf(out: Path, **kwargs):
    """GPT2LMHeadModel.from_pretrained(out) and every warning it logged or raised."""
    messages = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())
    hf_logger = logging.getLogger("transformers")  # transformers' loggers do not propagate to the root
    hf_logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hf, info = transformers.GPT2LMHeadModel.from_pretrained(out, output_loading_info=True, **kwargs)
    finally:
        hf_logger.removeHandler(handler)
    return hf, info, messages + [str(w.message) for w in caught]


def kept_off(tok, mode: str) -> tuple[GPT, HeadsOff]:
    """A random model with heads 0.1 and 1.0 kept off (train.heads_off), by random means or zeros: the export
    folds them into the weights (HeadsOff.fold)."""
    model = random_model(tok)
    kept = HeadsOff(model, [(0, 1), (1, 0)], mode)
    kept.means.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(2))
    return model, kept


@pytest.fixture(scope="module", params=["random", "trained", "no_bias", "attention_only", "heads_off_mean",
                                        "heads_off_zero"])
def exported(request, tok, tmp_path_factory):
    """(our model as load_model returns it, its transformers twin (eager attention), the export dir)."""
    make = {"random": random_model, "trained": trained_model, "no_bias": lambda t: random_model(t, bias=False),
            "attention_only": lambda t: random_model(t, mlp=False), "heads_off_mean": lambda t: kept_off(t, "mean"),
            "heads_off_zero": lambda t: kept_off(t, "zero")}
    base = tmp_path_factory.mktemp(request.param)
    made = make[request.param](tok)
    model, kept = made if isinstance(made, tuple) else (made, None)
    run = save_run(model, tok, base / "run", kept)
    out = export(run, base / "hf")
    hf, _, _ = load_hf(out, attn_implementation="eager")
    ours = load_model(run)
    load_kept_off(ours, run / "last")  # its heads kept off, as every command that opens the run keeps them
    return ours, hf, out


def probe_ids(tok, n=2) -> torch.Tensor:
    """n windows of block_size Korean tokens from the probes, (n, block_size)."""
    ids = [i for text in PROBES for i in tok.encode(text).ids]
    T = TINY["block_size"]
    assert len(ids) >= n * T
    return torch.tensor(ids[: n * T]).view(n, T)  # (B, T)


def test_config_spells_out_our_settings(exported, tok):
    ours, _, out = exported
    config = json.loads((out / "config.json").read_text())
    c = ours.config
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert (config["n_positions"], config["n_embd"], config["n_layer"], config["n_head"]) == (16, 32, 2, 2)
    assert config["vocab_size"] == tok.get_vocab_size() == c.vocab_size
    assert config["n_inner"] == 4 * 32
    assert config["activation_function"] == "gelu"  # nn.GELU() is the exact erf form
    assert config["layer_norm_epsilon"] == c.layer_norm_eps
    assert config["initializer_range"] == c.init_std  # back to model.init_std on import
    assert config["resid_pdrop"] == config["embd_pdrop"] == config["attn_pdrop"] == c.dropout == 0.1
    assert config["bos_token_id"] == config["eos_token_id"] == tok.token_to_id(EOT) == 0
    assert config["tie_word_embeddings"] is True
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json", "generation_config.json", "model.safetensors",
        "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
    ]  # fmt: skip
    assert len({p.stat().st_mode for p in out.iterdir()}) == 1  # the weights are as readable as the rest
    assert not any(p.name.startswith(".") for p in out.parent.iterdir()), "a temporary directory was left behind"


def test_loads_without_missing_or_unexpected_weights(exported):
    _, _, out = exported
    _, info, messages = load_hf(out)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert not info["error_msgs"]
    assert messages == []


def test_logits_equal_ours(exported, tok):
    ours, hf, out = exported
    idx = probe_ids(tok)  # (2, 16)
    expected, _ = ours(idx, all_logits=True)  # (B, T, V), our fast (SDPA) path
    with torch.no_grad():
        eager = hf(idx).logits
        sdpa = transformers.GPT2LMHeadModel.from_pretrained(out, attn_implementation="sdpa")(idx).logits
    assert not hf.training
    assert eager.shape == expected.shape == (2, 16, ours.config.vocab_size)
    torch.testing.assert_close(eager, expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(sdpa, expected, atol=1e-4, rtol=0)
    assert expected.std() > 0.1  # the comparison is not between two near-constant tensors


def test_attention_maps_equal_ours_for_every_layer_and_head(exported, tok):
    ours, hf, _ = exported
    idx = probe_ids(tok)
    maps = ours.attention_maps(idx)  # (B, L, nh, T, T)
    with torch.no_grad():
        attentions = hf(idx, output_attentions=True).attentions  # one (B, nh, T, T) per layer
    assert len(attentions) == ours.config.n_layer
    for layer, att in enumerate(attentions):
        assert att.shape == maps[:, layer].shape == (2, 2, 16, 16)
        torch.testing.assert_close(att, maps[:, layer], atol=1e-5, rtol=0)
    assert maps.max() > 0.5  # sharp maps, not a uniform average that any mix-up would reproduce


def test_greedy_generate_gives_our_tokens(exported, tok):
    ours, hf, _ = exported
    eot = tok.token_to_id(EOT)
    first, second = tok.encode("대한민국의 주권은 국민에게").ids, tok.encode("오늘은 날씨가 맑아서").ids
    prompts = torch.tensor([[eot] + first[:3], second[:4]])  # (2, 4)
    n = TINY["block_size"] - prompts.size(1)  # stay inside the learned positions
    expected = generate(ours, prompts, n, temperature=0, eos_token_id=eot)
    with torch.no_grad():
        got = hf.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=n, do_sample=False)
    assert got.tolist() == expected.tolist()
    assert expected.size(1) > prompts.size(1)


def test_tokenizer_gives_our_ids_and_text(exported, tok):
    _, _, out = exported
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    assert hf_tok.eos_token_id == hf_tok.bos_token_id == hf_tok.pad_token_id == tok.token_to_id(EOT)
    assert hf_tok.model_max_length == TINY["block_size"]
    assert any(t.startswith("<0x") for text in PROBES for t in tok.encode(text).tokens)  # byte fallback is tested
    for text in PROBES:
        ids = tok.encode(text).ids
        assert hf_tok(text)["input_ids"] == ids
        assert hf_tok.decode(ids) == tok.decode(ids, skip_special_tokens=False)
        assert hf_tok.decode(ids) == unicodedata.normalize("NFC", text)  # lossless, spaces and emoji included
        assert hf_tok.decode(ids, skip_special_tokens=True) == tok.decode(ids)


def test_pipeline_continues_like_our_greedy_decoding(exported, tok):
    ours, _, out = exported
    prompt = EOT + "대한민국의 주권은"  # generate.py also starts a prompt like a training document
    idx = torch.tensor([tok.encode(prompt).ids])
    n = TINY["block_size"] - idx.size(1)
    expected = generate(ours, idx, n, temperature=0, eos_token_id=tok.token_to_id(EOT))[0, idx.size(1) :]
    pipe = transformers.pipeline("text-generation", model=str(out), device="cpu")
    got = pipe(prompt, max_new_tokens=n, do_sample=False)[0]["generated_text"]
    assert got == prompt + tok.decode(expected.tolist())


def test_a_jamo_run_exports_to_the_same_ids_logits_and_nfc_text_in_transformers(tmp_path):
    """data.unit = "jamo": the tokenizer.json that splits syllables and joins them back loads in transformers as it
    is, encodes to our ids and decodes to the NFC text; the model gives our logits."""
    jamo = train_tokenizer(DOCS, vocab_size=400, unit="jamo")
    run = save_run(trained_model(jamo), jamo, tmp_path / "run")
    out = export(run, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(out)
    for text in PROBES:
        ids = jamo.encode(text).ids
        assert hf_tok(text)["input_ids"] == ids
        assert hf_tok.decode(ids) == unicodedata.normalize("NFC", text)
    assert hf_tok.convert_ids_to_tokens(jamo.encode("국").ids) == ["\u1100\u116e\u11a8"]  # pieces of jamo
    hf, _, messages = load_hf(out, attn_implementation="eager")
    assert messages == []
    idx = probe_ids(jamo)
    with torch.no_grad():
        torch.testing.assert_close(hf(idx).logits, load_model(run)(idx, all_logits=True)[0], atol=1e-4, rtol=0)


def test_bias_false_exports_zero_biases(tok):
    model = random_model(tok, bias=False)
    tensors = gpt2_weights(model)
    assert torch.equal(tensors["transformer.h.1.attn.c_attn.bias"], torch.zeros(96))
    assert torch.equal(tensors["transformer.ln_f.bias"], torch.zeros(32))
    # Conv1D stores (in, out): the transpose of nn.Linear's weight
    assert torch.equal(tensors["transformer.h.0.mlp.c_fc.weight"], model.blocks[0].mlp.c_fc.weight.detach().t())
    assert "lm_head.weight" not in tensors  # tied to wte, as in GPT-2


def test_refuses_options_gpt2_cannot_express(tok):
    @dataclass
    class RotaryConfig(GPTConfig):
        rotary: bool = True

    with pytest.raises(ExportError, match=r"model\.rotary = True"):
        check_expressible(RotaryConfig(**TINY))
    model = random_model(tok)
    model.lm_head.weight = torch.nn.Parameter(model.tok_emb.weight.detach() + 1)  # untied head
    with pytest.raises(ExportError, match="not tied"):
        gpt2_weights(model)


@pytest.fixture(scope="module")
def run(tok, tmp_path_factory) -> Path:
    return save_run(random_model(tok), tok, tmp_path_factory.mktemp("cli") / "run")


def run_main(argv, capsys) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def test_cli_refuses_a_missing_run_dir(tmp_path, capsys):
    code, err = run_main([tmp_path / "nope", tmp_path / "hf"], capsys)
    assert code == 2 and err.startswith("error: ") and "does not exist" in err and err.count("\n") == 1
    assert not (tmp_path / "hf").exists()
    code, err = run_main([tmp_path / "nope"], capsys)  # no OUT_DIR
    assert code == 2 and err.startswith("error: ") and "out_dir" in err and err.count("\n") == 1


def test_cli_refuses_a_damaged_checkpoint(run, tmp_path, capsys):
    damaged = tmp_path / "damaged"
    (damaged / "last").mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):
        (damaged / "last" / name).write_bytes((run / "last" / name).read_bytes())
    weights = (run / "last" / "model.safetensors").read_bytes()
    (damaged / "last" / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    code, err = run_main([damaged, tmp_path / "hf"], capsys)
    assert code == 2 and err.startswith("error: ") and "damaged or truncated" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged"]  # nothing half-written


def test_cli_refuses_a_checkpoint_without_tokenizer(run, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for name in ("config.json", "model.safetensors"):
        (ckpt / name).write_bytes((run / "last" / name).read_bytes())
    code, err = run_main([ckpt, tmp_path / "hf"], capsys)
    assert code == 2 and "tokenizer.json is missing" in err
    (ckpt / "tokenizer.json").write_text("{not json", encoding="utf-8")
    code, err = run_main([ckpt, tmp_path / "hf"], capsys)
    assert code == 2 and "tokenizer.json is damaged" in err


def test_cli_keeps_a_non_empty_out_dir_unless_forced(run, tmp_path, capsys):
    out = tmp_path / "hf"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    code, err = run_main([run, out], capsys)
    assert code == 2 and "not empty" in err and "--force" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]

    code, err = run_main([run, out, "--force"], capsys)  # --force replaces an export, never what it did not write
    assert code == 2 and "holds notes.txt, which this command does not write" in err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]

    (out / "notes.txt").rename(out / "config.json")  # now an (older) export's file
    main([str(run), str(out), "--force"])
    assert "exported" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["model_type"] == "gpt2" and (out / "model.safetensors").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # the old copy and the temp dir are gone

    empty = tmp_path / "empty"
    empty.mkdir()
    main([str(run / "last"), str(empty)])  # an empty directory needs no --force
    assert (empty / "config.json").is_file()


def test_cli_force_onto_a_symlinked_directory_replaces_what_it_points_to(run, tmp_path, capsys):
    target = tmp_path / "target"
    target.mkdir()
    (target / "model.safetensors").write_text("old", encoding="utf-8")
    (tmp_path / "link").symlink_to(target)
    main([str(run), str(tmp_path / "link"), "--force"])
    assert "exported" in capsys.readouterr().out
    assert (tmp_path / "link").is_symlink() and (target / "config.json").is_file()
    assert (target / "model.safetensors").read_bytes() != b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target"]  # no old copy or temp dir left


def test_cli_never_writes_over_the_checkpoint(run, capsys):
    code, err = run_main([run, run, "--force"], capsys)
    assert code == 2 and "contains the checkpoint" in err
    assert (run / "last" / "model.safetensors").is_file()


@pytest.mark.slow
def test_cli_as_a_module_prints_one_line_and_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "hf.export_gpt2", str(tmp_path / "missing"), str(tmp_path / "hf")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
