"""Device bugs caught on a CPU: every inspection door with the model on a stand-in CUDA GPU (tests/fake_device.py),
where a tensor of the device handed to numpy, or mixed with a CPU tensor, fails as on a real GPU.

The doors, each run as a user runs it, the stand-in doing the rest (torch.cuda says one GPU, so the run's device
"auto" is cuda:0 and load_run's model.to(cuda:0) puts the weights there): generate.main for every inspection option
(--attention DIR with and without a decoding, --head, --explain L.H and path, --why, --patch, --lens, --heads,
--words, --ablate, --repetition-penalty with --explain path, --score, --over-training, a decoding with and
without the cache), the notebook API (inspection/notebook.py: page, path, walkthrough, lens, why, heads, score),
and the live inspector's two requests (inspection/live.py: inspect and generate). Each prints, returns or
answers what the same call prints on the CPU. The stand-in itself is checked first: it refuses what CUDA refuses.

    python -m pytest tests/test_on_device.py -q
"""

import json
import re
from contextlib import nullcontext

import numpy as np
import pytest
import torch

import generate
import train
from inference import load_run
from inspection import notebook as nb
from inspection.live import LiveInspector
from tests.conftest import TINY
from tests.fake_device import CUDA, OnDevice, stand_in_cuda

PROMPT = "대한민국 국회는 법률을 제정한다"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, data_cache):
    """configs/tiny.toml for 300 steps (enough for --patch's texts to predict apart) with 2 snapshots (for
    --over-training)."""
    out = tmp_path_factory.mktemp("on_device") / "run"
    assert train.main(["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1",
                       "--train.sample_tokens=0", "--train.max_steps=300", "--train.eval_interval=150",
                       "--train.snapshots=2", "--out", str(out)]) == 0  # fmt: skip
    return out


def test_the_stand_in_refuses_what_cuda_refuses():
    with stand_in_cuda():
        x = torch.arange(6.0, device="cuda").view(2, 3)
        assert isinstance(x, OnDevice) and x.device == CUDA and x.is_cuda
        with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
            np.asarray(x)
        with pytest.raises(TypeError, match="can't convert cuda:0"):
            x.sum(0).numpy()
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            torch.where(torch.ones(2, 3, dtype=torch.bool), x, 0.0)  # a CPU mask, as path.py's once was
        with pytest.raises(RuntimeError, match="same device"):
            x + torch.ones(3)
        with pytest.raises(RuntimeError, match="indices should be either on cpu"):
            torch.ones(4)[torch.tensor([1], device=x.device)]
        with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
            torch.multinomial(x.softmax(-1), 1, generator=torch.Generator().manual_seed(0))
        # what CUDA allows: a CPU scalar, CPU indices, copies both ways, its own generator
        assert (x * torch.tensor(2.0)).tolist() == [[0, 2, 4], [6, 8, 10]]
        assert x[torch.tensor([1])].tolist() == [[3, 4, 5]]
        back = x.cpu()
        assert type(back) is torch.Tensor and back.device.type == "cpu" and np.asarray(back).sum() == 15
        back += 1  # a copy: the device's numbers stay
        assert x.sum().item() == 15 and x.new_zeros(2).device == CUDA and x.to(torch.float64).device == CUDA
        g = torch.Generator(device=x.device).manual_seed(0)
        assert g.device == CUDA and torch.multinomial(x.softmax(-1), 1, generator=g).device == CUDA
        module = torch.nn.Linear(3, 2).to(x.device)
        assert module.weight.device == CUDA and isinstance(module.weight, torch.nn.Parameter)
        assert module(x).device == CUDA
        assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
    assert not torch.cuda.is_available() or torch.version.cuda  # closed: the machine's own answers again


def test_a_run_loaded_on_the_stand_in_has_its_weights_there(run_dir):
    with stand_in_cuda():
        run = load_run(run_dir)
        assert run.device == CUDA
        assert all(isinstance(p, OnDevice) for p in run.model.parameters())


def without_font(page: str) -> str:
    """A page without its embedded font, whose file records when it was made (fontTools' head.modified)."""
    return re.sub(r"url\(data:font/ttf;base64,[^)]*\)", "url(FONT)", page)


def same_text(out: str, run_dir, out_dir) -> str:
    """What generate.py printed, its folders named alike."""
    return out.replace(str(out_dir), "OUT").replace(str(run_dir), "RUN")


