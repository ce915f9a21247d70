"""The CUDA paths, run for real: bf16 and fp16 training, fused AdamW, flash attention, cached decoding, resume (fp16
with its loss scaler too), and every inspection door on the GPU: generate.py's options, the notebook views, a
live request and both lesson notebooks (tests/test_on_device.py runs the same doors on a stand-in GPU on a CPU).

    python -m pytest -q -m gpu          # on a machine with a CUDA GPU (bench/gpu_check.sh runs this)

Every test is marked `gpu`, and the module skips without CUDA; the tests that force the flash kernel skip on a
GPU older than compute capability 8.0 (a T4). Tiny shapes: seconds on any GPU. The notebooks need nbclient and
ipykernel (a skip without them fails bench/gpu_check.sh's inspect step).
"""

import contextlib
import io
import os
import signal
import json
import math

import pytest
import torch

import generate
import train
from inference import load_run
from inspection import notebook as nb
from inspection.live import LiveInspector
from model import GPT, GPTConfig
from model.attention import CausalSelfAttention
from model.sampling import stream_with_logits
from model.speed import speed_up
from tests.test_on_device import DOORS, NOTEBOOK, PROMPT

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

TINY = "configs/tiny.toml"
SMALL = {"vocab_size": 256, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}


def rel(a, b) -> float:
    """‖a − b‖ / ‖b‖ in float64 (NaN if anything is NaN, so it never passes a `<` check)."""
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


