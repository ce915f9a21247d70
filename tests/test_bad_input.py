"""Bad input, the one home of its cases: what a user can give a command wrongly (an argument, an option, a config
value, a path, a file, a run directory, a text), answered with one `error:` line on stderr, exit code 2, no
traceback and every file as it was; or, where the input is odd but harmless, read right.

    python -m pytest tests/test_bad_input.py -q

1. Every command (train.py, generate.py, data.prepare, hf.export_gpt2, hf.import_gpt2) case by case: wrong types,
   out of range, non-UTF-8, paths that are files, directories, dangling symbolic links or read-only.
2. Sweeps generated rather than listed (issue 28): every config key with a value of the wrong type, out of range
   and of an absurd size; every numeric option of generate.py; every file a command reads made missing, empty,
   truncated, a directory, unreadable, of another format and of valid-but-wrong content. The keys come from the
   config dataclasses and the values from their types, so a key added tomorrow is swept too; the files are those
   of a trained run, its export and its import. Where a corruption is not bad input it is left out, with the
   reason beside it (`SKIP`): an absent meta.json is a checkpoint without one, an empty TOML file is every default.
3. The classes of issue 28, each test named for its class (test_N_...) and failing without its fix: 1 a directory
   that is not a run, 2 a resume on changed data, 3 numbers, sizes and outputs that used to end in a traceback,
   4 hostile Hugging Face configs, 5 special files wherever a file is expected and a bound on every read, 6 NaN or inf weights, 8 a UnicodeError of another
   kind, a train state lacking fields, a device that cannot compute, 9 causes named right; and the page, which
   shows every text as text (Chromium).
4. Entries of RUN/snapshots/ that are not the run's: named and left alone.

The modules whose work these check first: cli/command.py (one parser, error line and exit code for every entry
point), cli/errors.py (UserError: one line, exit 2), model/memory.py (sizes refused before they are allocated)
and storage/user_files.py (a file the user names: a regular file, read within a bound).

What is not here: a module's own file keeps the refusals of that module's own options beside the tests of what the
options do (test_export_gpt2.py: its out directory; test_generate.py: its options, one table); faults (signals,
kill -9, crashes, full disks, read errors) are in tests/test_faults.py.

The commands run in this process (their `main(argv)`), against one tiny run trained once for the module, except
where a real process is the point (a FIFO that would block forever). Arguments are as Python puts them in
sys.argv: a byte that is not UTF-8 arrives as a lone surrogate.
"""

import io
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import types
import typing
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

import pytest
import safetensors.torch
import torch

import generate
import train
from cli.command import integer
from data import prepare, sources
from data.config import DataConfig, DataError
from hf import export_gpt2, import_gpt2
from inspection.html import page as page_html, title_of
from inspection.views import VIEWS, Settings
from model.config import GPTConfig
from storage.checkpoint import load_model
from tests.conftest import CHROMIUM, ROOT, TINY, biased_model, common_args, look_at, copy_run, korean_texts, read_only_dir, refused
from training.config import LogConfig, TrainConfig

NOT_UTF8 = b"\xb4\xeb\xc7\xd1".decode("utf-8", "surrogateescape")  # "대한" in cp949, as it arrives in sys.argv


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
    assert import_gpt2.main([str(root / "hf"), str(root / "imported")]) == 0  # a checkpoint dir, not a run
    korean_texts(root)  # texts/: a corpus as .txt and .jsonl and a config, for the sweep of damaged files
    ro = read_only_dir(root / "ro")
    yield SimpleNamespace(root=root, run=run, cache=cache, ro=ro, base=base)
    if ro is not None and os.geteuid() == 0:
        subprocess.run(["umount", "-l", str(ro)], check=True)


def snapshot(directory: Path) -> dict:
    return {p.relative_to(directory): p.read_bytes() if p.is_file() else None for p in sorted(directory.rglob("*"))}


# ---- 1. every command, case by case ---------------------------------------------------------------------

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
    (T, ["--out", "{run}", "--resume", "--model.n_embd=64"], "the run has model.n_embd = 32 from its first step"),
    (T, ["--out"], "argument --out: expected one argument"),
    (T, ["--out", "{root}/fresh", "--model.block_size=8000"], "the val split holds"),
    (T, ["--out", "{root}/fresh", "--train.heads_off=1.7"], "train.heads_off: head 1.7 is not in this model"),
    (T, ["--out", "{root}/fresh", "--train.heads_off=0.1,0"], "train.heads_off: head 0.1 is given twice"),
    (T, ["--out", "{root}/fresh", "--train.heads_off=0,1"], "train.heads_off names every head of the model"),
    (T, ["--out", "{root}/fresh", "--train.heads_off=１.０"], 'train.heads_off names "１.０"; name a head as'),
    (T, ["--out", "{root}/fresh", "--train.heads_off=[0.1]"], 'train.heads_off = [0.1] must name one head or layer'),
    (T, ["--out", "{root}/fresh", '--train.heads_off=["0.1,1.0"]'], "must name one head or layer per string"),
    # train.py: the config file and its values
    (T, ["--config", "{root}/dir"], "is a directory"),
    (T, ["--config", "{root}/bad.toml"], "is not valid TOML"),
    (T, ["--config", "{root}/cp949.txt"], "is not valid TOML"),
    (T, ["--config", "{root}/nowhere.toml"], "nowhere.toml does not exist"),
    (T, ["--config", f"{{root}}/{NOT_UTF8}.toml"], "does not exist"),
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
    (T, ["--data.unit=letters"], 'data.unit must be "syllables" or "jamo", got \'letters\''),
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
    (G, ["--prompt", "대한민국 국회는", "--patch", "대한민국 정부와 국회는"], "patching needs the same number of tokens"),
    (G, ["--prompt", "가", "--why", "없는토큰이다"], "is not one token of this model's vocabulary"),
    (G, ["--prompt", "가", "--why", "#99999"], "is not a token id of this model"),
    (G, ["--prompt", "가", "--why", ",가"], "must name one token or two"),
    (G, ["--prompt", "대한민국", "--why", "--query", "40"], "--query 40 is outside the"),
    (G, ["--prompt", "가", "--patch-heads", "1.0"], "add --patch"),
    (G, ["--patch", "가"], "need --prompt TEXT to look at"),
    (G, ["--prompt", "가", "--temperature", "inf"], "temperature inf must be >= 0 (and finite)"),
    (G, ["--prompt", "가", "--temperature", "nan"], "temperature nan must be"),
    (G, ["--prompt", "가", "--temperature", "warm"], "invalid float value: 'warm'"),
    (G, ["--prompt", "가", "--repetition-penalty", "inf"], "repetition_penalty inf must be > 0 (and finite)"),
    (G, ["--prompt", "가", "--seed", str(2**64)], f"argument --seed: {2**64} does not fit in 64 bits"),
    (G, ["--prompt", "가", "--seed", "-1"], "seed must be an int between 0 and"),
    (G, ["--prompt", "가", "--words"], "--words reads attention by word"),  # alone it had nothing to apply to
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
    (G, ["--ckpt", "{root}/hf", "--prompt", "가"], "holds a Hugging Face 'gpt2' model, not a checkpoint of this project; "
                                                   "import it first: python -m hf.import_gpt2 "),
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
    (G, ["--prompt", "가", "--head", "9.9"], "head 9.9 is not in this model"),
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
    (P, ["--data.unit=Jamo"], 'data.unit must be "syllables" or "jamo", got \'Jamo\''),
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


