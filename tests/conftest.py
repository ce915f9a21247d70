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