DOORS = {  # generate.py's inspection options, each a door of its own
    "attention": ["--prompt", PROMPT, "--attention", "{out}", "--head", "1.0"],
    "attention of a decoding": ["--prompt", PROMPT, "--attention", "{out}", "--max-new-tokens", "4", "--seed", "1"],
    "explain head": ["--prompt", PROMPT, "--explain", "1.0", "--query", "3"],
    "explain path": ["--prompt", PROMPT, "--explain", "path"],
    "path with a repetition penalty": ["--prompt", PROMPT, "--explain", "path", "--repetition-penalty", "1.3",
                                       "--top-k", "5", "--top-p", "0.9"],
    "why": ["--prompt", PROMPT, "--why"],
    "patch": ["--prompt", "헌법에 선거", "--patch", "헌법에 정부는", "--patch-heads", "1.0", "--attention", "{out}"],
    "lens": ["--prompt", PROMPT, "--lens"],
    "heads": ["--heads", "--attention", "{out}"],
    "words": ["--prompt", PROMPT, "--words", "--explain", "0.1", "--head", "0.1"],
    "ablate": ["--prompt", PROMPT, "--explain", "path", "--ablate", "1.0,0.1"],
    "score": ["--score", "{text}", "--ablate", "1.1"],
    "over training": ["--prompt", PROMPT, "--attention", "{out}", "--over-training", "{run}"],
    "decoding": ["--prompt", PROMPT, "--max-new-tokens", "6", "--seed", "3", "--num-samples", "2"],
    "decoding without the cache": ["--prompt", PROMPT, "--max-new-tokens", "6", "--temperature", "0", "--no-cache"],
}


@pytest.mark.parametrize("door", DOORS)
def test_every_generate_option_on_the_device_prints_what_it_prints_on_a_cpu(door, run_dir, tmp_path, capsys):
    text = tmp_path / "text.txt"
    text.write_text(PROMPT + ". " + PROMPT + ".", encoding="utf-8")
    printed = {}
    for where in ("cpu", "device"):
        out_dir = tmp_path / where
        argv = [a.format(out=out_dir, text=text, run=run_dir) for a in DOORS[door]]
        with stand_in_cuda() if where == "device" else nullcontext():
            ckpt = [] if "--over-training" in argv else ["--ckpt", str(run_dir)]  # it opens RUN's snapshots
            assert generate.main([*ckpt, "--lang", "en", *argv]) == 0
        printed[where] = same_text(capsys.readouterr().out, run_dir, out_dir)
    assert printed["device"] == printed["cpu"]
    if "{out}" in DOORS[door]:  # the files the option wrote hold the same numbers
        for name in sorted(p.name for p in (tmp_path / "cpu").iterdir() if p.suffix in (".json", ".npz", ".html")):
            assert_same_file(tmp_path / "cpu" / name, tmp_path / "device" / name)


def assert_same_file(a, b) -> None:
    if a.suffix == ".html":
        assert without_font(a.read_text(encoding="utf-8")) == without_font(b.read_text(encoding="utf-8")), a.name
        return
    if a.suffix == ".json":
        assert json.loads(a.read_text(encoding="utf-8")) == json.loads(b.read_text(encoding="utf-8")), a.name
        return
    with np.load(a) as x, np.load(b) as y:
        assert sorted(x.files) == sorted(y.files)
        for key in x.files:
            np.testing.assert_array_equal(x[key], y[key], err_msg=f"{a.name}: {key}")


NOTEBOOK = {  # the notebook API, each call as a lesson makes it
    "page": lambda run: without_font(nb.page(run, PROMPT, roles=True).html),
    "path": lambda run: nb.path(run, PROMPT),
    "walkthrough": lambda run: nb.walkthrough(run, PROMPT, "1.0", 2),
    "lens": lambda run: nb.lens(run, PROMPT),
    "why": lambda run: nb.why(run, PROMPT, off="1.0"),
    "heads": lambda run: nb.heads(run),
    "score": lambda run: nb.score(run, PROMPT + ". " + PROMPT, off=[(0, 1)]),
}


@pytest.mark.parametrize("view", NOTEBOOK)
def test_every_notebook_view_on_the_device_is_what_it_is_on_a_cpu(view, run_dir):
    nb.language("en")
    on_cpu = NOTEBOOK[view](str(run_dir))
    with stand_in_cuda():
        on_device = NOTEBOOK[view](str(run_dir))  # nb loads the run: "auto" is the stand-in GPU
    assert on_device == on_cpu


def numbers_of(view: dict) -> dict:
    """A live view without its timing."""
    return {k: v for k, v in view.items() if k != "model_ms"}


def test_a_live_inspect_and_a_live_generation_on_the_device_answer_what_they_answer_on_a_cpu(run_dir):
    answers = {}
    for where in ("cpu", "device"):
        with stand_in_cuda() if where == "device" else nullcontext():
            inspector = LiveInspector(load_run(run_dir))
            (status, view), = inspector.inspect({"text": PROMPT, "top_k": 5, "ablate": [[1, 0]]})
            lines = list(inspector.generate({"text": PROMPT, "max_new_tokens": 3, "seed": 2, "temperature": 1.0}))
        assert status == 200 and lines[-1]["done"]
        answers[where] = numbers_of(view), [(line.get("piece"), line.get("text")) for line in lines], \
            numbers_of(lines[-1]["view"])
    assert answers["device"] == answers["cpu"]
