"""Copy lessons (data/lessons.py): a repeated run of distinct random tokens in a share of the training windows.

    python -m pytest tests/test_lessons.py -q
"""

import numpy as np
import pytest
import torch

from data.lessons import CopyLessons
from data.loader import BatchLoader

VOCAB = list(range(100, 400))
TEXT = -1  # the untouched text of a window, in these tests


def lessons_of(rows: torch.Tensor) -> list[np.ndarray]:
    """The rewritten stretch of each row (the positions that are not TEXT)."""
    return [row[row != TEXT].numpy() for row in rows]


def test_a_lesson_repeats_a_run_of_distinct_tokens_over_one_stretch_of_at_least_half_the_window():
    rows = torch.full((200, 33), TEXT)  # windows of block_size 32 + 1
    out = CopyLessons(1.0, VOCAB).apply(rows, torch.Generator().manual_seed(0))
    periods = set()
    for row, stretch in zip(out, lessons_of(out)):
        where = np.flatnonzero(row.numpy() != TEXT)
        assert np.array_equal(where, np.arange(where[0], where[-1] + 1))  # one stretch
        assert 33 // 2 <= len(stretch) <= 33
        assert set(stretch) <= set(VOCAB)
        n = next(n for n in range(1, len(stretch) + 1) if np.array_equal(stretch[n:], stretch[:-n]))  # its period
        assert len(set(stretch[:n])) == n  # distinct tokens, as the induction test draws them
        periods.add(n)
    assert min(periods) == 4 and max(periods) == 15  # 4 to (block_size - 1) // 2


def test_a_share_of_windows_gets_lessons_and_the_same_generator_state_draws_the_same_ones():
    rows = torch.full((1000, 33), TEXT)
    lessons = CopyLessons(0.3, VOCAB)
    g = torch.Generator().manual_seed(1)
    state = g.get_state()
    first = lessons.apply(rows, g)
    changed = (first != TEXT).any(1).float().mean().item()
    assert changed == pytest.approx(0.3, abs=0.05)
    g.set_state(state)
    assert torch.equal(lessons.apply(rows, g), first)  # a resumed run draws the same lessons
    assert torch.equal(CopyLessons(0.0, VOCAB).apply(rows, g), rows)


def test_the_loader_writes_lessons_into_the_windows_it_draws(tmp_path):
    tokens = np.arange(2000, dtype=np.uint16) % 90  # the "text": ids below the lessons' vocabulary
    tokens.tofile(tmp_path / "train.bin")
    plain = BatchLoader(tmp_path / "train.bin", 32, 64, seed=0, dtype="uint16")
    taught = BatchLoader(tmp_path / "train.bin", 32, 64, seed=0, dtype="uint16", lessons=CopyLessons(1.0, VOCAB))
    x, y = taught.next_batch()
    assert torch.equal(x[:, 1:], y[:, :-1])  # still one window, shifted by one
    assert ((x >= 100).sum(1) >= 15).all()  # every window holds a lesson of about half its length or more
    assert (plain.next_batch()[0] < 90).all()  # and none without
