"""Printing on a terminal that cannot show Korean (cli/console.py): every command that prints, on ASCII, cp949
and Latin-1 terminals, prints what the terminal lacks as '?' and one note on how to get UTF-8, never an error,
and writes its files as UTF-8 whatever the terminal; a UTF-8 terminal gets every character and no note.

    python -m pytest tests/test_console.py -q

The commands run in this process (their `main(argv)`), against one tiny run trained for the module.
"""

import io
import shutil

import pytest

import generate
import train
from data import prepare
from hf import export_gpt2, import_gpt2
from tests.conftest import common_args, korean_texts, trained_tiny_run


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = trained_tiny_run(tmp_path_factory, "terminals")  # a run, and root/hf: its Hugging Face export
    korean_texts(env.root)  # root/texts/corpus.txt: a Korean text
    return env


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


def test_a_utf8_terminal_gets_every_character_and_no_note(env, monkeypatch):
    out, err = fake_terminal(monkeypatch, "utf-8")
    assert generate.main(["--ckpt", str(env.run), "--prompt", "대한민국 국회는", "--explain", "1.0"]) == 0
    assert "␣" in out.getvalue().decode("utf-8") and "note:" not in err.getvalue().decode("utf-8")
