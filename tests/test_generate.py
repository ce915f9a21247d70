"""End-to-end tests of generate.py and the inference and inspection APIs with a tiny model trained once per session:
finding and loading a run (inference/runs.py), scoring (inference/scoring.py), the maps (inspection/maps.py), the
held-out text the roles are measured on (inspection/heldout.py).

    python -m pytest tests/test_generate.py -q

The fixture prepares the built-in corpus with a 512-token vocabulary (so many syllables are spelled
with byte tokens), trains a 2-layer GPT for a few dozen steps and saves it as a run: runs/tiny/last/
with the weights, config.json, tokenizer.json and meta.json, as train.py does.
"""

import base64
import html
import json
import math
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import generate
from inference import find_latest_run, generate_text, load_run, score_text, stream_text
from common.heads_off import HeadsOff
from inspection import compute, draw_head, load_npz, token_labels
from data.token_bytes import byte_of_token
from inference.scoring import score_ids
from inspection.heldout import held_out_ids, held_out_means, held_out_windows, usable_ids
from inspection.trace import load_trace
from inspection.views.maps import STAT_NAMES
from inspection.views.roles import ROLES, induction_sequences, losses, roles_from_record
from storage.checkpoint import save_model
from tests.conftest import CHROMIUM, console_errors, render

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "대한민국은"
HANGUL = re.compile(r"[\uac00-\ud7a3]")


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory):
    from data.config import DataConfig
    from data.loader import load_tokens
    from data.prepare import prepare
    from model import GPT, GPTConfig

    root = tmp_path_factory.mktemp("generate")
    prepared = prepare(DataConfig(vocab_size=512, cache_dir=str(root / "cache")), verbose=False)
    tokens = torch.from_numpy(np.asarray(load_tokens(prepared.dir / "train.bin", prepared.meta["dtype"]), dtype=np.int64))
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=prepared.meta["vocab_size"], block_size=16, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    for _ in range(60):
        ix = torch.randint(len(tokens) - 17, (16,), generator=g)
        x = torch.stack([tokens[i : i + 16] for i in ix])  # (B, T)
        y = torch.stack([tokens[i + 1 : i + 17] for i in ix])
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    run = root / "runs" / "tiny"
    save_model(model.eval(), run / "last", extra_config={"data": prepared.meta["data"]})
    shutil.copy(prepared.tokenizer_path, run / "last" / "tokenizer.json")
    shutil.copy(prepared.dir / "meta.json", run / "last" / "meta.json")
    return run


@pytest.fixture(scope="session")
def run(run_dir):
    return load_run(run_dir, device="cpu")


def cli(argv, capsys):
    """generate.main in this process: (exit code, stdout, stderr)."""
    code = generate.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cli_process(argv, stdin=None):
    """generate.py as a separate process, from the repository root."""
    return subprocess.run([sys.executable, str(ROOT / "generate.py"), *map(str, argv)], input=stdin,
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


# ---- generation -----------------------------------------------------------------------------------

def decode_bytes(run, ids):
    """The text of ids decoded as one byte string: invalid bytes (a model can sample a lone byte token)
    become one U+FFFD per invalid sequence, exactly as the stream prints them."""
    return b"".join(run.token_bytes[i] for i in ids).decode("utf-8", errors="replace")


@pytest.mark.slow
def test_streamed_text_is_korean_and_reproducible_with_a_seed(run_dir, run, capsys):
    argv = ["--ckpt", run_dir, "--prompt", PROMPT, "--max-new-tokens", 40, "--seed", 7, "--device", "cpu"]
    first = cli_process(argv)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(PROMPT) and first.stdout.endswith("\n")
    continuation = first.stdout[len(PROMPT) : -1]
    assert len(HANGUL.findall(continuation)) >= 10
    code, again, _ = cli(argv, capsys)
    assert code == 0 and again == first.stdout  # same seed, same text (another process, too)
    ids = [i for step, _ in stream_text(run, PROMPT, 40, seed=7) for i in step]
    assert continuation == decode_bytes(run, ids)  # never half a character
    assert generate_text(run, PROMPT, 40, seed=7) == [continuation]  # the API is what the CLI prints
    assert generate_text(run, PROMPT, 40, seed=8) != [continuation]


def test_stream_prints_characters_spelled_in_byte_tokens_once_complete(run):
    from inference import Utf8Stream

    text = "서울의 봄은 따뜻하다"
    ids = run.encode(text)
    stream = Utf8Stream(run.token_bytes)
    pieces = [stream.push(i) for i in ids] + [stream.flush()]
    assert "".join(pieces) == text == run.tokenizer.decode(ids)
    is_byte = [byte_of_token(run.tokenizer.id_to_token(i)) is not None for i in ids]
    assert sum(is_byte) >= 3  # with 512 tokens some syllables are spelled in bytes
    for piece, byte in zip(pieces, is_byte):
        assert "\ufffd" not in piece
        if byte:  # a byte token prints nothing or exactly the one syllable it completes
            assert piece == "" or HANGUL.fullmatch(piece)


def test_sampled_stream_extends_the_text_by_whole_characters(run):
    pieces, ids = [], []
    for step, texts in stream_text(run, "서울의 봄", max_new_tokens=60, seed=3, temperature=1.2):
        ids += step
        pieces += texts
    text = decode_bytes(run, ids)
    assert "".join(pieces) == text
    prefix = ""
    for piece in pieces:  # no piece is ever taken back: what is printed stays right
        prefix += piece
        assert text.startswith(prefix)


def test_greedy_text_is_the_same_with_and_without_the_cache(run):
    cached = generate_text(run, PROMPT, 40, temperature=0)  # 40 tokens: past block_size 16
    assert generate_text(run, PROMPT, 40, temperature=0, use_cache=False) == cached
    assert generate_text(run, PROMPT, 40, temperature=0, seed=5) == cached


def test_greedy_text_with_bf16_or_int8_weights_is_the_fp32_text(run_dir, run, capsys):
    """The run's logits have clear winners over these 40 tokens: the smaller weights keep every greedy choice."""
    texts = {}
    for weights in ("fp32", "bf16", "int8"):
        code, texts[weights], _ = cli(["--ckpt", run_dir, "--prompt", PROMPT, "--max-new-tokens", 40, "--temperature", 0,
                                       "--weights", weights, "--device", "cpu"], capsys)  # fmt: skip
        assert code == 0
    assert texts["bf16"] == texts["fp32"] == texts["int8"]
    assert len(texts["fp32"]) > len(PROMPT) + 10


def test_num_samples_are_decoded_together_and_labelled(run_dir, run, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", PROMPT, "--max-new-tokens", 12, "--seed", 1,
                        "--num-samples", 3], capsys)
    assert code == 0
    texts = generate_text(run, PROMPT, 12, num_samples=3, seed=1)
    assert out == "".join(f"--- sample {k + 1} of 3 ---\n{PROMPT}{t}\n" for k, t in enumerate(texts))
    assert len(set(texts)) > 1