# ---- 2. the config keys: values generated from each field's type ----------------------------------------

SECTIONS = {"data": DataConfig, "model": GPTConfig, "train": TrainConfig, "log": LogConfig}
SCALARS = {int: "5", float: "1.5", str: '"x"', bool: "true"}  # a TOML value of each type
OUT_OF_RANGE = {int: ["-1"], float: ["-1.0", "nan"], str: ['"a\\u0000b"'], bool: []}  # NUL: in no name or path
ABSURD = {int: [str(10**30)], float: ["inf"], str: ['"' + "x" * 100_000 + '"'], bool: []}  # 10**30: past 64 bits


def field_types(hint) -> tuple:
    return typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)


def takes(kinds: tuple, t: type) -> bool:
    """Whether a field of these types takes a value of type t (an integer widens to a float)."""
    return t in kinds or (t is int and float in kinds)


def config_cases() -> list[tuple[str, str, str]]:
    """(key, kind, TOML value) for every key of every table."""
    cases = []
    for section, cls in SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            if cls is GPTConfig and f.name == "vocab_size":  # not a key: it comes from the tokenizer
                continue
            key, kinds = f"{section}.{f.name}", field_types(hints[f.name])
            cases += [(key, "wrong type", value) for value in ("[1]", "{a = 1}")]
            cases += [(key, "wrong type", v) for t, v in SCALARS.items() if not takes(kinds, t)][:1]  # one scalar
            main = next(t for t in (float, int, str, bool) if t in kinds)  # the type its range is of
            cases += [(key, "out of range", value) for value in OUT_OF_RANGE[main]]
            cases += [(key, "absurd size", value) for value in ABSURD[main]]
    return cases


CONFIG_CASES = config_cases()


def one_line_refusal(code: int, err: str, names: list[str]) -> None:
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert any(name in err for name in names), err


@pytest.mark.parametrize("key, kind, value", CONFIG_CASES, ids=[f"{k} {kind} {v[:12]}" for k, kind, v in CONFIG_CASES])
def test_every_config_key_refuses_a_bad_value(env, tmp_path, key, kind, value, capsys):
    before = snapshot(env.run), sorted(os.listdir(env.cache))
    capsys.readouterr()
    code = train.main([*env.base, f"--{key}={value}", "--out", str(tmp_path / "fresh")])
    one_line_refusal(code, capsys.readouterr().err, [key])
    assert (snapshot(env.run), sorted(os.listdir(env.cache))) == before
    assert not (tmp_path / "fresh").exists()


# ---- 2. generate.py's numeric options: values generated from each option's type -------------------------

def numeric_options() -> list[tuple[str, type]]:
    """(option, int or float) of every numeric option of generate.py, read from its parser."""
    parsers = []

    class Recording(generate.ArgumentParser):
        def parse_args(self, *args, **kwargs):
            parsers.append(self)
            return super().parse_args(*args, **kwargs)

    generate.ArgumentParser, original = Recording, generate.ArgumentParser
    try:
        generate.parse_args([])
    finally:
        generate.ArgumentParser = original
    kinds = {integer: int, float: float}
    return [(a.option_strings[0], kinds[a.type]) for a in parsers[0]._actions if a.type in kinds]


OPTION_CASES = [(option, kind, value) for option, t in numeric_options() for kind, values in (
    ("wrong type", ["x", "1.5" if t is int else "[1]"]),
    ("out of range", (["-1"] if option != "--query" else []) + (["nan"] if t is float else [])),  # --query -1: the last
    ("absurd size", [str(10**30) if t is int else "1e999"]),
) for value in values]  # fmt: skip


@pytest.mark.parametrize("option, kind, value", OPTION_CASES, ids=[f"{o} {k} {v[:12]}" for o, k, v in OPTION_CASES])
def test_every_numeric_option_refuses_a_bad_value(env, option, kind, value, capsys):
    before = snapshot(env.run)
    explain = ["--explain", "0.0"] if option == "--query" else []
    capsys.readouterr()
    code = generate.main(["--ckpt", str(env.run), "--prompt", "가", *explain, option, value])
    one_line_refusal(code, capsys.readouterr().err, [option, option.removeprefix("--").replace("-", "_")])
    assert snapshot(env.run) == before


