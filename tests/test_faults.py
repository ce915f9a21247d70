"""Faults: what the outside world does to a command while it runs, and what a run keeps through it. Ctrl-C and
SIGTERM at every stage end with one line, exit code 130 or 143, nothing half-written, and the one command that
carries on; kill -9 in the middle of a save leaves the previous checkpoint, and the next start repairs what a
crash left; a full disk is one `error:` line and keeps the previous checkpoint; a read error is named as one;
two processes preparing one corpus leave one good cache. The test_N_ names keep their class of issue 28
(docs/robustness.md); bad input, the other classes, is in tests/test_bad_input.py.

    python -m pytest tests/test_faults.py -q

The modules whose work this checks: training/stopping.py (Ctrl-C and SIGTERM in a run), storage/atomic.py
(signals held over renames, files written whole), training/checkpoints.py (saves swapped in whole, repaired after
a crash). The commands run in this process (their `main(argv)`) against one tiny run trained for the module,
except where a real process is the point: signals while torch loads, and train.py run through
tests/train_with_hooks.py with its two test hooks: --signal-after STEP:INT|TERM makes the run signal itself
after that step (as Ctrl-C or `kill` would), and --pause-in-save STEP[:best] makes the save of last/ (or best/)
at that step sleep halfway, after printing SAVE_PAUSED, for a test to kill it there.
"""

import errno
import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from cli.command import run_command
from data import prepare, sources
from data.cache import cache_problem
from storage.atomic import signals_held
from storage.checkpoint import load_model, snapshot_dirs
from tests.conftest import ROOT, TINY, copy_run, hooked_train, refused, train_paused_in_a_save, trained_tiny_run
from training import checkpoints, setup
from training.checkpoints import recover


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return trained_tiny_run(tmp_path_factory, "faults")  # a run, and root/hf: its Hugging Face export


# ---- 1. crash repair removes only a run's own leftovers ------------------------------------------------

def test_1_repair_in_a_run_removes_only_the_runs_own_leftovers(env, tmp_path):
    run = copy_run(env, tmp_path)
    (run / ".config.json.ab12cd.tmp").write_text("a temporary file of an atomic write", encoding="utf-8")
    (run / ".my-notes.tmp").write_text("the user's", encoding="utf-8")
    recover(run)
    assert not (run / ".config.json.ab12cd.tmp").exists()
    assert (run / ".my-notes.tmp").read_text(encoding="utf-8") == "the user's"


# ---- 5. read errors -------------------------------------------------------------------------------------

