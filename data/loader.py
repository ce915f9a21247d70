"""Random training windows from a memory-mapped token shard.

    loader = BatchLoader(prepared.dir / "train.bin", block_size=128, batch_size=16, seed=1337)
    x, y = loader.next_batch()          # (B, T) int64 each; y is x shifted left by one

The windows are drawn with a seeded `torch.Generator` whose state is in `state_dict()`, so a resumed run
draws exactly the batches it would have drawn (`start_at`: a resume on another world size draws new ones).
"""

import json
from pathlib import Path

import numpy as np
import torch

from data.config import DataError


def load_tokens(bin_path: str | Path, dtype: str) -> np.memmap:
    """The flat token ids of a shard, read-only and paged in on demand."""
    try:
        return np.memmap(bin_path, dtype=dtype, mode="r")
    except (OSError, ValueError) as e:  # missing file, or empty (numpy cannot map 0 bytes)
        raise DataError(f"cannot read token shard {bin_path} ({e}); run `python -m data.prepare`") from None


def draw_seed(seed: int, rank: int, step: int = 0) -> int:
    """The seed of rank `rank`'s random draws from step `step` on: seed + rank from the first step (a seed up to
    2**64 - 1 on any rank); from a later step, where a resume on another world size starts them afresh, one mixed
    from all three (numpy's SeedSequence), so that no rank draws the first steps' batches and dropout masks again."""
    if step == 0:
        return (seed + rank) % 2**64
    return int(np.random.SeedSequence([seed % 2**64, rank, step]).generate_state(1, np.uint64)[0])


class BatchLoader:
    def __init__(self, bin_path, block_size: int, batch_size: int, seed: int, device="cpu", rank: int = 0,
                 dtype: str | None = None, lessons=None):
        """`dtype` defaults to the one in the shard's meta.json; `lessons`: a data.lessons.CopyLessons that
        rewrites a share of the windows (training only)."""
        bin_path = Path(bin_path)
        if dtype is None:
            meta_path = bin_path.with_name("meta.json")
            if not meta_path.is_file():
                raise DataError(f"{meta_path} is missing, so the dtype of {bin_path} is unknown; "
                                f"run `python -m data.prepare`")
            dtype = json.loads(meta_path.read_text(encoding="utf-8"))["dtype"]
        self.tokens = load_tokens(bin_path, dtype)
        if len(self.tokens) < block_size + 1:
            raise DataError(f"{bin_path} holds {len(self.tokens)} tokens, fewer than block_size + 1 = "
                            f"{block_size + 1}; use a smaller block_size or more text")
        self.block_size, self.batch_size, self.device, self.lessons = block_size, batch_size, torch.device(device), lessons
        self.generator = torch.Generator().manual_seed(draw_seed(seed, rank))
        self.window = np.arange(block_size + 1)

    def start_at(self, seed: int, rank: int, step: int) -> None:
        """Draw from step `step` on as a rank of no earlier run did: a resume on another world size, whose saved
        loader states belong to other ranks (draw_seed)."""
        self.generator.manual_seed(draw_seed(seed, rank, step))

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        starts = torch.randint(len(self.tokens) - self.block_size, (self.batch_size,), generator=self.generator)
        rows = self.tokens[starts.numpy()[:, None] + self.window]  # (B, T+1), one gather from the memmap
        batch = torch.from_numpy(rows.astype(np.int64))
        if self.lessons is not None:
            batch = self.lessons.apply(batch, self.generator)
        if self.device.type == "cuda":
            batch = batch.pin_memory().to(self.device, non_blocking=True)
        else:
            batch = batch.to(self.device)
        return batch[:, :-1].contiguous(), batch[:, 1:].contiguous()  # x, y: (B, T)

    def state_dict(self) -> dict:
        return {"rng_state": self.generator.get_state()}

    def load_state_dict(self, state: dict):
        self.generator.set_state(state["rng_state"])
