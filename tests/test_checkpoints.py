"""training/checkpoints.py: the random generators' states a run saves, restored on a machine with fewer GPUs."""

import torch

from training import checkpoints


def cuda_generators(monkeypatch, visible: int):
    """A machine with `visible` GPUs whose generator states are recorded, not set (there is no GPU here)."""
    given = []
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda device=None: torch.full((16,), device.index, dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device=None: given.append((int(state[0]), device)))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    return given


def test_a_run_saves_its_own_gpu_s_generator_and_a_file_with_one_per_gpu_restores_on_fewer(tmp_path, monkeypatch):
    given = cuda_generators(monkeypatch, visible=1)
    state = checkpoints.rng_state(torch.device("cuda", 2))
    assert [int(s[0]) for s in state["cuda"]] == [2]  # rank 2's GPU, not every visible one

    # a train state written before, on a machine with 4 GPUs: one state per GPU
    old = {**state, "cuda": [torch.full((16,), i, dtype=torch.uint8) for i in range(4)]}
    torch.save(old, tmp_path / "train_state.pt")
    saved = torch.load(tmp_path / "train_state.pt", weights_only=True)
    checkpoints.set_rng_state(saved, torch.device("cuda", 3))  # the same GPU is there: its own state
    checkpoints.set_rng_state(saved, torch.device("cuda", 0))
    checkpoints.set_rng_state(state, torch.device("cuda", 0))  # resumed on one GPU: the one state saved
    assert given == [(3, torch.device("cuda", 3)), (0, torch.device("cuda", 0)), (2, torch.device("cuda", 0))]
    # and a CPU run (or a CPU resume of a GPU run) sets no CUDA generator, with no error
    checkpoints.set_rng_state(saved, torch.device("cpu"))
    assert len(given) == 3
    assert checkpoints.cuda_state_for(saved["cuda"], torch.device("cuda", 7)) is saved["cuda"][0]  # fewer GPUs: no IndexError