@pytest.fixture(autouse=True)
def tf32_flags():
    """train.py turns TF32 on for the whole process; put the flags back so fp32 checks stay fp32."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture
def exact_fp32():
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "train-data-cache"


def run_train(run, data_cache, *extra, after_step=None) -> tuple[int, str]:
    """train.main on configs/tiny.toml on the GPU; (exit code, what it printed). `after_step`: in place of
    train.after_step for this run."""
    argv = ["--config", TINY, f"--data.cache_dir={data_cache}", "--train.device=cuda", "--out", str(run), *extra]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.MonkeyPatch.context() as hooked:
        if after_step is not None:
            hooked.setattr(train, "after_step", after_step)
        code = train.main(argv)
    return code, printed.getvalue()


def logged_losses(run):
    records = map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
    return [(r["step"], r["loss"]) for r in records if "loss" in r]


def saved_state(run):
    return torch.load(run / "last" / "train_state.pt", weights_only=True)


@pytest.fixture
def flash_gpu():
    """Skip where PyTorch's flash kernel cannot run: it needs compute capability 8.0 (Ampere) or newer, and a test
    that forces it gets an error, not a fallback, on an older GPU."""
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (8, 0):
        pytest.skip(f"the flash kernel needs compute capability 8.0 or newer; this GPU has {major}.{minor}")


@pytest.fixture(scope="module")
def auto_run(tmp_path_factory, data_cache):
    """tiny.toml trained on the GPU with dtype "auto", the default of every other config (tiny.toml pins fp32,
    for the same numbers on every CPU)."""
    run = tmp_path_factory.mktemp("auto") / "run"
    code, printed = run_train(run, data_cache, "--train.dtype=auto")
    assert code == 0, printed[-2000:]
    return run, printed


def test_a_bf16_training_step_lowers_the_loss():
    torch.manual_seed(0)
    model = speed_up(GPT(GPTConfig(**SMALL, dropout=0.1)).cuda()).train()  # as train.py runs it
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    x, y = torch.randint(0, 256, (2, 4, 16), device="cuda")
    losses = []
    for _ in range(10):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert logits.dtype == torch.bfloat16 and model.lm_head.weight.dtype == torch.float32  # fp32 master weights
    assert losses[0] == pytest.approx(math.log(256), abs=0.3)
    assert losses[-1] < losses[0] - 1.0, losses


def test_train_py_on_cuda_autocasts_in_bf16_where_the_gpu_computes_it_and_learns(auto_run):
    run, printed = auto_run
    # "auto": bf16 from compute capability 8.0 (Ampere) on; older GPUs emulate bf16 slowly and get fp16 instead
    expected = "bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16"
    assert f"on cuda:0, {expected}, compile off" in printed  # tiny.toml turns compile off
    losses = [loss for _, loss in logged_losses(run)]
    assert len(losses) == 20 and all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0] - 0.3
    assert losses[0] == pytest.approx(math.log(1024), abs=0.3)


def test_train_py_uses_fused_adamw_on_cuda(auto_run):
    # torch's AdamW defaults to fused=None, which picks the foreach kernels: train.py must ask for fused
    groups = saved_state(auto_run[0])["optimizer"]["param_groups"]
    assert len(groups) == 2 and all(g["fused"] is True for g in groups)


def test_fp16_with_the_grad_scaler_trains_without_inf(tmp_path, data_cache):
    code, printed = run_train(tmp_path / "run", data_cache, "--train.dtype=fp16")
    assert code == 0, printed[-2000:]
    assert "bf16" not in printed and ", fp16, " in printed
    losses = [loss for _, loss in logged_losses(tmp_path / "run")]
    assert len(losses) == 20 and all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0] - 0.3
    scaler = saved_state(tmp_path / "run")["scaler"]
    assert scaler and math.isfinite(scaler["scale"]) and scaler["scale"] > 0  # enabled, and still a usable scale


@pytest.mark.parametrize("causal_len", [16, 64])
def test_flash_attention_matches_the_explicit_path_in_bf16(flash_gpu, exact_fp32, causal_len):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    layer = speed_up(CausalSelfAttention(GPTConfig(**SMALL)).cuda()).eval()  # nn.Linear's init: peaked attention
    x = (2 * torch.randn(4, causal_len, 32, device="cuda")).requires_grad_()
    grad_y = torch.randn(4, causal_len, 32, device="cuda")

    def forward_backward(bf16: bool, need_attn: bool):
        x.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            # forcing the flash kernel makes the call fail, rather than fall back, if flash cannot run it
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION) if bf16 and not need_attn else contextlib.nullcontext():
                y = layer(x, need_attn=need_attn)[0]
        (y.float() * grad_y).sum().backward()
        return y.float().detach(), x.grad.clone()

    y_ref, dx_ref = forward_backward(bf16=False, need_attn=True)  # fp32, TF32 off: the reference
    y_flash, dx_flash = forward_backward(bf16=True, need_attn=False)
    y_explicit, dx_explicit = forward_backward(bf16=True, need_attn=True)
    assert rel(y_flash, y_ref) < 1e-2 and rel(y_explicit, y_ref) < 1e-2
    assert rel(y_flash, y_explicit) < 1e-2
    assert rel(dx_flash, dx_ref) < 2e-2 and rel(dx_explicit, dx_ref) < 2e-2


def test_the_model_trains_through_the_flash_kernel_with_dropout(flash_gpu):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    model = speed_up(GPT(GPTConfig(**SMALL, dropout=0.1)).cuda()).train()  # the speed layer: SDPA on a GPU
    x, y = torch.randint(0, 256, (2, 4, 16), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        loss = model(x, y)[1]
    loss.backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    assert torch.isfinite(grads).all() and grads.abs().max() > 0
    model.eval()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            fast = model(x, all_logits=True)[0]
        explicit = model.forward_with_attention(x)[0]
    assert rel(fast.float(), explicit.float()) < 1e-2


@pytest.mark.parametrize("batch", [1, 3])
def test_cached_greedy_decoding_equals_uncached_past_block_size(exact_fp32, batch):
    torch.manual_seed(0)
    model = speed_up(GPT(GPTConfig(**SMALL)).cuda()).eval()  # as generate.py runs it
    idx = torch.randint(0, 256, (batch, 5), device="cuda")
    cached_tokens, cached_logits = zip(*stream_with_logits(model, idx, 40, temperature=0))
    plain_tokens, plain_logits = zip(*stream_with_logits(model, idx, 40, temperature=0, use_cache=False))
    assert torch.equal(torch.stack(cached_tokens), torch.stack(plain_tokens))
    torch.testing.assert_close(torch.stack(cached_logits), torch.stack(plain_logits), atol=1e-4, rtol=0)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_resume_after_sigint_logs_the_same_loss_at_every_step(dtype, tmp_path, data_cache):
    # dropout, gradient accumulation and an uneven log interval: the CUDA RNG and every other state must survive;
    # in fp16 the GradScaler's scale and growth tracker too
    extra = ["--train.log_interval=3", "--train.grad_accum=2", "--model.dropout=0.1", "--train.sample_tokens=0",
             f"--train.dtype={dtype}"]
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    assert run_train(straight, data_cache, *extra)[0] == 0
    def ctrl_c_after_7(step):  # the run sends itself SIGINT after step 7, as Ctrl-C would
        if step == 7:
            os.kill(os.getpid(), signal.SIGINT)

    assert run_train(interrupted, data_cache, *extra, after_step=ctrl_c_after_7)[0] == 130
    assert saved_state(interrupted)["step"] == 7
    assert run_train(interrupted, data_cache, *extra, "--resume")[0] == 0
    assert logged_losses(interrupted) == logged_losses(straight)
    assert [s for s, _ in logged_losses(straight)] == [3, 6, 9, 12, 15, 18, 20]
    model_bytes = [(run / "last" / "model.safetensors").read_bytes() for run in (straight, interrupted)]
    assert model_bytes[0] == model_bytes[1]


@pytest.fixture(scope="module")
def inspect_run(tmp_path_factory, data_cache):
    """tiny.toml trained 300 steps on the GPU (enough for --patch's texts to predict apart), with 2 snapshots."""
    run = tmp_path_factory.mktemp("inspect") / "run"
    code, printed = run_train(run, data_cache, "--train.max_steps=300", "--train.eval_interval=150",
                              "--train.snapshots=2", "--train.sample_tokens=0")  # fmt: skip
    assert code == 0, printed[-2000:]
    return run


@pytest.mark.parametrize("door", DOORS)
def test_every_inspection_option_runs_on_cuda(door, inspect_run, tmp_path, capsys):
    """Each generate.py option with the model on the GPU (a device tensor handed to numpy, or a CPU tensor mixed
    with a GPU one, fails here): its exit code 0 and its files written."""
    text = tmp_path / "text.txt"
    text.write_text(PROMPT + ". " + PROMPT + ".", encoding="utf-8")
    argv = [a.format(out=tmp_path / "out", text=text, run=inspect_run) for a in DOORS[door]]
    ckpt = [] if "--over-training" in argv else ["--ckpt", str(inspect_run)]
    assert generate.main([*ckpt, "--device", "cuda", "--lang", "en", *argv]) == 0
    assert capsys.readouterr().out.strip()
    if "{out}" in DOORS[door]:
        assert any(p.suffix in (".html", ".json") and p.stat().st_size > 0 for p in (tmp_path / "out").iterdir())


def test_every_notebook_view_and_a_live_request_run_on_cuda(inspect_run):
    nb.language("en")
    assert load_run(inspect_run).device.type == "cuda"  # what the notebook's views load: "auto" is the GPU
    for view, call in NOTEBOOK.items():
        assert len(call(str(inspect_run))) > 100, view
    inspector = LiveInspector(load_run(inspect_run, device="cuda"))
    (status, view), = inspector.inspect({"text": PROMPT, "top_k": 5, "ablate": [[1, 0]]})
    lines = list(inspector.generate({"text": PROMPT, "max_new_tokens": 3, "seed": 2}))
    assert status == 200 and view["path"] and lines[-1]["done"] and len(lines) == 4


@pytest.mark.parametrize("lang", ["ko", "en"])
def test_the_lesson_notebook_runs_top_to_bottom_on_cuda(lang, tmp_path, data_cache):
    """Colab's GPU: every cell of the lesson, its runs trained and inspected on the GPU (the parameter cell shrunk
    to seconds, as tests/test_notebook.py does on a CPU)."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    from tests.test_notebook import NOTEBOOKS, errors_of, execute, fast

    book = nbformat.read(NOTEBOOKS / f"lesson.{lang}.ipynb", as_version=4)
    execute(fast(book, tmp_path / "runs", data_cache), tmp_path)
    assert errors_of(book) == []
    printed = "".join(o.text for c in book.cells if c.cell_type == "code" for o in c.outputs
                      if o.output_type == "stream")  # fmt: skip
    assert printed.count("cuda:0, ") >= 2  # both runs trained on the GPU (train.py's summary line)