def test_the_config_sweep_covers_every_key_three_ways():
    keys = {f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in fields(cls)} - {"model.vocab_size"}
    assert {key for key, _, _ in CONFIG_CASES} == keys
    for key in keys:
        kinds = {kind for k, kind, _ in CONFIG_CASES if k == key}
        bools = key in ("model.bias", "model.mlp", "train.speed_up", "log.wandb")  # two values: nothing is out of range or absurd
        assert kinds == ({"wrong type"} if bools else {"wrong type", "out of range", "absurd size"}), key


# ---- 2. the files each command reads: corruptions generated from each file's format ---------------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))  # another format: binary, NUL bytes, not UTF-8


def wrong_json(data: bytes) -> bytes:
    """The object's fields all there, each of the wrong kind."""
    obj = json.loads(data)
    return json.dumps({key: ["wrong"] for key in obj}).encode()


def wrong_safetensors(data: bytes) -> bytes:
    """The same names, each tensor a row longer than the config implies."""
    tensors = safetensors.torch.load(data)
    return safetensors.torch.save({k: torch.cat([t, t[:1]]) if t.dim() else t for k, t in tensors.items()})


def wrong_torch(data: bytes) -> bytes:
    """A torch file that loads with weights_only=True but holds a list, not the train state."""
    buffer = io.BytesIO()
    torch.save([1, 2, 3], buffer)
    return buffer.getvalue()


def truncated_text(data: bytes) -> bytes:
    """Cut inside the last character of more than one byte: the text ends in the middle of a syllable."""
    return data[: max(i for i, b in enumerate(data) if b >= 0xC0) + 1]