@pytest.mark.slow
def test_prompts_from_stdin_until_end_of_input(run_dir, run):
    result = cli_process(["--ckpt", run_dir, "--max-new-tokens", 6, "--temperature", 0], stdin="대한민국은\n\n서울\n")
    assert result.returncode == 0 and result.stderr == ""  # end of input: a clean exit
    expected = [p + generate_text(run, p, 6, temperature=0)[0] for p in ("대한민국은", "서울")]
    assert result.stdout.splitlines() == expected


def test_most_recent_run_is_the_newest_last_checkpoint(run_dir, tmp_path, capsys):
    runs = tmp_path / "runs"
    for name, mtime in (("old", 1_000_000), ("new", 2_000_000), ("older", 500_000)):
        shutil.copytree(run_dir, runs / name)
        os.utime(runs / name / "last" / "model.safetensors", (mtime, mtime))
    (runs / "empty").mkdir()
    assert find_latest_run(runs) == runs / "new"
    code, out, _ = cli(["--runs-dir", runs, "--prompt", PROMPT, "--max-new-tokens", 3, "--temperature", 0], capsys)
    assert code == 0 and out.startswith(PROMPT)


def test_long_prompt_is_cropped_to_the_context_with_a_warning(run_dir, run, capsys):
    prompt = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다."
    n = len(run.encode(prompt)) + 1
    assert n > 16
    code, out, err = cli(["--ckpt", run_dir, "--prompt", prompt, "--head", "0.0"], capsys)
    assert code == 0
    assert f"warning: the prompt has {n} tokens, more than the model's context of 16; using the last 16" in err
    assert "over 16 tokens" in out
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", prompt, "--max-new-tokens", 5, "--seed", 0], capsys)
    assert code == 0 and out.startswith(prompt)


# ---- scoring --------------------------------------------------------------------------------------

def parse_score(out: str) -> dict:
    values = dict(re.findall(r"^([a-z ]+):\s+([0-9.]+)", out, flags=re.M))
    return {k: float(v) for k, v in values.items()}


def test_score_of_a_short_file_is_the_models_own_loss(run_dir, run, tmp_path, capsys):
    text = "대한민국의 수도는 서울"
    path = tmp_path / "short.txt"
    path.write_text(unicodedata.normalize("NFD", text), encoding="utf-8")  # NFC-normalised when read
    ids = [run.eot_id] + run.encode(text)
    assert len(ids) - 1 <= 16  # one window
    _, loss = run.model(torch.tensor([ids[:-1]]), torch.tensor([ids[1:]]))
    code, out, err = cli(["--ckpt", run_dir, "--score", path], capsys)
    assert code == 0
    s = parse_score(out)
    assert s["token loss"] == pytest.approx(loss.item(), abs=1e-4)
    assert s["perplexity"] == pytest.approx(math.exp(loss.item()), rel=1e-4)
    n_tokens = len(ids) - 1
    assert s["bits per character"] == pytest.approx(loss.item() * n_tokens / math.log(2) / len(text), abs=1e-4)
    assert s["characters per token"] == pytest.approx(len(text) / n_tokens, abs=1e-4)
    assert f"{len(text)} characters, {n_tokens} tokens" in out
    assert "scoring" in err  # the progress bar


