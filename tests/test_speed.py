"""The speed layer (model/speed/__init__.py): off, a training step and a cached decoding run the textbook files alone; on,
they run its variants, and a run trains and decodes to the same numbers either way.

python -m pytest tests/test_speed.py -q
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from model import GPT, GPTConfig
from model.sampling import generate
from model.speed import FastGPT, is_sped_up, speed_up
from tests.conftest import TINY_MODEL as TINY

ROOT = Path(__file__).resolve().parent.parent

# In a fresh interpreter: a training step (forward, backward, AdamW) and a cached greedy decoding of a tiny GPT,
# with every Python function called on the way recorded by sys.setprofile; prints the project's files that ran
# in each, and whether any module of the speed layer was imported.
TRACE = """
import json, sys, torch
from model import GPT, GPTConfig
from model.sampling import generate
speed = sys.argv[1] == "on"
torch.manual_seed(0)
model = GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32, dropout=0.1))
if speed:
    from model.speed import speed_up
    speed_up(model)
optimizer = torch.optim.AdamW(model.parameters())
idx = torch.randint(0, 64, (2, 17))
prompt = torch.zeros(1, 3, dtype=torch.long)
root = sys.argv[2]
files = {"step": set(), "decode": set()}

def traced(name, work):
    def record(frame, event, arg):
        path = frame.f_code.co_filename
        if event == "call" and path.startswith(root):
            files[name].add(path[len(root) + 1:])
    sys.setprofile(record)
    try:
        work()
    finally:
        sys.setprofile(None)

def step():
    model.train()
    _, loss = model(idx[:, :-1], idx[:, 1:], loss_only=True)
    loss.backward()
    optimizer.step()

traced("step", step)
model.eval()
traced("decode", lambda: generate(model, prompt, 20, temperature=0))  # past block_size: the window slides
imported = sorted(m for m in sys.modules if m.startswith("model.speed"))
print(json.dumps({name: sorted(found) for name, found in files.items()} | {"imported": imported}))
"""


def trace(speed: str) -> dict:
    done = subprocess.run([sys.executable, "-c", TRACE, speed, str(ROOT)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_off_a_training_step_and_a_cached_decoding_run_only_the_textbook_files():
    found = trace("off")
    assert found["imported"] == []
    assert found["step"] == ["model/attention.py", "model/gpt.py"]
    # sampling.py is the decoding loop (and its filters), memory.py its check that the cache fits and arguments.py
    # its check of the options' types, both before the loop, config.py the sizes the cache is made with
    assert found["decode"] == ["cli/arguments.py", "model/attention.py", "model/config.py", "model/gpt.py",
                               "model/kv_cache.py", "model/memory.py", "model/sampling.py"]


def test_on_the_same_step_and_decoding_run_the_speed_layer():
    """The other side of the test above: the tracer sees a variant when one runs."""
    found = trace("on")
    assert "model/speed/fast_gpt.py" in found["step"] and "model/speed/kernels.py" in found["step"]
    assert "model/speed/kernels.py" in found["step"]
    assert "model/speed/fast_gpt.py" in found["decode"]


def test_the_recording_forward_of_a_sped_up_model_runs_only_the_textbook_attention():
    """The speed layer replaces the attention's `combine` alone: a forward that asks for the maps (what every view
    records, inspection/trace.py) calls no function of model/speed/, and its maps are the plain model's."""
    from inspection.trace import trace_ids

    torch.manual_seed(0)
    plain = GPT(GPTConfig(**TINY))
    fast = speed_up(GPT(GPTConfig(**TINY, dropout=0.1)).eval())  # as inference/runs.py loads a run
    fast.load_state_dict(plain.state_dict())

    def model_files(work) -> tuple[list[str], object]:  # the files of model/ whose functions run in work(), its result
        ran = set()

        def record(frame, event, arg):
            if event == "call":
                ran.add(frame.f_code.co_filename)

        sys.setprofile(record)
        try:
            result = work()
        finally:
            sys.setprofile(None)
        return sorted(str(Path(f).relative_to(ROOT)) for f in ran if f.startswith(str(ROOT / "model"))), result

    files, traced = model_files(lambda: trace_ids(fast, [3, 1, 4, 1, 5, 9]))
    assert files == ["model/attention.py", "model/gpt.py"]
    assert "model/speed/kernels.py" in model_files(lambda: fast(torch.tensor([[3, 1, 4]])))[0]  # the kernel, unasked
    plain_maps = trace_ids(plain.eval(), [3, 1, 4, 1, 5, 9]).att
    assert traced.att.shape == (TINY["n_layer"], TINY["n_head"], 6, 6)
    assert np.array_equal(traced.att, plain_maps)


