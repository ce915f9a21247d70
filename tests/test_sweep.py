"""A sweep of bad input generated rather than listed (issue 28): every config key with a value of the wrong
type, out of range and of an absurd size, and every file a command reads made missing, empty, truncated, a
directory, unreadable, of another format and of valid-but-wrong content. Each case must exit with code 2 and
one `error:` line naming what is wrong, with no traceback, and leave every file as it was.

    python -m pytest tests/test_sweep.py -q

The keys come from the config dataclasses and the values from their types, so a key added tomorrow is swept
too. The files are those of a trained run, its export and its import; the corruptions come from the file's
format. Where a corruption is not bad input it is left out, with the reason beside it (`SKIP`): an absent
meta.json is a checkpoint without one, an empty TOML file is every default. The commands run in this process
(their `main(argv)`), all against one tiny run trained for the module.
"""

import io
import json
import os
import shutil
import types
import typing
from dataclasses import fields
from pathlib import Path

import pytest
import safetensors.torch
import torch

import generate
import train
from data import prepare
from cli.command import integer
from data.config import DataConfig
from hf import export_gpt2, import_gpt2
from model.config import GPTConfig
from tests.conftest import TINY, trained_tiny_run
from tests.test_bad_input import snapshot
from training.config import LogConfig, TrainConfig

SECTIONS = {"data": DataConfig, "model": GPTConfig, "train": TrainConfig, "log": LogConfig}


# ---- the config keys: values generated from each field's type ---------------------------------------------

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


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = trained_tiny_run(tmp_path_factory, "sweep")  # a run, and root/hf: its Hugging Face export
    texts = env.root / "texts"
    texts.mkdir()
    korean = "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.\n" * 40
    (texts / "corpus.txt").write_text(korean, encoding="utf-8")
    (texts / "corpus.jsonl").write_text("".join(json.dumps({"text": line}, ensure_ascii=False) + "\n"
                                                for line in korean.splitlines()), encoding="utf-8")  # fmt: skip
    shutil.copyfile(TINY, texts / "config.toml")
    return env


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


# ---- generate.py's numeric options: values generated from each option's type ------------------------------

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
        bools = key in ("model.bias", "model.mlp", "log.wandb")  # two values: nothing is out of range or absurd
        assert kinds == ({"wrong type"} if bools else {"wrong type", "out of range", "absurd size"}), key


# ---- the files each command reads: corruptions generated from each file's format --------------------------

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


def common_args(command, argv: list[str], env) -> list[str]:
    """The config, cache and thread settings a train.py or data.prepare command needs, unless it names its own."""
    if command is train.main:
        own = ["--config", "{file}"] if "--config" in argv else env.base[:2]
        return [*own, *env.base[2:], *[a for a in argv if a not in ("--config", "{file}")]]
    if command is prepare.main:
        return ([] if "--config" in argv else ["--config", str(TINY)]) + [f"--data.cache_dir={env.cache}", *argv]
    return argv


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


# ---- terminals that cannot print everything: every command that prints, on ASCII, cp949 and Latin-1 -------

TERMINALS = ("ascii", "cp949", "latin-1")
PRINTING = [  # (name, command, argv); {run} the module's run, {out} a fresh path, {text} a Korean text file
    ("generate --prompt", generate.main, ["--ckpt", "{run}", "--prompt", "대한민국", "--max-new-tokens", "8"]),
    ("generate --explain --lang ko", generate.main, ["--ckpt", "{run}", "--prompt", "대한민국 국회는", "--explain", "1.0",
                                                     "--lang", "ko", "--attention", "{out}"]),
    ("generate --score --lang ko", generate.main, ["--ckpt", "{run}", "--score", "{text}", "--lang", "ko"]),
    ("generate --heads", generate.main, ["--ckpt", "{run}", "--heads", "--heads-text", "{text}", "--lang", "ko"]),
    ("generate --lens", generate.main, ["--ckpt", "{run}", "--prompt", "대한민국의 주권은", "--lens", "--ablate", "1.0"]),
    ("generate --over-training --lang ko", generate.main, ["--prompt", "대한민국", "--attention", "{out}",
                                                           "--over-training", "{snapshots}", "--lang", "ko"]),
    ("train.py and its samples, then --resume", train.main, ["--train.sample_tokens=16", "--train.max_steps=2",
                                                              "--train.eval_interval=2", "--out", "{out}"]),
    ("data.prepare", prepare.main, ["--data.source={text}"]),
    ("export", export_gpt2.main, ["{run}", "{out}"]),
    ("import", import_gpt2.main, ["{hf}", "{out}"]),
]  # fmt: skip


def fake_terminal(monkeypatch, encoding: str) -> tuple[io.BytesIO, io.BytesIO]:
    """stdout and stderr as a terminal of `encoding` has them: Python's text streams, strict, over bytes."""
    raw = io.BytesIO(), io.BytesIO()
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(raw[0], encoding=encoding, errors="strict", write_through=True))
    monkeypatch.setattr("sys.stderr", io.TextIOWrapper(raw[1], encoding=encoding, errors="strict", write_through=True))
    return raw


@pytest.mark.parametrize("encoding", TERMINALS)
@pytest.mark.parametrize("name, command, argv", PRINTING, ids=[p[0] for p in PRINTING])
def test_every_command_prints_on_a_terminal_that_lacks_korean(env, tmp_path, monkeypatch, name, command, argv, encoding):
    text = tmp_path / "korean.txt"
    text.write_text((env.root / "texts" / "corpus.txt").read_text(encoding="utf-8"), encoding="utf-8")
    if "{snapshots}" in argv:  # a run with one snapshot of its own
        shutil.copytree(env.run, tmp_path / "run")
        shutil.copytree(env.run / "last", tmp_path / "run" / "snapshots" / "step_000002",
                        ignore=shutil.ignore_patterns("train_state.pt"))  # fmt: skip
    argv = [a.format(run=env.run, out=tmp_path / "out", text=text, hf=env.root / "hf", snapshots=tmp_path / "run")
            for a in common_args(command, argv, env)]  # fmt: skip
    out, err = fake_terminal(monkeypatch, encoding)
    assert command(argv) == 0
    if command is train.main:  # the resume prints its samples the same way
        assert command([*argv[:-2], "--train.max_steps=4", "--out", str(tmp_path / "out"), "--resume"]) == 0
    stdout, stderr = out.getvalue().decode(encoding), err.getvalue().decode(encoding)
    assert "Traceback" not in stderr and "error:" not in stderr
    assert stderr.count("note: this terminal's encoding") == 1 and "PYTHONIOENCODING=utf-8" in stderr
    assert stdout.strip() and ("?" in stdout + stderr or encoding == "cp949")  # what the terminal cannot show: "?"
    for written in (p for p in tmp_path.rglob("*") if p.suffix in (".json", ".html", ".jsonl")):
        written.read_text(encoding="utf-8")  # the files stay UTF-8 whatever the terminal


def test_the_terminal_sweep_covers_every_command_that_prints_korean():
    assert {p[1] for p in PRINTING} == {generate.main, train.main, prepare.main, export_gpt2.main, import_gpt2.main}


# ---- RUN/snapshots/: foreign or malformed entries, for every command that reads them ------------------------

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


def test_a_utf8_terminal_gets_every_character_and_no_note(env, monkeypatch):
    out, err = fake_terminal(monkeypatch, "utf-8")
    assert generate.main(["--ckpt", str(env.run), "--prompt", "대한민국 국회는", "--explain", "1.0"]) == 0
    assert "␣" in out.getvalue().decode("utf-8") and "note:" not in err.getvalue().decode("utf-8")
