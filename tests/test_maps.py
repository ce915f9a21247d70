"""The maps view (inspection/views/maps.py): per-head statistics by hand, on pure patterns and against the head roles' own
measures; the statistics table and the most-attended keys.

    python -m pytest tests/test_maps.py -q
"""

import math
import re

import numpy as np
import pytest

from inspection.labels import format_top_attended
from inspection.views.maps import STAT_NAMES, format_stats_table, head_stats
from tests.conftest import random_maps


def test_head_stats_by_hand():
    att = np.array([[1.0, 0.0, 0.0], [0.25, 0.75, 0.0], [0.5, 0.2, 0.3]])
    stats = head_stats(att[None, None])
    ent1 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    ent2 = -(0.5 * math.log(0.5) + 0.2 * math.log(0.2) + 0.3 * math.log(0.3))
    # entropy and distance over queries 1 and 2; prev, first and self as the roles define them: query 2 alone
    expected = {"entropy": (ent1 + ent2) / 2, "distance": (0.25 + 1.2) / 2, "prev": 0.2, "first": 0.5, "self": 0.3}
    for name in STAT_NAMES:
        assert stats[name].shape == (1, 1)
        assert stats[name][0, 0] == pytest.approx(expected[name], abs=1e-12)


def test_head_stats_of_pure_patterns():
    T = 6
    prev = np.eye(T, k=-1)
    prev[0, 0] = 1
    first = np.zeros((T, T))
    first[:, 0] = 1
    stats = head_stats(np.stack([prev, first, np.eye(T)])[None])  # heads: previous, first, self
    # prev, first and self are the roles' scores, queries 2..5: query 1, whose previous token is the first, is left out
    assert stats["prev"][0].tolist() == [1, 0, 0]
    assert stats["first"][0].tolist() == [0, 1, 0]
    assert stats["self"][0].tolist() == [0, 0, 1]
    assert stats["distance"][0].tolist() == [1, pytest.approx(3.0), 0]  # first: mean of q = 1..5
    assert stats["entropy"][0].tolist() == [0, 0, 0]


def test_prev_first_and_self_are_means_over_the_queries_from_2_on_counted_by_loops():
    """The role scores' definition (inspection/views/roles.py) worked out query by query, independently of its code."""
    att = random_maps(2, 3, 7, seed=4)
    stats = head_stats(att)
    for layer in range(2):
        for head in range(3):
            a = att[layer, head]
            for name, key in (("prev", lambda q: q - 1), ("first", lambda q: 0), ("self", lambda q: q)):
                by_hand = sum(float(a[q, key(q)]) for q in range(2, 7)) / 5
                assert stats[name][layer, head] == pytest.approx(by_hand, abs=1e-12), name
    assert np.isnan(head_stats(att[..., :2, :2])["prev"]).all()  # two tokens: no query past the first two


def test_stats_table_has_one_row_per_head():
    table = format_stats_table(head_stats(random_maps(2, 3, 5))).splitlines()
    assert table[0].split() == ["layer", "head", *STAT_NAMES]
    assert [tuple(map(int, row.split()[:2])) for row in table[1:]] == [(l, h) for l in range(2) for h in range(3)]


def test_top_attended_lists_strongest_keys_first():
    att = np.array([[1.0, 0, 0], [0.9, 0.1, 0], [0.2, 0.5, 0.3]])
    lines = format_top_attended(att, ["a", "대", "c"], k=2).splitlines()
    assert re.sub(r"\s+", " ", lines[2]).strip() == "2 c -> 대(1) 0.500 c(2) 0.300"
    assert lines[0].index("->") == lines[1].index("->") + 1  # "대" takes two columns