def test_the_cheap_dropout_goes_into_a_training_model_only():
    """A model put on in training mode (train.py's) draws the cheap masks; one put on in eval mode (a loaded run's)
    keeps nn.Dropout; train.py puts a loaded model (resume) into training mode first, so a resumed run draws the
    masks an uninterrupted one draws (tests/test_faults.py, an interrupted and resumed run)."""
    trained, loaded = speed_up(GPT(GPTConfig(**TINY, dropout=0.1))), speed_up(GPT(GPTConfig(**TINY, dropout=0.1)).eval())
    assert {type(m).__name__ for m in trained.modules() if isinstance(m, torch.nn.Dropout)} == {"CheapDropout"}
    assert {type(m) for m in loaded.modules() if isinstance(m, torch.nn.Dropout)} == {torch.nn.Dropout}


def test_the_swap_keeps_every_parameter_and_the_state_dict():
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY, dropout=0.1))
    before = {name: p for name, p in model.named_parameters()}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert not is_sped_up(model)
    assert speed_up(model) is model and isinstance(model, FastGPT) and is_sped_up(model)
    assert {name: p for name, p in model.named_parameters()} == before  # the very same tensors
    assert model.state_dict().keys() == state.keys()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    assert model.lm_head.weight is model.tok_emb.weight


def test_a_sped_up_model_computes_the_textbook_numbers():
    """Forward, loss and every gradient, in training with dropout 0 and in a cached decoding."""
    torch.manual_seed(0)
    plain = GPT(GPTConfig(**TINY, dropout=0.0))
    fast = speed_up(GPT(GPTConfig(**TINY, dropout=0.0)))
    fast.load_state_dict(plain.state_dict())
    idx = torch.randint(0, 64, (3, 17))
    results = []
    for model in (plain, fast):
        _, loss = model(idx[:, :-1], idx[:, 1:], loss_only=True)
        loss.backward()
        results.append((loss, {name: p.grad for name, p in model.named_parameters()}))
    torch.testing.assert_close(results[1][0], results[0][0], atol=1e-5, rtol=1e-5)
    for name, grad in results[0][1].items():
        torch.testing.assert_close(results[1][1][name], grad, atol=1e-5, rtol=1e-4, msg=name)
    prompt = idx[:2, :5]
    assert torch.equal(generate(fast.eval(), prompt, 40, temperature=0), generate(plain.eval(), prompt, 40, temperature=0))


@pytest.mark.slow
def test_a_run_trains_to_the_same_checkpoint_and_text_with_the_layer_on_and_off(tmp_path, data_cache):
    """train.py on the tiny config (dropout 0: the variants draw their dropout masks another way), speed layer on
    and off: the same weights in last/ and best/ up to rounding, and the same greedy text from each."""
    from inference import generate_text, load_run
    from train import main

    texts = {}
    for speed in ("true", "false"):
        out = tmp_path / speed
        assert main(["--config", "configs/tiny.toml", "--out", str(out), "--model.dropout=0.0", "--train.threads=1",
                     f"--train.speed_up={speed}", f"--data.cache_dir={data_cache}"]) == 0
        config = json.loads((out / "config.json").read_text())
        assert config["train"]["speed_up"] is (speed == "true")
        run = load_run(out, speed=speed == "true")
        assert is_sped_up(run.model) is (speed == "true")
        texts[speed] = generate_text(run, "대한민국은", max_new_tokens=30, temperature=0)
    for name in ("last", "best"):
        on, off = (load_file(tmp_path / s / name / "model.safetensors") for s in ("true", "false"))
        assert on.keys() == off.keys()
        for key in on:
            torch.testing.assert_close(on[key], off[key], atol=1e-4, rtol=1e-3, msg=f"{name}/{key}")
    assert texts["true"] == texts["false"]
