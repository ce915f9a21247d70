"""Every command (train.py, generate.py, data.prepare, hf.export_gpt2, hf.import_gpt2) swept with malformed
arguments: wrong types, out of range, non-UTF-8, paths that are files, directories, dangling symbolic links
or read-only. Each case must exit with code 2 and one line on stderr, with no traceback, and change nothing
in the run directory.

    python -m pytest tests/test_bad_input.py -q

The commands run in this process (their `main(argv)`), against one tiny run trained once for the module.
Arguments are as Python puts them in sys.argv: a byte that is not UTF-8 arrives as a lone surrogate.
"""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import generate
import train
from data import prepare
from hf import export_gpt2, import_gpt2
from tests.conftest import TINY
NOT_UTF8 = b"\xb4\xeb\xc7\xd1".decode("utf-8", "surrogateescape")  # "대한" in cp949, as it arrives in sys.argv


def read_only_dir(path: Path):
    """A directory nothing can be written to, even by root (a read-only tmpfs); None if none can be made."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        return path
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True).returncode:
        return None
    return path


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-input")
    cache = tmp_path_factory.getbasetemp() / "train-data-cache"
    run = root / "run"
    base = ["--config", str(TINY), f"--data.cache_dir={cache}", "--train.threads=1", "--train.sample_tokens=0"]
    assert train.main([*base, "--train.max_steps=2", "--train.eval_interval=2", "--out", str(run)]) == 0
    (root / "file.txt").write_text("x", encoding="utf-8")
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "dir").mkdir()
    (root / "full").mkdir()
    (root / "full" / "notes.txt").write_text("mine", encoding="utf-8")
    (root / "cp949.txt").write_bytes("대한민국 헌법".encode("cp949"))
    (root / "bad.toml").write_text("[train\nlr = 1\n", encoding="utf-8")
    shutil.copytree(run / "last", root / "lying")  # config.json claims sizes its weights do not have
    config = json.loads((root / "lying" / "config.json").read_text())
    config["model"]["vocab_size"] = 16_000_000
    (root / "lying" / "config.json").write_text(json.dumps(config))
    export_gpt2.export(run, root / "hf")  # a Hugging Face GPT-2 directory to import
    ro = read_only_dir(root / "ro")
    yield SimpleNamespace(root=root, run=run, cache=cache, ro=ro, base=base)
    if ro is not None and os.geteuid() == 0:
        subprocess.run(["umount", "-l", str(ro)], check=True)


def snapshot(directory: Path) -> dict:
    return {p.relative_to(directory): p.read_bytes() if p.is_file() else None for p in sorted(directory.rglob("*"))}


T, G, P, E, I = "train.py", "generate.py", "data.prepare", "hf.export_gpt2", "hf.import_gpt2"
CASES = [
    # train.py: the run directory
    (T, ["--out", "{root}/file.txt"], "is a file; pass --out a directory"),
    (T, ["--out", "{root}/dangling"], "is a symbolic link to"),
    (T, ["--out", "{root}/file.txt/run"], "cannot write the run directory"),
    (T, ["--out", "{ro}/run"], "cannot write the run directory"),
    (T, ["--out", "{run}"], "already holds a run (best/, last/, metrics.jsonl); continue it with --resume"),
    (T, ["--out", "{run}", "--resume", "--overwrite"], "pass only one"),
    (T, ["--out", "{root}/fresh", "--resume"], "nothing to resume"),
    (T, ["--out", "{run}", "--resume", "--model.n_embd=64"], "the model differs (model.n_embd 32 -> 64)"),
    (T, ["--out"], "argument --out: expected one argument"),
    (T, ["--out", "{root}/fresh", "--model.block_size=8000"], "the val split holds"),
    # train.py: the config file and its values
    (T, ["--config", "{root}/dir"], "is a directory"),
    (T, ["--config", "{root}/bad.toml"], "is not valid TOML"),
    (T, ["--config", "{root}/cp949.txt"], "is not valid TOML"),
    (T, ["--config", "{root}/nowhere.toml"], "not found"),
    (T, ["--config", f"{{root}}/{NOT_UTF8}.toml"], "not found"),
    (T, ["--train.seed=-1"], "train.seed = -1 must be"),
    (T, [f"--train.seed={2**64}"], f"train.seed = {2**64} is out of range: it does not fit in 64 bits"),
    (T, ["--train.seed=1.5"], "train.seed = 1.5 must be an integer"),
    (T, [f"--train.batch_size={NOT_UTF8}"], "train.batch_size = "),
    (T, ["--train.lr=fast"], "train.lr = 'fast' must be a number"),
    (T, ["--train.lr=inf"], "must be a finite number"),
    (T, ["--train.max_steps=0"], "train.max_steps = 0 must be positive"),
    (T, ["--train.max_steps=auto"], 'train.max_steps = "auto" needs train.time_budget'),
    (T, ["--train.time_budget=ten"], 'train.time_budget = "ten": cannot read the duration'),
    (T, ["--train.time_budget=0s"], "is not positive"),
    (T, ["--train.max_steps=auto", "--train.time_budget=0"], "train.time_budget = 0 must be a positive number of seconds"),
    (T, ["--train.time_budget=-inf"], "train.time_budget = -inf must be a positive number of seconds"),
    (T, ["--train.warmup_steps=auto"], "train.warmup_steps = 'auto' must be an integer"),
    (T, ["--model.n_layer=auto"], "model.n_layer = 'auto' must be an integer"),
    (T, ["--data.vocab_size=many"], 'data.vocab_size must be an integer or "auto"'),
    (T, ["--model.n_layer=-1"], "model.n_layer = -1 must be a positive integer"),
    (T, ["--model.dropout=1.5"], "model.dropout = 1.5 must be a number in [0, 1)"),
    (T, ["--train.device=tpu"], 'train.device = "tpu" is not one of'),
    (T, ["--bogus"], "cannot read option '--bogus'"),
    (T, ["--data.cache_dir={root}/file.txt", "--out", "{root}/fresh"], "cannot write the data cache"),
    (T, ["--data.cache_dir={ro}/cache", "--out", "{root}/fresh"], "cannot write the data cache"),
    (T, ["--data.source={root}/dir", "--out", "{root}/fresh"], "no *.txt files under"),
    (T, ["--data.source={root}/cp949.txt", "--out", "{root}/fresh"], "is not valid utf-8"),
    # generate.py
    (G, ["--prompt", NOT_UTF8], "the prompt is not valid UTF-8 (byte 0xB4 at position 0)"),
    (G, ["--prompt", f"대한{NOT_UTF8}"], "the prompt is not valid UTF-8 (byte 0xB4 at position 2)"),
    (G, ["stdin:strict"], "standard input is not UTF-8"),
    (G, ["stdin:surrogateescape"], "standard input is not valid UTF-8 (byte 0xB4 at position 0)"),
    (G, ["--prompt", "가", "--temperature", "inf"], "temperature inf must be >= 0 (and finite)"),
    (G, ["--prompt", "가", "--temperature", "nan"], "temperature nan must be"),
    (G, ["--prompt", "가", "--temperature", "warm"], "invalid float value: 'warm'"),
    (G, ["--prompt", "가", "--repetition-penalty", "inf"], "repetition_penalty inf must be > 0 (and finite)"),
    (G, ["--prompt", "가", "--seed", str(2**64)], f"argument --seed: {2**64} does not fit in 64 bits"),
    (G, ["--prompt", "가", "--seed", "-1"], "seed -1 must be between 0 and"),
    (G, ["--prompt", "가", "--seed", "x"], "invalid integer value: 'x'"),
    (G, ["--prompt", "가", "--max-new-tokens", str(10**13)], "needs at least 80,000.0 GB but cpu has"),
    (G, ["--prompt", "가", "--max-new-tokens", "1.5"], "invalid integer value: '1.5'"),
    (G, ["--prompt", "가", "--max-new-tokens"], "expected one argument"),
    (G, ["--prompt", "가", "--num-samples", "-3"], "num_samples -3 must be >= 1"),
    (G, ["--prompt", "가", "--top-k", "0"], "top_k 0 must be a positive integer"),
    (G, ["--prompt", "가", "--top-p", "2"], "top_p 2.0 must be in (0, 1]"),
    (G, ["--ckpt", "{root}/lying", "--prompt", "가"], "implies (16000000, 32)"),
    (G, ["--ckpt", "{root}/file.txt", "--prompt", "가"], "no model.safetensors in"),
    (G, ["--ckpt", "{root}/dangling", "--prompt", "가"], "does not exist"),
    (G, ["--ckpt", "{root}/dir", "--prompt", "가"], "no model.safetensors in"),
    (G, ["--ckpt", f"{{root}}/{NOT_UTF8}", "--prompt", "가"], "does not exist"),
    (G, ["--runs-dir", "{root}/file.txt", "--prompt", "가"], "no trained run under"),
    (G, ["--score", "{root}/dir"], "is not a file"),
    (G, ["--score", "{root}/dangling"], "is not a file"),
    (G, ["--score", "{root}/cp949.txt"], "is not UTF-8"),
    (G, ["--prompt", "가", "--attention", "{root}/file.txt"], "is a file; give --attention a directory"),
    (G, ["--prompt", "가", "--attention", "{ro}/maps"], "give --attention a directory you can write"),
    (G, ["--prompt", "가", "--device", "cuda:99"], "--device"),
    (G, ["--prompt", "가", "--head", "x.y"], "must be LAYER.HEAD"),
    (G, ["--prompt", "가", "--explain", "paths"], "must be LAYER.HEAD with two numbers, e.g. --explain 0.1 or path"),
    (G, ["--prompt", "가", "--explain", "path", "--query", "9"], "--query 9 is outside the"),
    (G, ["--prompt", "가", "--head", "9.9"], "head 9.9 does not exist"),
    (G, ["--bogus"], "unrecognized arguments: --bogus"),
    # python -m data.prepare
    (P, ["--config", "{root}/dir"], "is a directory"),
    (P, ["--config"], "argument --config: expected one argument"),
    (P, ["--data.cache_dir={root}/file.txt"], "cannot write the data cache"),
    (P, ["--data.cache_dir={ro}/cache"], "cannot write the data cache"),
    (P, ["--data.source={root}/dangling"], "dangling does not exist"),
    (P, ["--data.source={root}/dir"], "no *.txt files under"),
    (P, [f"--data.source={{root}}/{NOT_UTF8}.txt"], "does not exist"),
    (P, ["--data.vocab_size=big"], "data.vocab_size must be an integer"),
    (P, ["--data.val_fraction=2"], "data.val_fraction must be between 0 and 1"),
    (P, ["--data.encoding=klingon"], "unknown data.encoding 'klingon'"),
    (P, ["--data.text_field=5"], "data.text_field = 5 must be a string"),
    (P, ["--bogus"], "bad option '--bogus'"),
    # python -m hf.export_gpt2
    (E, ["{run}", "{root}/file.txt"], "is a file; give a directory path"),
    (E, ["{run}", "{root}/dangling"], "is a symbolic link to"),
    (E, ["{run}", "{root}/file.txt/out"], "cannot write"),
    (E, ["{run}", "{ro}/out"], "cannot write"),
    (E, ["{run}", "{run}", "--force"], "contains the checkpoint"),
    (E, ["{run}", "{root}/full"], "exists and is not empty"),
    (E, ["{root}/nowhere", "{root}/out"], "does not exist"),
    (E, ["{root}/lying", "{root}/out"], "implies (16000000, 32)"),
    (E, [], "the following arguments are required"),
    # python -m hf.import_gpt2
    (I, ["{root}/hf", "{root}/file.txt"], "is a file; give a directory path"),
    (I, ["{root}/hf", "{root}/dangling"], "is a symbolic link to"),
    (I, ["{root}/hf", "{root}/file.txt/out"], "cannot write"),
    (I, ["{root}/hf", "{ro}/out"], "cannot write"),
    (I, ["{root}/hf", "{root}/hf", "--force"], "contains the checkpoint"),
    (I, ["{root}/hf", "{root}/full"], "exists and is not empty"),
    (I, ["{root}/nowhere", "{root}/out"], "does not exist"),
    (I, ["{root}/file.txt", "{root}/out"], "is a file"),
    (I, ["{run}", "{root}/out"], "only GPT-2 (model_type 'gpt2') can be imported"),
    (I, [NOT_UTF8, "{root}/out"], "does not exist"),
    (I, ["{root}/hf"], "the following arguments are required"),
]


def call(command: str, argv: list[str], env, monkeypatch) -> int:
    if command == T:
        return train.main([*env.base, *(argv if "--out" in argv else [*argv, "--out", str(env.root / "fresh")])])
    if command == G:
        if argv[0].startswith("stdin:"):
            errors = argv[0].removeprefix("stdin:")
            stdin = io.TextIOWrapper(io.BytesIO("대한민국\n".encode("cp949")), encoding="utf-8", errors=errors)
            monkeypatch.setattr(sys, "stdin", stdin)
            argv = []
        return generate.main(argv if "--ckpt" in argv or "--runs-dir" in argv else ["--ckpt", str(env.run), *argv])
    if command == P:
        return prepare.main(argv if argv[:1] == ["--config"] else ["--config", str(TINY), f"--data.cache_dir={env.cache}", *argv])
    if command == I:
        return import_gpt2.main(argv)
    return export_gpt2.main(argv)


@pytest.mark.parametrize("command, argv, message", CASES, ids=[f"{c} {' '.join(a)}"[:80] for c, a, _ in CASES])
def test_malformed_argument_is_one_line_exit_2_and_changes_nothing(command, argv, message, env, capsys, monkeypatch):
    if any("{ro}" in a for a in argv) and env.ro is None:
        pytest.skip("no read-only directory can be made here")
    argv = [a.format(root=env.root, run=env.run, ro=env.ro) for a in argv]
    before = snapshot(env.run)
    capsys.readouterr()
    code = call(command, argv, env, monkeypatch)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    assert snapshot(env.run) == before
    assert not (env.root / "fresh").exists() and not (env.root / "out").exists()
