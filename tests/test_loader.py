"""Random training windows from a token shard (data/loader.py): python -m pytest tests/test_loader.py -q"""

import io
import json

import numpy as np
import pytest
import torch

from data.config import DataError
from data.loader import BatchLoader, load_tokens


@pytest.fixture
def shard(tmp_path):
    """A shard whose token at position i is i, so every window is a run of consecutive numbers."""
    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"dtype": "uint16"}))
    return tmp_path / "train.bin"


def test_windows_are_consecutive_tokens_and_y_is_x_shifted(shard):
    x, y = BatchLoader(shard, block_size=16, batch_size=8, seed=0).next_batch()
    assert x.shape == y.shape == (8, 16) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x - x[:, :1], torch.arange(16).expand(8, 16))  # each row: start, start+1, ...
    assert torch.equal(y, x + 1) and int(x.max()) <= 998


def test_windows_reach_both_ends_of_the_shard(tmp_path):
    np.arange(18, dtype=np.uint32).tofile(tmp_path / "tiny.bin")  # exactly two possible windows of 17 tokens
    loader = BatchLoader(tmp_path / "tiny.bin", block_size=16, batch_size=64, seed=1, dtype="uint32")
    x, y = loader.next_batch()
    assert set(x[:, 0].tolist()) == {0, 1} and set(y[:, -1].tolist()) == {16, 17}


def test_same_seed_same_batches_and_ranks_differ(shard):
    a, b, other = (BatchLoader(shard, 16, 4, seed=7, rank=r) for r in (0, 0, 1))
    assert torch.equal(a.next_batch()[0], b.next_batch()[0])
    assert not torch.equal(a.next_batch()[0], other.next_batch()[0])


def test_state_round_trips_through_a_weights_only_checkpoint(shard):
    loader = BatchLoader(shard, 16, 4, seed=3)
    loader.next_batch()
    buffer = io.BytesIO()
    torch.save(loader.state_dict(), buffer)
    expected = [loader.next_batch() for _ in range(3)]
    resumed = BatchLoader(shard, 16, 4, seed=999)
    resumed.load_state_dict(torch.load(io.BytesIO(buffer.getvalue()), weights_only=True))
    for (x, y), (rx, ry) in zip(expected, (resumed.next_batch() for _ in range(3))):
        assert torch.equal(x, rx) and torch.equal(y, ry)


def test_bad_shards_are_clear_errors(shard, tmp_path):
    with pytest.raises(DataError, match=r"holds 1000 tokens, fewer than block_size \+ 1 = 1001"):
        BatchLoader(shard, block_size=1000, batch_size=1, seed=0)
    with pytest.raises(DataError, match=r"cannot read token shard .*missing\.bin"):
        load_tokens(tmp_path / "missing.bin", "uint16")
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(DataError, match=r"cannot read token shard .*empty\.bin"):
        BatchLoader(tmp_path / "empty.bin", 16, 1, seed=0)
    (tmp_path / "meta.json").unlink()
    with pytest.raises(DataError, match=r"meta\.json is missing"):
        BatchLoader(shard, 16, 1, seed=0)
