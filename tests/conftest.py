"""What several test files share: the repository's paths, the tiny shapes, one prepared-data cache."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "tiny.toml"  # the smoke-run config: fp32, CPU, seconds
TINY_MODEL = {"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory):
    """One prepared-data cache for every test of the session (prepare reuses it by fingerprint)."""
    return tmp_path_factory.getbasetemp() / "train-data-cache"


def train_paused_in_a_save(args, pause: str):
    """Start `python train.py ARGS` with the test hook KOGPT_TEST_SAVE_PAUSE=pause ("20", "20:best") and return
    the process once it sleeps inside that save, for a test to kill or probe; fail if it ends first."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "KOGPT_TEST_SAVE_PAUSE": pause, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "train.py", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    marker = "SAVE_PAUSED " + pause.replace(":", " ")
    for line in proc.stdout:
        if line.startswith(marker):
            return proc
    proc.wait(timeout=60)
    pytest.fail(f"the run ended without reaching its save ({pause})")