def reference_nll(model, ids, block_size, stride):
    """Window by window, each token predicted once from the window that first reaches it."""
    total, done, start = 0.0, 0, 0
    while done < len(ids) - 1:
        start = min(start, len(ids) - 1 - block_size)
        x = torch.tensor([ids[start : start + block_size]])
        logits, _ = model(x, all_logits=True)
        nll = -F.log_softmax(logits[0].double(), -1)
        for j in range(block_size):
            if start + 1 + j > done:
                total += nll[j, ids[start + 1 + j]].item()
        done, start = start + block_size, start + stride
    return total


def test_score_of_a_long_file_slides_windows_over_every_token(run_dir, run, tmp_path, capsys):
    from konlpy.corpus import kolaw

    text = unicodedata.normalize("NFC", kolaw.open("constitution.txt").read()[:400])
    (tmp_path / "long.txt").write_text(text, encoding="utf-8")
    code, out, _ = cli(["--ckpt", run_dir, "--score", tmp_path / "long.txt"], capsys)
    assert code == 0
    ids = [run.eot_id] + run.encode(text)
    expected = reference_nll(run.model, ids, 16, 8) / (len(ids) - 1)
    assert parse_score(out)["token loss"] == pytest.approx(expected, abs=1e-4)
    assert score_text(run, text).loss == pytest.approx(expected, rel=1e-5)


def test_score_ids_with_any_stride_predicts_each_token_once(run):
    ids = [run.eot_id] + run.encode("모든 국민은 법 앞에 평등하다. 누구든지 성별·종교 또는 사회적 신분에 의하여 "
                                   "정치적·경제적·사회적·문화적 생활의 모든 영역에 있어서 차별을 받지 아니한다.")[:47]
    assert len(ids) == 48
    # stride = block_size: three disjoint windows of 16 targets (47 = 16 + 16 + 15, the last one shifted).
    for stride in (1, 5, 16):
        assert score_ids(run.model, ids, stride=stride) == pytest.approx(reference_nll(run.model, ids, 16, stride), rel=1e-5)
    # stride 1 = every token with as much context as fits: the model's loss on each window's last target
    per_token = sum(F.cross_entropy(run.model(torch.tensor([ids[max(0, t - 16) : t]]), all_logits=True)[0][0, -1],
                                    torch.tensor(ids[t])).item() for t in range(1, len(ids)))
    assert score_ids(run.model, ids, stride=1) == pytest.approx(per_token, rel=1e-5)


# ---- attention maps -------------------------------------------------------------------------------

ATTN_PROMPT = "대한민국의 수도는 서울이다"