def test_5_a_read_error_in_the_corpus_is_named_as_one_not_as_the_cache(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국 헌법 " * 200, encoding="utf-8")

    def failing_disk(text):
        raise OSError(errno.EIO, "Input/output error", str(corpus))

    monkeypatch.setattr(sources, "split_pieces", failing_disk)
    refused(prepare.main, ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", f"--data.source={corpus}"],
            f"cannot read {corpus} (Input/output error)", capsys)  # fmt: skip
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


# ---- 7. signals at the edges ----------------------------------------------------------------------------

def signalling(signum, then=None):
    """A function that signals this process (as Ctrl-C or `kill` would), then calls `then`."""
    def hook(*args, **kwargs):
        os.kill(os.getpid(), signum)
        return then(*args, **kwargs) if then else None

    return hook


def test_7_sigterm_while_preparing_the_data_is_one_line_and_leaves_nothing(env, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(setup, "prepare", signalling(signal.SIGTERM, setup.prepare))
    capsys.readouterr()
    assert train.main([*env.base, f"--data.cache_dir={tmp_path / 'cache'}", "--out", str(tmp_path / "run")]) == 143
    err = capsys.readouterr().err
    assert err.startswith("error: stopped by SIGTERM; no checkpoint of this run was saved; start it again with: ")
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob(".tmp-*"))


@pytest.mark.parametrize("stage", ["the last evaluation", "the final scores"])
def test_7_sigterm_at_the_end_of_a_run_is_not_ignored(env, tmp_path, stage, monkeypatch, capsys):
    name = "evaluate" if stage == "the last evaluation" else "final_scores"
    monkeypatch.setattr(train, name, signalling(signal.SIGTERM, getattr(train, name)))
    args = [*env.base, "--train.max_steps=4", "--train.eval_interval=4", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    assert train.main(args) == 143
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "resume with: " in line and line.endswith("--resume")
    monkeypatch.undo()
    resume = shlex.split(line.split("resume with: ")[1])[2:]  # the printed command, after "python train.py"
    assert train.main(resume) == 0  # the final report, done now
    final = json.loads((tmp_path / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert final["kind"] == "final" and final["step"] == 4


def ctrl_c_twice_at(at: int):
    """A test hook (train.after_step, training.checkpoints.during_save) that presses Ctrl-C twice at step `at`
    (after it, or halfway through its save)."""
    def hook(step, *name):
        if step == at:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    return hook


def test_7_two_ctrl_c_before_the_first_save_advise_one_command_that_works(env, tmp_path, capsys, monkeypatch):
    args = [*env.base, "--train.max_steps=6", "--train.eval_interval=3", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    with monkeypatch.context() as hooked:
        hooked.setattr(train, "after_step", ctrl_c_twice_at(1))
        assert train.main(args) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: aborted by a second Ctrl-C without saving; no checkpoint of this run was saved; "
                           "start it again with: python ")  # fmt: skip
    again = shlex.split(line.split("start it again with: ")[1])[2:]
    assert again[-1] == "--overwrite"  # metrics.jsonl is there: the same command alone would be refused
    assert train.main(again) == 0


def test_7_a_second_ctrl_c_in_the_middle_of_a_save_leaves_no_half_written_checkpoint(env, tmp_path, capsys, monkeypatch):
    args = [*env.base, "--train.max_steps=6", "--train.eval_interval=3", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    with monkeypatch.context() as hooked:
        hooked.setattr(checkpoints, "during_save", ctrl_c_twice_at(6))
        assert train.main(args) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{tmp_path / 'run' / 'last'} keeps step 3; resume with: " in line
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["best", "config.json", "last", "metrics.jsonl"]
    assert train.main(shlex.split(line.split("resume with: ")[1])[2:]) == 0


def test_7_signals_wait_for_a_held_block():
    order = []
    # Python's own Ctrl-C handler, whatever an earlier test left installed (CI once saw no KeyboardInterrupt here)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                order.append("the block went on")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert order == ["the block went on"]


def test_7_sigterm_in_a_command_unwinds_through_its_cleanups(capsys):
    cleaned = []

    def work():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            cleaned.append(True)

    assert run_command(work, interrupted="interrupted; nothing was written") == 143
    assert cleaned == [True] and capsys.readouterr().err == "error: interrupted; nothing was written\n"


def entry_points() -> list[tuple[str, str]]:
    """Every command of the project, found in its files: ("-m", "data.corpora") or ("path", "train.py") for each
    module that runs as a program (`if __name__ == "__main__":`), bench/ and tests/ left out."""
    found = []
    for file in sorted(ROOT.rglob("*.py")):
        relative = file.relative_to(ROOT)
        if relative.parts[0] in ("bench", "tests") or relative == Path("cli/__init__.py"):
            continue
        if 'if __name__ == "__main__":' in file.read_text(encoding="utf-8"):
            if len(relative.parts) == 1:
                found.append(("path", str(relative)))
            else:
                module = ".".join(relative.with_suffix("").parts)
                found.append(("-m", module.removesuffix(".__main__")))
    return found


# What runs a command as Python would (`python -m M` or `python FILE`), once the interpreter's own start is over:
# it says so on the file descriptor READY, then WATCH (if set) reports which handler SIGINT has when the first
# heavy module is imported, and ends the process there.
LAUNCH = """
import importlib.abc, os, runpy, signal, sys
kind, target, ready, watch, *args = sys.argv[1:]

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ("torch", "numpy"):
            handler = signal.getsignal(signal.SIGINT)
            os.write(2, f"{name} imported with SIGINT handled by {getattr(handler, '__module__', '')}."
                        f"{getattr(handler, '__name__', handler)}\\n".encode())
            os._exit(0)

if watch == "1":
    sys.meta_path.insert(0, Watch())
os.write(int(ready), b"r")
sys.argv = [target, *args]
if kind == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    runpy.run_path(target, run_name="__main__")
"""


def launch(kind: str, target: str, args: list[str], watch: bool = False) -> subprocess.Popen:
    """The command started through LAUNCH, once its interpreter is up (what it printed on READY is read)."""
    ready, told = os.pipe()
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, kind, target, str(told), "1" if watch else "0", *args],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, pass_fds=[told],
                            env={**os.environ, "OMP_NUM_THREADS": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    os.close(told)
    with os.fdopen(ready, "rb") as f:
        assert f.read(1) == b"r", proc.communicate(timeout=60)[1]
    return proc


def entry_arguments(kind: str, target: str, env, tmp: Path) -> list[str]:
    """Arguments that make each command do its work on the tiny run (a new command fails here until it has some)."""
    args = {"train.py": [*env.base, "--out", str(tmp / "run")],
            "generate.py": ["--ckpt", str(env.run), "--prompt", "가", "--max-new-tokens", "4"],
            "data.prepare": ["--config", str(TINY), f"--data.cache_dir={env.cache}"],
            "data.corpora": ["--cache-dir", str(tmp / "cache")],
            "hf.export_gpt2": [str(env.run), str(tmp / "export")],
            "hf.import_gpt2": [str(env.root / "hf"), str(tmp / "import")]}  # fmt: skip
    assert target in args, f"{kind} {target} is a command: give it arguments here"
    return args[target]


ENTRY_POINTS = entry_points()


@pytest.mark.parametrize("kind, target", ENTRY_POINTS, ids=[t for _, t in ENTRY_POINTS])
def test_7_every_command_catches_ctrl_c_before_it_imports_torch(env, tmp_path, kind, target):
    # the mechanism itself: the first heavy import of every command finds the early handler in place
    assert len(ENTRY_POINTS) >= 6
    proc = launch(kind, target, entry_arguments(kind, target, env, tmp_path), watch=True)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 0 and "imported with SIGINT handled by cli.exit_now" in err, err


@pytest.mark.slow
@pytest.mark.parametrize("at", [0.05, 0.3, 1.0, 2.0])
@pytest.mark.parametrize("kind, target", ENTRY_POINTS, ids=[t for _, t in ENTRY_POINTS])
def test_7_ctrl_c_at_any_moment_of_a_command_s_start_is_one_line(env, tmp_path, kind, target, at):
    # 6 commands x 4 moments after the interpreter's own start: at most one line and exit 130, or done (exit 0)
    # before it; -2 (SIGINT's own exit, which a shell shows as 130) where it comes as Python is shutting down
    proc = launch(kind, target, entry_arguments(kind, target, env, tmp_path))
    try:
        proc.wait(timeout=at)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert "Traceback" not in err and proc.returncode in (0, 130, -signal.SIGINT), err
    assert err.count("error: ") <= 1, err


@pytest.mark.slow
def test_7_kept_two_processes_preparing_one_corpus_leave_one_good_cache(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있다.\n" * 2000, encoding="utf-8")
    command = [sys.executable, "-m", "data.prepare", "--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}",
               f"--data.source={corpus}"]  # fmt: skip
    both = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"}) for _ in range(2)]  # fmt: skip
    assert [p.wait(timeout=300) for p in both] == [0, 0], [p.stderr.read() for p in both]
    built = list((tmp_path / "cache").iterdir())
    assert len(built) == 1 and cache_problem(built[0]) is None


# ---- a real training process: stopped and resumed exactly, killed in a save, out of disk; crash repair ----

def cli_args(data_cache, run, *extra):
    # dropout on, an uneven log interval and gradient accumulation: every piece of state must survive
    return ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.log_interval=3",
            "--train.grad_accum=2", "--model.dropout=0.1", "--out", str(run), *extra]  # fmt: skip


def run_cli(args, signal_after=None, timeout=180):
    """`python train.py ARGS` in a process, signalling itself after a step ("7:TERM") if asked."""
    command = hooked_train(args, "--signal-after", signal_after) if signal_after else [sys.executable, "train.py", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def logged_losses(run):
    return [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


@pytest.mark.slow
def test_interrupted_and_resumed_run_equals_the_uninterrupted_one(tmp_path, data_cache):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    argv = cli_args(data_cache, straight)
    assert train.main(argv) == 0

    args = cli_args(data_cache, interrupted)
    first = run_cli(args, "7:TERM")
    assert first.returncode == 143, first.stderr
    last_line = first.stderr.strip().splitlines()[-1]
    assert last_line.startswith("stopped at step 7; saved ") and "; resume with: " in last_line  # one line
    command = last_line.split("; resume with: ")[1]
    assert command == shlex.join(["python", "train.py", *args, "--resume"])
    assert torch.load(interrupted / "last" / "train_state.pt", weights_only=True)["step"] == 7

    # the printed command, interrupted again (Ctrl-C this time), then run to the end
    resume = shlex.split(command)[2:]
    second = run_cli(resume, "13:INT")
    assert second.returncode == 130, second.stderr
    assert train.main(resume) == 0

    assert logged_losses(interrupted) == logged_losses(straight)
    assert [s for s, _ in logged_losses(straight)] == [3, 6, 9, 12, 15, 18, 20]
    for ckpt in ("last", "best"):
        assert (interrupted / ckpt / "model.safetensors").read_bytes() == (straight / ckpt / "model.safetensors").read_bytes()
        kept = [torch.load(run / ckpt / "train_state.pt", weights_only=True) for run in (interrupted, straight)]
        where = ("step", "best_val_loss", "best_step", "evals_since_best")  # what the early stop reads
        assert {k: kept[0][k] for k in where} == {k: kept[1][k] for k in where}
    final = [json.loads(line) for line in (interrupted / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["kind"] == "final" and final["step"] == 20


@pytest.mark.slow
def test_kill_9_during_a_save_leaves_the_previous_checkpoint(tmp_path, data_cache):
    run = tmp_path / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    proc = train_paused_in_a_save(args, "20")  # the save at step 10 completes, the one at 20 hangs
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert (run / ".tmp-last" / "model.safetensors").exists()  # the half-written new checkpoint
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 10
    assert load_model(run / "last").config.n_embd == 32  # the previous one still loads

    assert train.main([*args, "--resume"]) == 0
    assert not (run / ".tmp-last").exists()
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 20


@pytest.mark.slow
def test_kill_9_between_the_last_and_best_saves_is_made_consistent(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    proc = train_paused_in_a_save(args, "20:best")  # last/ of step 20 is saved, best/ not yet
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    last = torch.load(run / "last" / "train_state.pt", weights_only=True)
    assert (last["step"], last["best_step"]) == (20, 20)
    assert torch.load(run / "best" / "train_state.pt", weights_only=True)["step"] == 10  # the pair disagrees

    assert train.main([*args, "--resume"]) == 0  # nothing left to train: recovery and the final report
    assert (run / "best" / "model.safetensors").read_bytes() == (run / "last" / "model.safetensors").read_bytes()
    assert torch.load(run / "best" / "train_state.pt", weights_only=True)["step"] == 20
    report = capsys.readouterr().out.strip().splitlines()[-2]  # the last: best/'s heads (training/evaluation.py)
    assert f"best weights ({run / 'best'}, step 20) " in report and f"last ({run / 'last'}, step 20) " in report
    final = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert final["best_step"] == 20 and final["best_val_bpc"] == final["val_bpc"]


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs (needs root, or the right to mount): a disk that a test can fill."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def fill(disk: Path, leave: int) -> Path:
    """Fill `disk` with one file, then free `leave` bytes of it."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: nothing left to write when it closes
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_previous_checkpoint(small_disk, data_cache, capsys):
    run = small_disk / "run"
    args = cli_args(data_cache, run, "--train.sample_tokens=0")
    assert train.main([*args, "--train.max_steps=10"]) == 0
    before = {p.name: p.read_bytes() for p in (run / "last").iterdir()}
    capsys.readouterr()
    filler = fill(small_disk, leave=128 * 1024)  # room for the log lines, not for a checkpoint
    assert train.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"error: cannot save {run / 'last'} (No space left on device); it keeps its previous checkpoint: "
                        f"free some disk space, then continue with --resume\n")
    assert "Traceback" not in err and err.count("error:") == 1
    assert {p.name: p.read_bytes() for p in (run / "last").iterdir()} == before
    assert sorted(p.name for p in run.iterdir()) == ["best", "config.json", "heads.png", "last", "loss.png", "metrics.jsonl"]
    filler.unlink()
    assert train.main([*args, "--resume"]) == 0
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 20


def test_recover_puts_back_a_checkpoint_caught_between_renames(tmp_path):
    run = tmp_path / "run"
    (run / "last.old").mkdir(parents=True)  # crashed after renaming last -> last.old, before .tmp-last -> last
    (run / "last.old" / "model.safetensors").write_text("old")
    (run / ".tmp-last").mkdir()
    (run / "best").mkdir()  # crashed after the swap of best, before deleting best.old
    (run / "best" / "model.safetensors").write_text("new")
    (run / "best.old").mkdir()
    (run / ".metrics.jsonl.k2j3h4.tmp").write_text("half")  # an atomic write cut short
    recover(run)
    assert (run / "last" / "model.safetensors").read_text() == "old"
    assert (run / "best" / "model.safetensors").read_text() == "new"
    assert sorted(p.name for p in run.iterdir()) == ["best", "last"]


@pytest.mark.slow
def test_a_run_killed_after_a_snapshot_resumes_to_the_same_snapshots_lessons_and_head_scores(tmp_path, data_cache):
    # An evaluation takes its snapshot before it saves last/: killed in that save, the run resumes from the
    # evaluation before, drops the snapshot and takes it again, with the same copy lessons on the way.
    extra = ["--train.eval_interval=5", "--train.snapshots=2", "--train.copy_lessons=0.5", "--train.sample_tokens=0"]
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert train.main(cli_args(data_cache, straight, *extra)) == 0
    args = cli_args(data_cache, killed, *extra)
    proc = train_paused_in_a_save(args, "10")  # the snapshot of step 10 is taken, last/ of step 10 half-written
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert [d.name for d in snapshot_dirs(killed)] == ["step_000010"]
    assert torch.load(killed / "last" / "train_state.pt", weights_only=True)["step"] == 5
    assert train.main([*args, "--resume"]) == 0

    assert [d.name for d in snapshot_dirs(killed)] == [d.name for d in snapshot_dirs(straight)] == ["step_000010",
                                                                                                    "step_000020"]  # fmt: skip
    for a, b in zip(snapshot_dirs(killed), snapshot_dirs(straight)):
        assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert logged_losses(killed) == logged_losses(straight)
    heads = [[r["heads"]["scores"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
              if r.get("kind") == "eval"] for run in (straight, killed)]  # fmt: skip
    assert heads[0] == heads[1] and len(heads[0]) == 4