FORMATS = {  # format -> (truncate, valid but wrong content, another format)
    "json": (lambda d: d[: len(d) // 2], wrong_json, PNG),
    "safetensors": (lambda d: d[: len(d) // 2], wrong_safetensors, b'{"a": 1}'),
    "torch": (lambda d: d[: len(d) // 2], wrong_torch, b'{"a": 1}'),
    "text": (truncated_text, None, PNG),
    "jsonl": (truncated_text, lambda d: b'{"body": "no text field"}\n' * 3, PNG),
    "toml": (lambda d: d[: d.index(b"[") + 3], lambda d: b"[train]\nbogus = 1\n", PNG),  # cut inside "[data]"
}
CORRUPTIONS = ("missing", "empty", "truncated", "a directory", "unreadable", "another format", "wrong content")
SKIP = {  # (directory, file, corruption) or (format, corruption): why it is not bad input
    ("run/best", "meta.json", "missing"): "a checkpoint may lack meta.json (a special token of its tokenizer ends "
                                          "documents); a run's last/ may not (resuming compares its data)",
    ("run", "config.json", "missing"): "written at the start of a run; a run killed before it has none",
    ("toml", "empty"): "an empty config is every default",
}

# (name, command, directory to copy, file inside it, format, argv); {dir} is the copy, {out} a path to write
CKPT_FILES = [("config.json", "json"), ("model.safetensors", "safetensors"), ("tokenizer.json", "json"),
              ("meta.json", "json")]  # fmt: skip
TARGETS = (
    [(f"generate --ckpt: {f}", generate.main, "run/best", f, fmt, ["--ckpt", "{dir}", "--prompt", "가"])
     for f, fmt in CKPT_FILES]
    + [(f"export: {f}", export_gpt2.main, "run/best", f, fmt, ["{dir}", "{out}"]) for f, fmt in CKPT_FILES]
    + [(f"train.init_from: {f}", train.main, "run/best", f, fmt, ["--train.init_from={dir}", "--out", "{out}"])
       for f, fmt in CKPT_FILES]
    + [(f"train --resume: last/{f}", train.main, "run", f"last/{f}", fmt, ["--out", "{dir}", "--resume",
                                                                           "--train.max_steps=4"])
       for f, fmt in [*CKPT_FILES[:2], ("meta.json", "json"), ("train_state.pt", "torch")]]
    + [("train --resume: run config.json", train.main, "run", "config.json", "json", ["--out", "{dir}", "--resume",
                                                                                     "--train.max_steps=4"])]
    + [(f"import: {f}", import_gpt2.main, "hf", f, fmt, ["{dir}", "{out}"])
       for f, fmt in [("config.json", "json"), ("model.safetensors", "safetensors"), ("tokenizer.json", "json")]]
    + [("generate --score", generate.main, "texts", "corpus.txt", "text", ["--ckpt", "{run}", "--score", "{file}"]),
       ("generate --heads-text", generate.main, "texts", "corpus.txt", "text",
        ["--ckpt", "{run}", "--heads", "--heads-text", "{file}"]),
       ("train data.source .txt", train.main, "texts", "corpus.txt", "text", ["--data.source={file}", "--out", "{out}"]),
       ("train data.source .jsonl", train.main, "texts", "corpus.jsonl", "jsonl",
        ["--data.source={file}", "--out", "{out}"]),
       ("train data.val_source", train.main, "texts", "corpus.txt", "text",
        ["--data.source={dir}/corpus.jsonl", "--data.val_source={file}", "--out", "{out}"]),
       ("train --config", train.main, "texts", "config.toml", "toml", ["--config", "{file}", "--out", "{out}"]),
       ("prepare --config", prepare.main, "texts", "config.toml", "toml", ["--config", "{file}"]),
       ("prepare data.source", prepare.main, "texts", "corpus.txt", "text", ["--data.source={file}"])]
)  # fmt: skip
FILE_CASES = [(t, c) for t in TARGETS for c in CORRUPTIONS if (t[2], t[3], c) not in SKIP and (t[4], c) not in SKIP
              and not (c == "wrong content" and FORMATS[t[4]][1] is None)]  # fmt: skip


def corrupt(file: Path, fmt: str, corruption: str) -> None:
    """Make `file` (of format `fmt`) missing, empty, truncated, a directory, unreadable, another format or wrong."""
    data = file.read_bytes()
    truncate, wrong, other = FORMATS[fmt]
    file.unlink()
    if corruption == "a directory":
        file.mkdir()
    elif corruption == "unreadable":  # root reads a file whatever its mode: a loop of links cannot be opened
        file.symlink_to(file.name)
    elif corruption != "missing":
        content = {"empty": b"", "truncated": truncate(data), "another format": other}.get(corruption)
        if corruption == "wrong content":
            content = wrong(data)
        file.write_bytes(content)


@pytest.mark.parametrize("target, corruption", FILE_CASES, ids=[f"{t[0]} {c}" for t, c in FILE_CASES])
def test_every_file_a_command_reads_is_refused_when_damaged(env, tmp_path, target, corruption, capsys):
    name, command, copied, inside, fmt, argv = target
    directory = tmp_path / Path(copied).name
    shutil.copytree(env.root / copied, directory, symlinks=True)
    file = directory / inside
    corrupt(file, fmt, corruption)
    argv = [a.format(dir=directory, out=tmp_path / "out", run=env.run, file=file) for a in common_args(command, argv, env)]
    before = snapshot(directory), snapshot(env.run), sorted(os.listdir(env.cache))
    capsys.readouterr()
    code = command(argv)
    one_line_refusal(code, capsys.readouterr().err, [file.name, str(directory), "train.bogus"])
    assert (snapshot(directory), snapshot(env.run), sorted(os.listdir(env.cache))) == before
    assert not (tmp_path / "out").exists()


# ---- 3.1 a directory that is not this project's run -----------------------------------------------------

def test_1_training_into_an_export_or_an_import_is_refused_and_both_still_load(env, capsys):
    for directory, what in ((env.root / "hf", "a Hugging Face 'gpt2' model"), (env.root / "imported", "a checkpoint")):
        before = snapshot(directory)
        for flag in ([], ["--overwrite"], ["--resume"]):
            refused(train.main, [*env.base, "--out", str(directory), *flag], f"not a run directory of this project "
                    f"(it holds config.json (not a run's: {what}))", capsys)  # fmt: skip
        assert snapshot(directory) == before  # no .lock, config.json as it was
    assert load_model(env.root / "imported").config.n_embd == 32
    assert import_gpt2.open_hf(env.root / "hf").config.n_embd == 32


def test_1_crash_repair_never_runs_in_a_directory_it_refuses(env, tmp_path, capsys):
    mine = tmp_path / "mine"
    (mine / "last.old").mkdir(parents=True)  # names a crashed save would leave, beside files of the user's
    (mine / "last.old" / "notes.txt").write_text("keep", encoding="utf-8")
    (mine / ".config.json.1234.tmp").write_text("keep", encoding="utf-8")
    (mine / "model.safetensors").write_bytes(b"mine")
    before = snapshot(mine)
    for flag in ([], ["--overwrite"]):
        refused(train.main, [*env.base, "--out", str(mine), *flag], "(it holds model.safetensors)", capsys)
    assert snapshot(mine) == before


def test_1_force_never_replaces_a_run_or_a_folder_of_the_users(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work", encoding="utf-8")
    for target in (run, run / "last", mine):
        before = snapshot(target)
        for command, source in ((export_gpt2.main, env.run), (import_gpt2.main, env.root / "hf")):
            refused(command, [str(source), str(target), "--force"], "which this command does not write", capsys)
        assert snapshot(target) == before
    assert export_gpt2.main([str(env.run), str(tmp_path / "export")]) == 0
    assert export_gpt2.main([str(env.run), str(tmp_path / "export"), "--force"]) == 0  # an export it may replace


# ---- 3.2 --resume on changed data -----------------------------------------------------------------------

@pytest.mark.slow
def test_2_resume_refuses_a_changed_validation_text_or_corpus(tmp_path, capsys):
    texts = [f.read_text(encoding="utf-8") for f in sources.builtin_files()]
    corpus, held = tmp_path / "corpus.txt", tmp_path / "held.txt"
    corpus.write_text(texts[0], encoding="utf-8")
    held.write_text(texts[-1], encoding="utf-8")
    args = ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", "--train.threads=1",
            "--train.sample_tokens=0", f"--data.source={corpus}", f"--data.val_source={held}", "--out", str(tmp_path / "run")]  # fmt: skip
    assert train.main([*args, "--train.max_steps=2", "--train.eval_interval=2"]) == 0
    for path, what in ((held, "the validation text"), (corpus, "the training text")):
        original = path.read_text(encoding="utf-8")
        path.write_text(original + "\n대한민국의 수도는 서울이다.", encoding="utf-8")
        before = snapshot(tmp_path / "run")
        refused(train.main, [*args, "--resume", "--train.max_steps=4"], f"{what} changed since it was saved", capsys)
        assert snapshot(tmp_path / "run") == before
        path.write_text(original, encoding="utf-8")
    assert train.main([*args, "--resume", "--train.max_steps=4"]) == 0  # the same data again: it goes on


# ---- 3.3 anything but the project's own error type, at the entry points ---------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--head", "².0"], "--head '².0' must be LAYER.HEAD"),  # "²".isdigit(), but int("²") fails
    (["--explain", "0.²"], "--explain '0.²' must be LAYER.HEAD"),
    (["--attention", "{out}", "--layers", "²"], "must list layers like 0,2 or 0-3"),
    (["--max-new-tokens", str(2**63)], "tokens needs at least"),  # past int64: torch.empty overflowed
    (["--max-new-tokens", "1", "--num-samples", str(10**9)], "num_samples 1000000000 is more than 4096"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)  # fmt: skip
def test_3_numbers_and_sizes_are_refused_before_anything_is_built(env, tmp_path, argv, message, capsys):
    argv = [a.format(out=tmp_path / "maps") for a in argv]
    refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가", *argv], message, capsys)
    assert not (tmp_path / "maps").exists()


def test_3_a_model_too_big_for_memory_is_refused_before_it_is_built(env, capsys, monkeypatch):
    def not_built(config):
        pytest.fail(f"a model of {config} was built")

    monkeypatch.setattr("training.setup.GPT", not_built)  # where train() builds its model
    for size in (["--model.n_embd=65536", "--model.n_head=1"], ["--train.batch_size=100000000"],
                 ["--train.sample_tokens=1000000000000"]):  # fmt: skip
        refused(train.main, [*env.base, *size, "--out", str(env.root / "fresh")], "GB available; lower", capsys)
    assert not (env.root / "fresh").exists()


def test_3_attention_files_are_moved_in_whole_or_not_at_all(env, tmp_path, capsys):
    out = tmp_path / "maps"
    (out / "attention.npz").mkdir(parents=True)  # the name of one file of the set is taken by a directory
    (out / "layer_0.png").write_bytes(b"an old picture")
    before = snapshot(out)
    refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가나", "--attention", str(out)],
            f"{out / 'attention.npz'} is a directory", capsys)  # fmt: skip
    assert snapshot(out) == before  # no new PNG beside the old files, no temporary file
    ro = read_only_dir(tmp_path / "ro")
    if ro is not None:
        try:
            refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가나", "--attention", str(ro)], "cannot write",
                    capsys)  # fmt: skip
        finally:
            if os.geteuid() == 0:
                subprocess.run(["umount", "-l", str(ro)], check=True)
    assert generate.main(["--ckpt", str(env.run), "--prompt", "가나", "--attention", str(tmp_path / "new")]) == 0
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == [
        "attention.html", "attention.npz", "explain.npz", "layer_0.png", "layer_1.png"]


def test_3_a_checkpoint_whose_meta_json_names_another_dtype_reads_its_data_in_the_data_s_own(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    meta = json.loads((run / "last" / "meta.json").read_text(encoding="utf-8"))
    (run / "last" / "meta.json").write_text(json.dumps({**meta, "dtype": "float64"}), encoding="utf-8")
    capsys.readouterr()
    assert generate.main(["--ckpt", str(run / "last"), "--heads"]) == 0
    assert "on the run's validation split" in capsys.readouterr().out


# ---- 3.4 a hostile Hugging Face config.json -------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    ({"activation_function": ["gelu"]}, "sets activation_function = ['gelu']"),  # unhashable: a TypeError
    ({"n_embd": None, "n_inner": 128}, "model.n_embd = None must be a positive integer"),  # 4 * None
    ({"n_embd": "32", "n_inner": 128}, "model.n_embd = '32' must be a positive integer"),
    ({"n_layer": 10**6}, "model.n_layer = 1000000 is absurdly large"),  # built for minutes
    ({"n_positions": 1 << 40}, "model.block_size = 1099511627776 is absurdly large"),
    ({"layer_norm_epsilon": "1e-5"}, "model.layer_norm_eps = '1e-5' must be a positive number"),
    ({"layer_norm_epsilon": float("nan")}, "model.layer_norm_eps = nan must be a positive number"),
    ({"resid_pdrop": [0.1]}, "model.dropout = [0.1] must be a number"),
    ({"eos_token_id": 2**70}, f"names eos_token_id {2**70}"),  # the tokenizer's u32 overflowed
], ids=lambda v: ",".join(v) if isinstance(v, dict) else None)  # fmt: skip
def test_4_a_hostile_hugging_face_config_is_refused_before_anything_is_built(env, tmp_path, changes, message, capsys,
                                                                             monkeypatch):
    src = tmp_path / "src"
    shutil.copytree(env.root / "hf", src)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    (src / "config.json").write_text(json.dumps({**config, **changes}), encoding="utf-8")
    monkeypatch.setattr(import_gpt2, "expected_shapes", lambda config: pytest.fail(f"{config} was built"))
    refused(import_gpt2.main, [str(src), str(tmp_path / "out")], message, capsys)
    assert not (tmp_path / "out").exists()


# ---- 3.5 untrusted files: special files wherever a file is expected, a bound on every read ------------------

# Where a command reads a file the user names (or one inside a directory the user names): the command line, with
# {file} for that file. Each is run in a process of its own (a FIFO opened the old way blocks for good).
FILE_PLACES = {
    "train.py --config": [T, "--config", "{file}"],
    "train.py data.source": [T, "--data.source={file}"],
    "train.py data.val_source": [T, "--data.val_source={file}"],
    "data.prepare data.source": ["-m", P, "--data.source={file}"],
    "generate.py --score": [G, "--score", "{file}"],
    "generate.py --heads-text": [G, "--prompt", "가", "--heads", "--heads-text", "{file}"],
    "data.corpora --deb": ["-m", "data.corpora", "debian-faq", "--deb", "{file}", "--out", "{tmp}/corpus"],
    "generate.py --ckpt's config.json": [G, "--ckpt", "{copy}", "--prompt", "가"],
    "generate.py --ckpt's tokenizer.json": [G, "--ckpt", "{copy}", "--prompt", "가"],
    "generate.py --ckpt's meta.json": [G, "--ckpt", "{copy}", "--prompt", "가"],
}
SPECIAL_KINDS = ("fifo", "directory", "character device", "socket")
MEMORY_LIMIT = 3 << 30  # bytes of address space a command may take here: torch's import takes some 0.7 GB


def make_special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading blocks until a writer comes: forever
    elif kind == "directory":
        path.mkdir()
    elif kind == "character device":
        path.symlink_to("/dev/zero")  # reads never end
    else:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))


def command_in_a_process(argv: list[str], env, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python ARGV` (train.py and data.prepare on the tiny config and the test data cache), in a process of at most
    MEMORY_LIMIT bytes."""
    script, *rest = argv
    command = ["-m", rest.pop(0)] if script == "-m" else [script]
    if command[-1] in (T, P):
        rest = [*(env.base if command[-1] == T else env.base[:3]), *rest]
    if command[-1] == T:
        rest += ["--out", str(env.root / "fresh")]
    if command[-1] == G and "--ckpt" not in rest:
        rest = ["--ckpt", str(env.run), *rest]

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run([sys.executable, *command, *rest], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limited, env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip


def one_line_in_a_process(result: subprocess.CompletedProcess, names: list[str]) -> None:
    assert result.returncode == 2, result.stderr[-3000:]
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err[-3000:]
    assert any(name in err for name in names), err


# The 40 cases run in one process of their own, the commands' `main(argv)` one after another (torch loaded once, not
# 40 times); a command that opens a FIFO the old way or reads /dev/zero is stopped by an alarm and fails its case.
SPECIAL_RUNNER = r"""
import contextlib, io, json, os, signal, sys
import train, generate
from data import prepare
from data.corpora.__main__ import main as corpora
MAINS = {"train.py": train.main, "generate.py": generate.main, "data.prepare": prepare.main, "data.corpora": corpora}

def waited(signum, frame):
    raise TimeoutError("the command waited 60 s on the special file: it opened or read it")

signal.signal(signal.SIGALRM, waited)
results, fresh = {}, sys.argv[1]  # train.py's --out: no case may make it
for case, (entry, argv) in json.loads(sys.stdin.read()).items():
    err = io.StringIO()
    signal.alarm(60)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = MAINS[entry](argv)
    except BaseException as e:
        code = f"raised {type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
    results[case] = {"code": code, "stderr": err.getvalue(), "made": os.path.exists(fresh)}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def special_files(env, tmp_path_factory):
    """{(place, kind): (the special file, the command's result)} for every place and kind, from one process."""
    cases, specials = {}, {}
    for place in FILE_PLACES:
        for kind in SPECIAL_KINDS:
            tmp = tmp_path_factory.mktemp("special")
            argv, special, copy = FILE_PLACES[place], tmp / "f", tmp / "run"
            if "{copy}" in argv:  # a file inside a run the user names
                shutil.copytree(env.run / "best", copy)
                special = copy / place.split("'s ")[1]
                special.unlink()
            make_special(special, kind)
            script, *rest = [a.format(file=special, tmp=tmp, copy=copy) for a in argv]
            entry = rest.pop(0) if script == "-m" else script
            rest = {T: [*env.base, *rest, "--out", str(env.root / "fresh")], P: [*env.base[:3], *rest]}.get(entry, rest)
            if entry == G and "--ckpt" not in rest:
                rest = ["--ckpt", str(env.run), *rest]
            key = f"{place} | {kind}"
            cases[key], specials[key] = [entry, rest], (special, tmp)
    before = snapshot(env.run)
    done = subprocess.run([sys.executable, "-c", SPECIAL_RUNNER, str(env.root / "fresh")], input=json.dumps(cases),
                          cwd=ROOT, text=True, capture_output=True, timeout=1200,
                          env={**os.environ, "OMP_NUM_THREADS": "1"},
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT)))
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    unchanged = snapshot(env.run) == before
    return {key: (specials[key], SimpleNamespace(returncode=r["code"], stderr=r["stderr"]), r["made"], unchanged)
            for key, r in results.items()}


@pytest.mark.slow
@pytest.mark.parametrize("kind", SPECIAL_KINDS)
@pytest.mark.parametrize("place", FILE_PLACES)
def test_5_a_special_file_where_a_file_is_expected_is_one_line_and_never_read(special_files, place, kind):
    # 10 places x 4 kinds: a FIFO, a directory, a device (/dev/zero) and a socket
    (special, tmp), result, made, unchanged = special_files[f"{place} | {kind}"]
    one_line_in_a_process(result, [str(special)])
    assert unchanged and not made and not (tmp / "corpus").exists()


def large_file(path: Path, size: int, head: bytes = b"") -> Path:
    """A sparse file of `size` bytes (no disk taken) that begins with `head`."""
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def deb_claiming(size: int) -> bytes:
    """The start of a .deb whose data member says it is `size` bytes long."""
    header = f"{'data.tar':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{size:<10}`\n".encode()
    return b"!<arch>\n" + header


@pytest.mark.slow
@pytest.mark.parametrize("file", ["/dev/zero", "large non-archive", "large archive of zeros"])
def test_5_memory_stays_bounded_on_any_deb(env, tmp_path, file):
    # a process of at most MEMORY_LIMIT bytes reads a .deb twice that size: one line, exit 2, nothing built
    size = 2 * MEMORY_LIMIT
    if file == "large non-archive":
        file = str(large_file(tmp_path / "big.deb", size))
    elif file == "large archive of zeros":
        file = str(large_file(tmp_path / "zeros.deb", size, deb_claiming(size - 68)))
    result = command_in_a_process(["-m", "data.corpora", "debian-faq", "--deb", file, "--out", str(tmp_path / "out")],
                                  env, timeout=120)  # fmt: skip
    one_line_in_a_process(result, [file])
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("place, limit", [("--config", "1.0 MiB"), ("--score", "64.0 MiB")])
def test_5_a_file_read_whole_is_refused_past_the_bound_of_its_kind(env, tmp_path, place, limit):
    big = large_file(tmp_path / "big.txt", 2 * MEMORY_LIMIT)
    argv = [T, "--config", str(big)] if place == "--config" else [G, "--score", str(big)]
    result = command_in_a_process(argv, env)
    one_line_in_a_process(result, [f"more than the {limit}"])


# ---- 3.6 weights holding NaN or inf ---------------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_6_weights_holding_nan_or_inf_are_refused_at_load(env, tmp_path, value, capsys):
    run = copy_run(env, tmp_path)
    file = run / "best" / "model.safetensors"
    tensors = safetensors.torch.load_file(file)
    tensors["blocks.1.mlp.c_fc.weight"][3, 5] = value
    safetensors.torch.save_file(tensors, file)
    (tmp_path / "text.txt").write_text("대한민국은 민주공화국이다.", encoding="utf-8")
    for argv in (["--prompt", "가"], ["--score", str(tmp_path / "text.txt")], ["--prompt", "가", "--attention", str(tmp_path / "maps")]):
        refused(generate.main, ["--ckpt", str(run), *argv], "holds NaN or infinite values (blocks.1.mlp.c_fc.weight)",
                capsys)  # fmt: skip
    assert not (tmp_path / "maps").exists()
    export_gpt2.export(env.run, tmp_path / "hf")  # and an import of such weights
    hf = safetensors.torch.load_file(tmp_path / "hf" / "model.safetensors")
    hf["transformer.h.0.attn.c_attn.bias"][0] = value
    safetensors.torch.save_file(hf, tmp_path / "hf" / "model.safetensors")
    refused(import_gpt2.main, [str(tmp_path / "hf"), str(tmp_path / "out")], "holds NaN or infinite values", capsys)


# ---- 3.8 kept from the second pass ----------------------------------------------------------------------

def test_8_a_unicode_error_that_is_not_a_decode_error_is_the_encoding_line(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국 헌법", encoding="utf-8")
    refused(prepare.main, ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", f"--data.source={corpus}",
                           "--data.encoding=undefined"], f"{corpus} is not valid undefined (undefined encoding)", capsys)  # fmt: skip
    with pytest.raises(DataError, match="'base64' is not a text encoding"):  # bytes in, bytes out
        DataConfig(encoding="base64")


@pytest.mark.parametrize("damage, message", [
    (lambda s: {"step": s["step"]}, "it lacks best_val_loss"),
    (lambda s: {**s, "ranks": [{"rng": s["ranks"][0]["rng"]}]}, "it lacks ranks[].loader"),
    (lambda s: {**s, "best_step": "2"}, "best_step is str"),
    (lambda s: {**s, "evals_since_best": None}, "evals_since_best is NoneType"),
    (lambda s: {**s, "optimizer": {**s["optimizer"], "state": {0: {"step": torch.tensor(2.0), "exp_avg": torch.zeros(3),
                                                                     "exp_avg_sq": torch.zeros(3)}}}},
     "optimizer.state[0].exp_avg is not a tensor of shape (1024, 32)"),
    (lambda s: {**s, "optimizer": {**s["optimizer"], "param_groups": s["optimizer"]["param_groups"][:1]}},
     "optimizer.param_groups is not the two groups of this model"),
    (lambda s: {**s, "ranks": [{**s["ranks"][0], "loader": {"rng_state": torch.zeros(3, dtype=torch.uint8)}}]},
     "ranks[].loader.rng_state is not the state of a random generator"),
], ids=["fields", "rank fields", "type", "optional type", "moment shape", "groups", "generator"])  # fmt: skip
def test_8_a_train_state_that_loads_but_lacks_fields_is_refused(env, tmp_path, damage, message, capsys):
    run = copy_run(env, tmp_path)
    state = torch.load(run / "last" / "train_state.pt", weights_only=True)
    torch.save(damage(state), run / "last" / "train_state.pt")
    before = snapshot(run)
    refused(train.main, [*env.base, "--train.max_steps=4", "--out", str(run), "--resume"],
            f"train_state.pt is not a train state of this model ({message})", capsys)  # fmt: skip
    assert snapshot(run) == before


def test_8_a_device_torch_takes_but_cannot_compute_on_is_refused(env, capsys):
    refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가", "--device", "meta"], '"meta" is not one of', capsys)
    refused(train.main, [*env.base, "--train.device=cuda:²", "--out", str(env.root / "fresh")], "is not one of", capsys)


# ---- 3.9 causes named right -----------------------------------------------------------------------------

def test_9_a_non_utf8_checkpoint_path_is_named_as_such_not_as_a_damaged_file(env, tmp_path, capsys):
    odd = tmp_path / f"run{NOT_UTF8}"
    shutil.copytree(env.run, odd)
    refused(generate.main, ["--ckpt", str(odd), "--prompt", "가"], "is not valid UTF-8 (byte 0xB4 at position", capsys)
    refused(import_gpt2.main, [str(odd / "best"), str(tmp_path / "out")], "is not valid UTF-8", capsys)


def test_9_a_lock_that_is_a_directory_is_not_a_full_disk(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    (run / ".lock").mkdir()
    refused(train.main, [*env.base, "--train.max_steps=4", "--out", str(run), "--resume"],
            f"{run / '.lock'} is not the lock file a trainer leaves (it is a directory)", capsys)  # fmt: skip


def test_9_num_samples_are_refused_with_the_memory_they_need(env, capsys):
    err = refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가", "--num-samples", "4096",
                                  "--max-new-tokens", str(10**8)], "decoding 4096 x 100,000,002 tokens needs at least",
                  capsys)  # fmt: skip
    needed = float(err.split("needs at least ")[1].split(" GB")[0].replace(",", ""))
    assert needed > 3000  # the token buffer alone is 3,277 GB: the figure is not "0.0 GB"


# ---- 3. the page shows every text as text ---------------------------------------------------------------

HOSTILE = ['<img src=x onerror="window.pwned=1">', "</script><script>window.pwned=2</script>", "\"'><svg onload=window.pwned=3>",
           "${window.pwned=4}", "`${alert(5)}`", "a\u2028b\u2029c", "nul\x00byte", "<!--", "]]>", "&amp;&lt;", "__DATA__"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_the_page_shows_injected_markup_as_text_and_fetches_nothing(env, tmp_path, browser):  # noqa: F811
    # the prompt, through the run's own tokenizer, into the title and the token spellings of a real page
    prompt = "대한민국 " + " ".join(HOSTILE)
    assert generate.main(["--ckpt", str(env.run), "--prompt", prompt, "--attention", str(tmp_path / "maps")]) == 0
    # the spellings whole, as tokens of a tokenizer could spell them, with a walkthrough, in the title too
    look = look_at(biased_model(), list(range(len(HOSTILE))), HOSTILE)
    records = {name: VIEWS[name].record(look, Settings()) for name in ("maps", "walkthrough")}
    records["maps"]["text"] = " ".join(HOSTILE)
    page = tmp_path / "tokens.html"
    page.write_text(page_html(records), encoding="utf-8")
    for path, fragment in ((tmp_path / "maps" / "attention.html", "#layer=1&head=0&focus=3&explain=1"),
                           (page, "#layer=<img src=x onerror=window.pwned=6>&focus=2&head=1")):  # fmt: skip
        b = browser(path, fragment)
        b.click(*b.centre("#tokens .tok", 2))  # a click opens the walkthrough, which shows the spellings again
        b.move(*b.centre("#tokens .tok", 1))
        assert b.evaluate("window.pwned") is None
        assert b.evaluate("document.querySelectorAll('img, svg:not(#lines > svg), iframe, object, embed').length") == 0
        assert b.evaluate("document.querySelectorAll('#lines svg *:not(line):not(text)').length") == 0  # its lines alone
        assert b.evaluate("document.scripts.length") == 3  # the error hook, the data and the code
        assert b.evaluate("performance.getEntriesByType('resource').length") == 0  # nothing fetched
        assert b.problems() == ([], "")
        if path == page:
            assert b.texts("#tokens .t") == HOSTILE
            assert b.evaluate("document.title") == title_of(" ".join(HOSTILE)).replace("\x00", "\ufffd")
            assert HOSTILE[0] in b.evaluate("document.getElementById('explain').textContent")


# ---- 4. RUN/snapshots/: foreign or malformed entries, for every command that reads them -----------------

def edit_config(snapshot_dir: Path, change) -> None:
    file = snapshot_dir / "config.json"
    file.write_text(json.dumps(change(json.loads(file.read_text(encoding="utf-8")))), encoding="utf-8")


ENTRIES = {  # kind -> (the entry's name, how to make it from a copy of the run's own snapshot at step 2)
    "another shape": ("step_000001", lambda d: edit_config(d, lambda c: c | {"model": c["model"] | {"n_layer": 3}})),
    "another run": ("step_000001", lambda d: edit_config(d, lambda c: c | {"run_id": "0123456789abcdef"})),
    "no run identity": ("step_000001", lambda d: edit_config(d, lambda c: {k: v for k, v in c.items() if k != "run_id"})),
    "no config.json": ("step_000001", lambda d: (d / "config.json").unlink()),
    "damaged config.json": ("step_000001", lambda d: (d / "config.json").write_bytes(b'{"model": {')),
    "no weights": ("step_000001", lambda d: (d / "model.safetensors").unlink()),
    "superscript digits": ("step_²", lambda d: None),
    "Arabic-Indic digits": ("step_١٥", lambda d: None),
    "a file": ("step_000001", lambda d: (shutil.rmtree(d), d.write_text("x"))),
}
READERS = ("generate --over-training", "train.py --resume")


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ENTRIES)
def test_an_entry_of_snapshots_that_is_not_this_runs_is_named_and_left_alone(env, tmp_path, kind, reader, capsys):
    run = tmp_path / "run"
    shutil.copytree(env.run, run)
    own = run / "snapshots" / "step_000002"
    shutil.copytree(run / "last", own, ignore=shutil.ignore_patterns("train_state.pt"))  # the run's own, at step 2
    name, make = ENTRIES[kind]
    entry = run / "snapshots" / name
    shutil.copytree(own, entry)
    make(entry)
    before = snapshot(entry) if entry.is_dir() else entry.read_bytes()
    capsys.readouterr()
    if reader == "generate --over-training":
        code = generate.main(["--prompt", "대한민국", "--attention", str(tmp_path / "page"), "--over-training", str(run)])
        out, err = capsys.readouterr()
        assert code == 0 and out.startswith(f"wrote {tmp_path / 'page' / 'over_training.html'} (1 snapshots, "), err
        assert [line for line in err.splitlines() if "Traceback" in line or line.startswith("error")] == []
        assert [line.split(":")[0] for line in err.splitlines() if line.startswith("skipped")] == [f"skipped {entry}"]
    else:
        code = train.main([*env.base, "--train.max_steps=4", "--train.eval_interval=2", "--train.snapshots=2",
                           "--out", str(run), "--resume"])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        assert (run / "snapshots" / "step_000004").is_dir()  # its second, counted without the entry
    assert (snapshot(entry) if entry.is_dir() else entry.read_bytes()) == before  # left as it was


def test_u5_a_gpu_out_of_memory_is_one_line_that_names_the_settings_and_saves_nothing(env, tmp_path, capsys, monkeypatch):
    def out_of_memory(run, p, lr):  # what torch raises when a CUDA allocation fails
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity "
                                          "of 14.74 GiB of which 3.06 MiB is free. Including non-PyTorch memory, ...")

    monkeypatch.setattr(train, "optimisation_step", out_of_memory)
    capsys.readouterr()
    assert train.main([*env.base, "--train.max_steps=4", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.rstrip().splitlines()[-1] == (
        "error: the GPU ran out of memory (CUDA out of memory. Tried to allocate 20.00 GiB); lower train.batch_size "
        "(raise train.grad_accum to keep the batch), model.block_size or the model's size, or generate fewer "
        "--num-samples at once")
    assert not (tmp_path / "run" / "last").exists()
