"""The files of --attention DIR (inspection/files.py): which records write which files, attention.npz round-trips,
and a set that cannot be written leaves the directory as it was.

    python -m pytest tests/test_files.py -q
"""

import numpy as np
import pytest

from inspection.files import load_npz, write_records
from inspection.views import VIEWS, Settings, compute
from cli.errors import UserError
from tests.conftest import biased_model, toy_run

IDS = [0, 5, 17, 3, 42, 17, 9]


@pytest.fixture(scope="module")
def records():
    return compute(toy_run(biased_model()), IDS, ["maps", "walkthrough", "words", "why"], Settings(explain=(1, 0)))


def test_each_record_writes_its_files_and_json_only_where_asked(records, tmp_path):
    written = write_records(records, tmp_path / "a", asked=())
    assert sorted(p.name for p in written) == ["attention.html", "attention.npz", "explain.npz", "layer_0.png",
                                               "layer_1.png"]
    written = write_records(records, tmp_path / "b", layers=[1])  # by default the words' PNGs and why.json too
    assert sorted(p.name for p in written) == ["attention.html", "attention.npz", "explain.npz", "layer_1.png",
                                               "layer_1_words.png", "why.json"]


def test_attention_npz_round_trips_the_maps_record(records, tmp_path):
    write_records(records, tmp_path, asked=())
    back, maps = load_npz(tmp_path / "attention.npz"), records["maps"]
    np.testing.assert_array_equal(back.att, maps["att"])
    assert (back.ids, back.labels, back.pieces, back.prefill) == (IDS, maps["tokens"], maps["pieces"], len(IDS))


def test_a_set_that_cannot_be_written_leaves_the_directory_as_it_was(records, tmp_path):
    (tmp_path / "attention.npz").mkdir()
    with pytest.raises(UserError, match="attention.npz is a directory"):
        write_records(records, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attention.npz"]
    assert VIEWS["maps"].text(records["maps"], "en")  # and the records are whole
