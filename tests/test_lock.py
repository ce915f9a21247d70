"""One trainer per run directory (training/lock.py): a second trainer is refused with the holder's PID,
the lock goes with the run however it ends, and the lock file of a killed trainer is taken over.

    python -m pytest tests/test_lock.py -q
"""

import os
import signal
import socket

import pytest

import train
from cli.errors import UserError
from tests.conftest import TINY, train_paused_in_a_save
from training.lock import RunLock

def cli_args(data_cache, run, *extra):
    return ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--out", str(run), *extra]  # fmt: skip


@pytest.mark.slow
def test_a_second_trainer_is_refused_and_a_killed_ones_lock_is_taken_over(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    args = cli_args(data_cache, run)
    first = train_paused_in_a_save(args, "10")  # holds the run mid-save
    try:
        for extra in ([], ["--resume"], ["--overwrite"]):
            assert train.main([*args, *extra]) == 2
            err = capsys.readouterr().err
            assert err == (f"error: {run} is in use by process {first.pid} on {socket.gethostname()}, a trainer "
                           f"writing to it; wait for it to end (or stop it), or pass another --out\n")
        assert (run / ".tmp-last" / "model.safetensors").exists()  # the first one's save was left alone
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    assert (run / ".lock").read_text().split()[0] == str(first.pid)  # left behind by kill -9: stale
    assert train.main([*args, "--overwrite", "--train.max_steps=2", "--train.eval_interval=2"]) == 0
    assert not (run / ".lock").exists() and not (run / ".tmp-last").exists()


def test_lock_refuses_a_second_holder_and_is_released_once(tmp_path):
    first = RunLock(tmp_path / "run")
    first.acquire()
    assert (tmp_path / "run" / ".lock").read_text() == f"{os.getpid()} {socket.gethostname()}\n"
    with pytest.raises(UserError, match=f"in use by process {os.getpid()} on "):
        RunLock(tmp_path / "run").acquire()
    first.release()
    first.release()
    assert not (tmp_path / "run").exists()  # it made the directory and nothing else was written there
    again = RunLock(tmp_path / "run")
    again.acquire()
    (tmp_path / "run" / "config.json").write_text("{}")
    again.release()
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["config.json"]


def test_a_run_that_fails_after_taking_the_lock_releases_it(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    assert train.main(cli_args(data_cache, run, f"--data.source={tmp_path}/missing.txt")) == 2
    assert "missing.txt does not exist" in capsys.readouterr().err
    assert not run.exists()