@pytest.fixture(scope="module")
def attention_out(run_dir, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("attention") / "maps"
    code = generate.main(["--ckpt", str(run_dir), "--prompt", ATTN_PROMPT, "--attention", str(out_dir), "--head", "1.0"])
    assert code == 0
    return out_dir


def test_attention_files_hold_the_models_own_weights(run, attention_out):
    assert sorted(p.name for p in attention_out.iterdir()) == [
        "attention.html", "attention.npz", "explain.npz", "layer_0.png", "layer_1.png"]
    ids = [run.eot_id] + run.encode(ATTN_PROMPT)
    with np.load(attention_out / "attention.npz", allow_pickle=False) as f:
        assert f["att"].shape == (2, 2, len(ids), len(ids))
        expected = run.model.attention_maps(torch.tensor([ids]))[0].detach().numpy()
        np.testing.assert_allclose(f["att"], expected, atol=1e-6)
        np.testing.assert_allclose(f["att"].sum(-1), 1, atol=1e-5)
        assert f["ids"].tolist() == ids
        assert f["tokens"].tolist() == [run.tokenizer.id_to_token(i) for i in ids]
        assert f["labels"].tolist() == token_labels(run.tokenizer, ids)
    labels = load_npz(attention_out / "attention.npz").labels
    assert labels[0] == "<|endoftext|>" and any(l.startswith("␣") for l in labels)
    assert any(re.fullmatch(r"<0x[0-9A-F]{2}>", l) for l in labels)  # "울" is spelled in bytes here


def stats_by_loops(att):
    """The statistics of one (T, T) map, straight from the definitions in inspection/stats.py."""
    T = len(att)
    rows, roles = range(1, T), range(2, T)  # prev, first and self are the roles' scores: queries 2..T-1
    return {
        "entropy": np.mean([-sum(a * math.log(a) for a in att[q, : q + 1] if a > 0) for q in rows]),
        "distance": np.mean([sum(att[q, k] * (q - k) for k in range(q + 1)) for q in rows]),
        "prev": np.mean([att[q, q - 1] for q in roles]),
        "first": np.mean([att[q, 0] for q in roles]),
        "self": np.mean([att[q, q] for q in roles]),
    }


def test_summary_rows_match_statistics_of_the_npz(run_dir, attention_out, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--head", "1.0"], capsys)
    assert code == 0
    weights = load_npz(attention_out / "attention.npz").att.astype(np.float64)
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == ["layer", "head", *STAT_NAMES])
    rows = [line.split() for line in lines[header + 1 : header + 5]]
    assert [(int(r[0]), int(r[1])) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for r in rows:
        expected = stats_by_loops(weights[int(r[0]), int(r[1])])
        assert [float(v) for v in r[2:]] == pytest.approx([expected[n] for n in STAT_NAMES], abs=1e-4)
    # --head 1.0: one line per query token, its most attended key first
    T = weights.shape[-1]
    top = lines[lines.index("layer 1 head 0: the tokens each query attends to most") + 1 :]
    assert len(top) == T
    for q, line in enumerate(top):
        k = int(re.search(r"-> .*?\((\d+)\) ([0-9.]+)", line).group(1))
        assert k == int(np.argmax(weights[1, 0, q, : q + 1]))


def test_attention_covers_the_generated_text_too(run_dir, run, tmp_path, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", "서울", "--attention", tmp_path, "--max-new-tokens", 5,
                        "--temperature", 0], capsys)
    assert code == 0
    maps = load_npz(tmp_path / "attention.npz")
    prompt_ids = [run.eot_id] + run.encode("서울")
    assert maps.ids[: len(prompt_ids)] == prompt_ids and len(maps.ids) == len(prompt_ids) + 5
    assert out.startswith("서울" + generate_text(run, "서울", 5, temperature=0)[0] + "\n")


def test_png_shows_the_korean_labels_with_a_hangul_font(attention_out):
    from fontTools.ttLib import TTFont
    from PIL import Image

    from inspection.plot import drawable, font_paths

    labels = load_npz(attention_out / "attention.npz").labels
    korean, fallback = (TTFont(p).getBestCmap() for p in font_paths())
    chars = {ch for label in labels for ch in drawable(label)}
    assert all(ord(ch) in korean or ord(ch) in fallback for ch in chars)
    assert all(ord(ch) in korean for ch in chars if HANGUL.match(ch))
    with Image.open(attention_out / "layer_1.png") as image:
        assert image.format == "PNG" and min(image.size) > 300


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_html_page_loads_in_headless_chromium(attention_out, tmp_path):

    page = attention_out / "attention.html"
    dom, log = render(page.as_uri(), tmp_path, "--dump-dom")
    assert console_errors(log) == []
    assert re.search(r'<pre id="errors">\s*</pre>', dom)
    assert re.search(r'<select id="layer">(<option value="\d">layer \d</option>){2}</select>', dom)
    assert '<option value="all">all heads</option><option value="0">head 0</option><option value="1">head 1</option>' in dom
    labels = load_npz(attention_out / "attention.npz").labels
    token_line = re.search(r'<div id="tokens" class="strip[^"]*">(.*?)<p id="surprise-note"', dom, re.S).group(1)
    assert re.findall(r'<span class="t">(.*?)</span>', token_line) == [
        l.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for l in labels]
    # Screenshot: non-blank pixels in the token area, so the text is drawn (Hangul glyphs come embedded).
    shot = tmp_path / "shot.png"
    render(page.as_uri(), tmp_path, f"--screenshot={shot}", "--window-size=900,700", "--hide-scrollbars")
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (900, 700) and len(image.convert("L").getcolors(1 << 16)) > 20


# ---- walkthrough, head roles, decoding maps ---------------------------------------------------------

def test_explain_prints_the_numbers_of_explain_npz(run_dir, run, tmp_path, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--explain", "1.0", "--query", "-3",
                        "--attention", tmp_path], capsys)
    assert code == 0
    t = load_trace(tmp_path / "explain.npz")
    maps = load_npz(tmp_path / "attention.npz")
    np.testing.assert_allclose(t.att, maps.att, atol=1e-6)  # the same weights as attention.npz
    assert t.ids.tolist() == maps.ids
    i = len(maps.ids) - 3
    assert f"Layer 1, head 0, query token {i} {maps.labels[i]!r} of {len(maps.ids)} tokens" in out
    q_line = next(line for line in out.splitlines() if line.strip().startswith("q = ["))
    np.testing.assert_allclose([float(x) for x in re.findall(r"-?\d+\.\d+", q_line)][:4], t.q[1, 0, i, :4], atol=1e-4)
    lines = out.splitlines()
    header = next(n for n, line in enumerate(lines) if line.split()[:3] == ["j", "token", "q·k_j"])
    for j, line in enumerate(lines[header + 1 : header + 1 + len(maps.ids)]):
        cells = line.split()
        assert int(cells[0]) == j and float(cells[3]) == pytest.approx(t.scores[1, 0, i, j], abs=1e-4)
        assert float(cells[5]) == pytest.approx(t.att[1, 0, i, j], abs=1e-4)
    # the page carries the same tensors for its own walkthrough
    page = (tmp_path / "attention.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    q = np.frombuffer(base64.b64decode(data["frames"][0]["explain"]["q"]), dtype="<f4").reshape(t.q.shape)
    assert np.array_equal(q, t.q)


def test_explain_defaults_to_the_last_token(run_dir, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", "서울", "--explain", "0.1"], capsys)
    n = len(load_run(run_dir, device="cpu").encode_prompt("서울"))
    assert code == 0 and f"Layer 0, head 1, query token {n - 1} " in out and "later keys" not in out


def test_heads_alone_scores_the_run_on_its_validation_split(run_dir, tmp_path, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--heads", "--attention", tmp_path], capsys)
    assert code == 0
    assert "on the run's validation split" in out and "val.bin" in out
    saved = json.loads((tmp_path / "heads.json").read_text(encoding="utf-8"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heads.json"]  # no prompt, no maps
    assert saved["source"]["kind"] == "validation" and saved["source"]["path"].endswith("val.bin")
    table = out.splitlines()[1:6]
    assert table[0].split()[:4] == ["rank", "layer", "head", "strongest"]
    roles = list(saved["chance"])  # the five roles, and the three word roles: the tokens' word starts are known
    assert roles == [*ROLES, "same-word", "word-start", "previous-word"]
    assert all(np.shape(saved["scores"][r]) == (2, 2) for r in roles)
    strongest = [max(saved["scores"][r][int(row.split()[1])][int(row.split()[2])] for r in roles) for row in table[1:]]
    assert strongest == sorted(strongest, reverse=True)
    assert saved["loss_drop"] == pytest.approx(saved["loss_first_copy"] - saved["loss_second_copy"], abs=1e-5)


def test_ablate_switches_heads_off_for_the_text_the_score_and_the_heads(run_dir, run, tmp_path, capsys):
    """--ablate L.H,...: greedy text, --score (with its difference to the full model), --heads and --lens all
    see the model with those heads off, as common.heads_off.HeadsOff computes it."""
    means = held_out_means(run)
    ids = run.encode_prompt(PROMPT)
    with HeadsOff(run.model, [(1, 0), (0, 1)], "mean", means):
        expected = generate_text(run, PROMPT, 12, temperature=0)[0]
        off = run.model(torch.tensor([ids]))[0][0, -1].softmax(-1)
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", PROMPT, "--max-new-tokens", 12, "--temperature", 0,
                        "--ablate", "1.0,0.1"], capsys)
    assert code == 0 and out == PROMPT + expected + "\n"
    assert (off - run.model(torch.tensor([ids]))[0][0, -1].softmax(-1)).abs().max() > 1e-3  # the heads matter here
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", PROMPT, "--lens", "--ablate", "1.0,0.1"], capsys)
    assert f"the model's final choice ({token_labels(run.tokenizer, [int(off.argmax())])[0]})" in out

    text = tmp_path / "t.txt"
    text.write_text("대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있다.", encoding="utf-8")
    full = score_text(run, text.read_text(encoding="utf-8"))
    with HeadsOff(run.model, [(1, 1)], "zero"):
        off = score_text(run, text.read_text(encoding="utf-8"))
    code, out, _ = cli(["--ckpt", run_dir, "--score", text, "--ablate", "1.1", "--ablate-mode", "zero"], capsys)
    assert code == 0 and re.search(rf"bits per character: +{off.bits_per_char:.4f}\n", out)
    assert (f"with heads 1.1 off: {off.bits_per_char - full.bits_per_char:+.4f} bits/char against the full "
            f"model's {full.bits_per_char:.4f}") in out

    code, out, _ = cli(["--ckpt", run_dir, "--heads", "--attention", tmp_path / "h"], capsys)
    saved = json.loads((tmp_path / "h" / "heads.json").read_text(encoding="utf-8"))
    costs = saved["importance"]
    assert costs["mode"] == "mean" and "+loss off" in out and "held-out loss it adds" in out
    windows = held_out_windows(run.model, held_out_ids(run)[0])
    seqs, n, o = induction_sequences(run.model, usable_ids(run), run.eot_id)
    with HeadsOff(run.model, [(1, 0)], "mean", means):  # the table's numbers for head 1.0, by hand
        loss_off, drop_off = losses(run.model, windows, seqs, n, o)
    assert costs["loss"][1][0] == pytest.approx(loss_off - costs["full_loss"], abs=1e-5)
    assert costs["drop"][1][0] == pytest.approx(saved["loss_drop"] - drop_off, abs=1e-5)


def test_heads_fall_back_to_text_the_model_writes_and_take_a_file(run_dir, tmp_path, capsys):
    alone = tmp_path / "copied"
    shutil.copytree(run_dir / "last", alone)
    meta = json.loads((alone / "meta.json").read_text(encoding="utf-8"))
    meta["data"]["cache_dir"] = str(tmp_path / "gone")  # the prepared data is not on this machine
    (alone / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    code, out, _ = cli(["--ckpt", alone, "--heads"], capsys)
    assert code == 0 and "tokens the model wrote itself (seed 0, temperature 1): no validation split found" in out
    (tmp_path / "held_out.txt").write_text("대한민국의 수도는 서울이다. 서울은 크다.", encoding="utf-8")
    code, out, _ = cli(["--ckpt", alone, "--heads", "--heads-text", tmp_path / "held_out.txt"], capsys)
    assert code == 0 and f"on {tmp_path / 'held_out.txt'} (" in out


def test_heads_with_a_prompt_put_each_heads_role_on_the_page_and_the_pngs(run_dir, tmp_path, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--heads", "--prompt", ATTN_PROMPT, "--attention", tmp_path], capsys)
    assert code == 0
    saved = json.loads((tmp_path / "heads.json").read_text(encoding="utf-8"))
    page = (tmp_path / "attention.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    roles = roles_from_record(saved)
    frame = data["frames"][0]
    assert frame["scores"]["scores"] == saved["scores"]  # the page's table of role scores: heads.json's numbers
    assert frame["scores"]["importance"] == saved["importance"]  # what switching each off costs, heads.json's too
    for layer, head in ((0, 0), (0, 1), (1, 0), (1, 1)):
        role, score = frame["roles"][layer][head]  # the page names the role in its language
        assert (role, score) == pytest.approx(roles.strongest(layer, head))
        assert score == pytest.approx(max(saved["scores"][r][layer][head] for r in saved["chance"]), abs=1e-6)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
def test_the_page_shows_each_heads_cost_and_the_focused_tokens_lens(run_dir, tmp_path, capsys):
    code, _, _ = cli(["--ckpt", run_dir, "--heads", "--prompt", ATTN_PROMPT, "--attention", tmp_path], capsys)
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--lens", "--query", 2], capsys)
    assert code == 0
    dom, log = render((tmp_path / "attention.html").as_uri() + "#layer=1&head=all&focus=2", tmp_path, "--dump-dom")
    assert console_errors(log) == [] and re.search(r'<pre id="errors">\s*</pre>', dom)
    lens = re.search(r'<div id="lens">(.*?)</div>', dom, re.S).group(1)
    rows = [[html.unescape(re.sub(r"<.*?>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
            for tr in re.findall(r"<tr>(.*?)</tr>", lens) if "<td" in tr]  # fmt: skip
    lines = out.strip().splitlines()
    assert html.unescape(re.sub(r"<.*?>", "", lens.split("<table")[0])) == lines[0]  # the CLI's lens of token 2
    assert len(rows) == 3  # the embeddings and after each of the 2 blocks: a row of the table for each line of the CLI
    for row in rows:
        line = next(line for line in lines if line.strip().startswith(row[0]))
        assert re.findall(r"\S+ \d\.\d{3}", line) == row[2:] and f" {row[1]} " in line
    roles = html.unescape(re.search(r'<div id="roles">(.*?)</div>', dom, re.S).group(1))
    assert "+loss off" in roles and "the held-out loss it adds" in roles


def test_layers_keep_the_page_and_pngs_to_the_chosen_ones(run_dir, tmp_path, capsys):
    code, _, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--attention", tmp_path, "--layers", "1"], capsys)
    assert code == 0
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["layer_1.png"]
    page = (tmp_path / "attention.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S).group(1))
    assert data["layers"] == [1] and data["n_layer"] == 1
    assert load_npz(tmp_path / "attention.npz").att.shape[0] == 2  # the npz keeps every layer


def test_generated_tokens_maps_come_from_the_cached_decoding(run_dir, run, tmp_path, capsys):
    code, _, _ = cli(["--ckpt", run_dir, "--prompt", "서울", "--attention", tmp_path, "--max-new-tokens", 6,
                      "--temperature", 0], capsys)
    assert code == 0
    maps = load_npz(tmp_path / "attention.npz")
    prompt = run.encode_prompt("서울")
    assert maps.prefill == len(prompt) and len(maps.ids) == len(prompt) + 6
    full = run.model.attention_maps(torch.tensor([maps.ids]))[0].detach().numpy()
    np.testing.assert_allclose(maps.att, full, atol=1e-5)  # each decoding row = the full forward's row
    np.testing.assert_allclose(load_trace(tmp_path / "explain.npz").att, maps.att, atol=1e-5)
    page = (tmp_path / "attention.html").read_text(encoding="utf-8")
    assert f'"prefill": {len(prompt)}' in page


# ---- Python use -----------------------------------------------------------------------------------

def test_notebook_api(run_dir):
    run = load_run(run_dir / "last", device="cpu")
    maps = compute(run, ATTN_PROMPT, ["maps"])["maps"]
    assert maps["att"].shape[:2] == (2, 2) and maps["tokens"] == token_labels(run.tokenizer, maps["ids"])
    fig = draw_head(maps["att"], maps["tokens"], layer=1, head=0)
    assert len(fig.axes[0].images) == 1 and fig.axes[0].get_title() == "layer 1 head 0"
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == maps["tokens"]
    assert score_text(run, ATTN_PROMPT).tokens == len(maps["ids"]) - 1


# ---- bad input ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def damaged_runs(run_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("damaged")
    shutil.copytree(run_dir, root / "truncated")
    weights = root / "truncated" / "last" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    shutil.copytree(run_dir, root / "no_tokenizer")
    (root / "no_tokenizer" / "last" / "tokenizer.json").unlink()
    shutil.copytree(run_dir, root / "bad_tokenizer")
    (root / "bad_tokenizer" / "last" / "tokenizer.json").write_text("{not json", encoding="utf-8")
    (root / "empty_runs").mkdir()
    (root / "cp949.txt").write_bytes("대한민국 헌법".encode("cp949"))
    (root / "empty.txt").write_bytes(b"")
    return root


BAD = [
    (["--runs-dir", "{d}/empty_runs", "--prompt", "가"], "no trained run under"),
    (["--score", "{d}/missing.txt"], "missing.txt is not a file"),
    (["--score", "{d}/cp949.txt"], "is not UTF-8"),
    (["--score", "{d}/empty.txt"], "is empty"),
    (["--prompt", "가", "--head", "2.0"], "head 2.0 is not in this model"),
    (["--prompt", "가", "--head", "0.2"], "head 0.2 is not in this model"),
    (["--prompt", "가", "--head", "1"], "must be LAYER.HEAD"),
    (["--prompt", ""], "the prompt is empty"),
    (["--prompt", "가", "--temperature", "-0.5"], "temperature -0.5 must be >= 0"),
    (["--prompt", "가", "--top-p", "0"], "top_p 0.0 must be in (0, 1]"),
    (["--prompt", "가", "--top-p", "1.5"], "top_p 1.5 must be in (0, 1]"),
    (["--prompt", "가", "--top-k", "0"], "top_k 0 must be a positive integer"),
    (["--prompt", "가", "--max-new-tokens", "-1"], "max_new_tokens must be an int >= 0, got -1"),
    (["--prompt", "가", "--num-samples", "0"], "num_samples 0 must be >= 1"),
    (["--prompt", "가", "--temperature", "hot"], "invalid float value: 'hot'"),
    (["--prompt", "가", "--bogus"], "unrecognized arguments: --bogus"),
    (["--prompt", "가", "--device", "tpu9"], "--device = \"tpu9\" is not one of"),
    (["--attention", "{d}/out"], "need --prompt"),
    (["--score", "{d}/cp949.txt", "--prompt", "가"], "--score scores a file"),
    (["--ckpt", "{d}/truncated", "--prompt", "가"], "is damaged or truncated"),
    (["--ckpt", "{d}/no_tokenizer", "--prompt", "가"], "tokenizer.json is missing"),
    (["--ckpt", "{d}/bad_tokenizer", "--prompt", "가"], "tokenizer.json is damaged"),
    (["--ckpt", "{d}/nowhere", "--prompt", "가"], "does not exist"),
    (["--prompt", "가", "--explain", "1"], "--explain '1' must be LAYER.HEAD"),
    (["--prompt", "가", "--explain", "2.0"], "head 2.0 is not in this model"),
    (["--prompt", "가", "--explain", "0.0", "--query", "2", "--attention", "{d}/out"], "--query 2 is outside the 2 tokens"),
    (["--explain", "0.0"], "need --prompt"),
    (["--prompt", "가", "--query", "1"], "--query picks the token of --explain, --why and --lens"),
    (["--lens"], "--lens reads the model at a token of --prompt"),
    (["--prompt", "가", "--ablate", "9.9"], "--ablate: head 9.9 is not in this model: it has layers 0..1"),
    (["--prompt", "가", "--ablate", "1.x"], "--ablate '1.x' must be LAYER.HEAD"),
    (["--prompt", "가", "--ablate", ""], "--ablate needs at least one head"),
    (["--prompt", "가", "--ablate", " , "], "--ablate needs at least one head"),
    (["--prompt", "가", "--ablate", "1.0,0.1,1.0"], "head 1.0 is given twice"),
    (["--prompt", "가", "--ablate-mode", "zero"], "add --ablate L.H"),
    (["--prompt", "가", "--ablate", "1.0", "--weights", "bf16"], "drop --ablate or the --weights option"),
    (["--prompt", "가", "--heads-text", "{d}/cp949.txt"], "add --heads"),
    (["--heads", "--heads-text", "{d}/cp949.txt"], "is not UTF-8"),
    (["--score", "{d}/cp949.txt", "--heads"], "--score scores a file"),
    (["--prompt", "가", "--layers", "0"], "add --attention DIR"),
    (["--prompt", "가", "--attention", "{d}/out", "--layers", "5"], "names a layer this model lacks"),
    (["--prompt", "가", "--attention", "{d}/out", "--layers", "a-b"], "must list layers like 0,2 or 0-3"),
    (["--prompt", "가", "--weights", "bf16", "--no-cache"], "drop --no-cache or the --weights option"),
    (["--prompt", "가", "--weights", "int8", "--attention", "{d}/out", "--max-new-tokens", "3"], "drop --attention or"),
    (["--prompt", "가", "--weights", "int4"], "argument --weights: invalid choice: 'int4'"),
]


@pytest.mark.parametrize("argv, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_error_line_and_exit_2(argv, message, run_dir, damaged_runs, capsys):
    argv = [a.format(d=damaged_runs) for a in argv]
    if "--ckpt" not in argv and "--runs-dir" not in argv:
        argv = ["--ckpt", str(run_dir), *argv]
    code, out, err = cli(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err, err
    assert out == "" and not (damaged_runs / "out").exists()


@pytest.mark.slow
def test_a_prompt_that_is_not_utf8_in_a_real_process(run_dir):
    """A Korean Windows console's cp949 bytes as the argument: Python keeps them as lone surrogates."""
    result = subprocess.run([sys.executable, str(ROOT / "generate.py"), "--ckpt", str(run_dir), "--prompt",
                             "대한".encode("cp949")], capture_output=True, cwd=ROOT, timeout=300)  # fmt: skip
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr == (b"error: the prompt is not valid UTF-8 (byte 0xB4 at position 0); give UTF-8 text "
                             b"(convert cp949 with iconv -f cp949 -t utf-8)\n")


@pytest.mark.slow
def test_bad_input_in_a_real_process_has_no_traceback(damaged_runs):
    result = cli_process(["--runs-dir", damaged_runs / "empty_runs", "--prompt", "가"])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: no trained run under")
    assert "python train.py" in result.stderr  # says how to get one


def test_3_a_layer_range_is_checked_before_it_is_built(monkeypatch):
    built = []
    monkeypatch.setattr(generate, "range", lambda a, b: built.append(b - a) or range(0), raising=False)
    with pytest.raises(generate.UserError, match="names a layer this model lacks"):
        generate.parse_layers("0-99999999999")
    assert built == []  # no set of 10**11 layers


def test_a_top_k_past_the_vocabulary_is_said_to_do_nothing(run_dir, run, capsys):
    V = run.model.config.vocab_size
    code, out, err = cli(["--ckpt", run_dir, "--prompt", "가", "--max-new-tokens", 3, "--top-k", V, "--seed", 1], capsys)
    assert code == 0 and f"note: --top-k {V} keeps the whole vocabulary of {V} tokens" in err
    _, plain, _ = cli(["--ckpt", run_dir, "--prompt", "가", "--max-new-tokens", 3, "--seed", 1], capsys)
    assert out == plain  # the same as no --top-k
    assert "note:" not in cli(["--ckpt", run_dir, "--prompt", "가", "--max-new-tokens", 3, "--top-k", V - 1], capsys)[2]


# ---- why this token, patching, words ------------------------------------------------------------------

def test_why_prints_the_shares_that_make_the_logit_difference_and_writes_why_json(run_dir, run, tmp_path, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--why", "--attention", tmp_path], capsys)
    assert code == 0
    record = json.loads((tmp_path / "why.json").read_text(encoding="utf-8"))
    assert {"token", "versus", "logit_diff", "parts", "query", "sigma"} <= record.keys()
    assert sum(p["share"] for p in record["parts"]) == pytest.approx(record["logit_diff"], abs=1e-4)
    assert all({"name", "share"} <= p.keys() for p in record["parts"])
    assert f"Why '{record['token']}' and not '{record['versus']}'" in out and f"{record['logit_diff']:.4f}" in out
    named = next(p for p in record["parts"] if p["kind"] == "head")  # a token named back by its label
    code, again, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--why", f"{named['up'][0]},{named['down'][0]}"],
                         capsys)
    assert code == 0 and f"Why '{named['up'][0]}' and not '{named['down'][0]}'" in again


def test_patch_writes_the_grid_and_every_head_and_the_page_draws_them(run_dir, run, tmp_path, capsys, monkeypatch):
    """The command's files and page (tests/test_patch.py tests what the numbers mean, on a model whose circuit is
    known); this run, trained 60 steps, predicts nearly alike after any two texts, so any gap is taken here."""
    from inspection.views import patch as patching

    monkeypatch.setattr(patching, "MIN_GAP", 1e-9)
    clean, corrupt = "국회는 법률을", "국회는 법률로"
    assert len(run.encode_prompt(clean)) == len(run.encode_prompt(corrupt))
    code, out, err = cli(["--ckpt", run_dir, "--prompt", clean, "--patch", corrupt, "--patch-heads", "1.0,1.1",
                          "--attention", tmp_path], capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "patch.json").read_text(encoding="utf-8"))
    T, L = len(run.encode_prompt(clean)), run.model.config.n_layer
    assert len(record["grid"]) == L + 1 and all(len(row) == T for row in record["grid"])
    assert set(record["heads"]) == {f"{l}.{h}" for l in range(L) for h in range(run.model.config.n_head)}
    assert {"clean_diff", "corrupt_diff", "together", "changed", "labels"} <= record.keys()
    assert record["grid"][-1][-1] == pytest.approx(1, abs=1e-4)  # the last stream at the last token is the prediction
    assert (tmp_path / "patch.png").stat().st_size > 1000 and "Why a cone" in out
    page = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>',
                                (tmp_path / "attention.html").read_text(encoding="utf-8"), re.S).group(1))
    assert page["patch"]["grid"] == record["grid"]  # the page carries Python's record


def test_words_group_the_text_by_its_spaces_for_the_head_and_the_walkthrough(run_dir, run, tmp_path, capsys):
    code, out, _ = cli(["--ckpt", run_dir, "--prompt", ATTN_PROMPT, "--words", "--head", "1.0", "--explain", "1.0",
                        "--attention", tmp_path], capsys)
    assert code == 0
    assert "by word (어절)" in out and (tmp_path / "layer_0_words.png").is_file()
    words = len(ATTN_PROMPT.split()) + 1  # and the <|endoftext|> before it
    table = out[out.index("by word (어절): the words each query word"):].splitlines()[1 : 1 + words]
    assert len(table) == words and all("->" in line for line in table)
