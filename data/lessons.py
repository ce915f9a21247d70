"""Copy lessons: training windows in which a run of random tokens repeats, so that only copying from the
context can predict it (`train.copy_lessons`, configs/heads.toml).

    lessons = CopyLessons(share=0.5, vocab_ids=ordinary_ids(tokenizer, vocab_size))
    rows = lessons.apply(rows, generator)     # rows (B, T + 1) of token ids, a share of them rewritten

A share of the windows gets one lesson: n distinct tokens drawn from `vocab_ids` (n from 4 to
(T - 1) // 2, the longest the induction test of inspection/views/roles.py repeats) written again and again
(r1 r2 ... rn r1 r2 ...) over a random stretch of at least half the window; the rest of the window keeps
its text. Nothing but an earlier copy predicts a lesson token, so the loss on them falls only when the
model copies from its context: a previous-token head and an induction head form (README, "A lesson run").
The draws come from the loader's own generator, so a resumed run draws the same lessons. Validation
windows, the evaluations and the final scores never get lessons.
"""

import torch

SHORTEST = 4  # tokens in the shortest repeated run


class CopyLessons:
    def __init__(self, share: float, vocab_ids: list[int]):
        self.share = share
        self.vocab = torch.as_tensor(vocab_ids, dtype=torch.long)

    def apply(self, rows: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """rows (B, W) of token ids -> the same with a lesson in each chosen row (module docstring)."""
        B, W = rows.shape
        longest = max(1, min((W - 2) // 2, len(self.vocab)))  # (T - 1) // 2 for windows of T + 1 tokens
        shortest = min(SHORTEST, longest)
        chosen = torch.rand(B, generator=generator) < self.share
        n = torch.randint(shortest, longest + 1, (B,), generator=generator)  # tokens in each run
        stretch = torch.randint(W // 2, W + 1, (B,), generator=generator)  # how far it repeats
        start = (torch.rand(B, generator=generator) * (W - stretch + 1)).long()
        runs = self.vocab[torch.rand(B, len(self.vocab), generator=generator).argsort(1)[:, :longest]]  # (B, longest)
        offset = torch.arange(W) - start[:, None]  # (B, W): position within the stretch
        inside = chosen[:, None] & (offset >= 0) & (offset < stretch[:, None])
        return torch.where(inside, runs.gather(1, offset.clamp(min=0) % n[:, None]), rows)
