"""DistributedDataParallel (training/distributed.py): two CPU processes (gloo) under torchrun train, checkpoint
and resume exactly: python -m pytest tests/test_distributed.py -q"""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from tests.conftest import ROOT, TINY, hooked_train
from tests.fake_device import stand_in_cuda
from training.distributed import Distributed

pytestmark = pytest.mark.slow  # two trainers under torchrun, three times


def torchrun(run, data_cache, *extra, signal_after=None, nan_after=None, compile_fails_on=None):
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.max_steps=12",
            "--train.eval_interval=6", "--train.sample_tokens=0", "--train.grad_accum=2", "--out", str(run), *extra]  # fmt: skip
    hooks = ["--signal-after", signal_after] if signal_after else ["--nan-after", nan_after] if nan_after else []
    hooks += ["--compile-fails-on", str(compile_fails_on)] if compile_fails_on is not None else []
    script = hooked_train(args, *hooks)[1:] if hooks else ["train.py", *args]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *script]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)  # a hang fails


def test_two_processes_with_gradient_accumulation_train_checkpoint_and_resume_exactly(tmp_path, data_cache):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    result = torchrun(straight, data_cache)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    assert len(losses) == 12 and losses[-1] < losses[0] - 0.2  # one log line per step (rank 0 only)
    assert records[-1]["kind"] == "final" and records[-1]["val_bpc"] > 0
    state = torch.load(straight / "last" / "train_state.pt", weights_only=True)
    assert state["world_size"] == 2 and state["step"] == 12
    rank0, rank1 = (r["loader"]["rng_state"] for r in state["ranks"])
    assert not torch.equal(rank0, rank1)  # each rank draws its own batches

    stopped = torchrun(interrupted, data_cache, signal_after="4:TERM")
    assert "stopped at step 4" in stopped.stderr, stopped.stderr[-3000:]
    assert "torchrun --standalone --nproc_per_node=2 train.py" in stopped.stderr
    assert torch.load(interrupted / "last" / "train_state.pt", weights_only=True)["step"] == 4
    resumed = torchrun(interrupted, data_cache, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    def logged(run):
        return [(r["step"], r["loss"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]

    assert logged(interrupted) == logged(straight)
    assert (interrupted / "last" / "model.safetensors").read_bytes() == (straight / "last" / "model.safetensors").read_bytes()


def test_a_nan_on_one_rank_stops_every_rank_with_the_error_line_not_a_hang(tmp_path, data_cache):
    # rank 1 diverges after step 5: the log (every 4 steps) has not seen it when the save of step 6 checks it, and
    # each rank checks its own loss there; before, rank 1 ended alone and rank 0 waited in the gather for good
    result = torchrun(tmp_path / "run", data_cache, "--train.log_interval=4", nan_after="5:1")
    assert result.returncode != 0
    assert result.stderr.count("error: the training loss is nan at step 6, so training stopped") == 1, result.stderr[-3000:]


def test_cuda_n_under_torchrun_is_refused_since_every_rank_would_take_that_gpu(monkeypatch):
    from cli.errors import UserError
    from training.distributed import Distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(UserError, match='train.device = "cuda:1" puts every rank of torchrun on one GPU; use "cuda"'):
        Distributed("cuda:1")


@pytest.mark.parametrize("setting", ["--train.heads_off=9.9", "--model.n_head=3", "--data.val_fraction=2"])
def test_a_bad_setting_is_one_line_once_and_exit_code_2_on_every_rank(tmp_path, data_cache, setting):
    # rank 0 alone prints it; what follows is torchrun's own report of the two ranks' exit codes
    result = torchrun(tmp_path / "run", data_cache, setting)
    err = result.stderr
    assert err.count("error: ") == 1 and setting.split("=")[0].removeprefix("--") in err, err[-3000:]
    # a rank still working when the other failed gets torchrun's SIGTERM: -15 before its stop handler is in place,
    # 143 after it (cli/command.py's exit code for SIGTERM), which of the two is a matter of timing
    codes = re.findall(r"exitcode  : (-?\d+)", err)
    assert "2" in codes and set(codes) <= {"2", "-15", "143"} and 'train.py", line' not in err, err[-3000:]
    assert not (tmp_path / "run").exists()
def test_a_compiler_that_fails_on_one_rank_stops_every_rank_with_its_line_not_a_hang(tmp_path, data_cache):
    # rank 1's first compiled step fails; building DDP again there would wait in its broadcast while rank 0 waits in
    # the backward's all-reduce (the 2-hour collective timeout): rank 1 stops with one line, and torchrun the rest
    result = torchrun(tmp_path / "run", data_cache, "--train.compile=on", compile_fails_on=1)
    assert result.returncode != 0
    assert result.stderr.count("error: torch.compile failed at the first step on rank 1 (RuntimeError: "
                               "BackendCompilerFailed: backend='inductor' raised:); under torchrun") == 1, result.stderr[-3000:]
    assert "goes on eager" not in result.stdout + result.stderr


@pytest.mark.parametrize("other, backend, devices", [("GPU-of-rank-1", "nccl", 2), (None, "gloo", 1)])
def test_ranks_shown_a_gpu_each_take_nccl_and_ranks_on_one_gpu_take_gloo(other, backend, devices, monkeypatch):
    """Rank 0 of two on a machine whose launcher shows each rank one GPU (device_count() 1, LOCAL_WORLD_SIZE 2; a
    stand-in GPU, tests/fake_device.py): the GPUs' UUIDs, swapped through the launch's store, say whether the ranks
    share one. Two UUIDs: NCCL, and MFU counts two GPUs; the same UUID twice: gloo, one GPU."""
    import torch.distributed as dist

    for key, value in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)
    store = dist.HashStore()
    dist.PrefixStore("kogpt_devices", store).set("1", other or "GPU-of-rank-0")  # what rank 1 wrote
    monkeypatch.setattr(dist, "rendezvous", lambda url, rank, world, **kwargs: iter([(store, rank, world)]))
    made = []
    monkeypatch.setattr(dist, "init_process_group", lambda **kwargs: made.append(kwargs))
    monkeypatch.setattr(dist, "barrier", lambda: None)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    with stand_in_cuda(count=1, uuid="GPU-of-rank-0"), Distributed("cuda") as ddp:
        assert (made[0]["backend"], made[0]["store"], ddp.devices, ddp.shares_gpu) == (backend, store, devices,
                                                                                      devices == 1)


def test_under_ddp_the_gradients_are_views_into_the_all_reduce_buckets(monkeypatch):
    """One copy of the gradients, not DDP's buckets and the parameters' .grad beside them: after a step every
    gradient is a view into one bucket (a one-process gloo group; Distributed.wrap as train.py calls it)."""
    import torch.distributed as dist

    from model import GPT, GPTConfig

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp = Distributed("cpu")
        ddp.world = 2  # wrap as for two processes; the group itself has one
        model = ddp.wrap(GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)))
        idx = torch.randint(64, (2, 16))
        for _ in range(2):  # the buckets become the gradients' storage from the second step on
            model(idx, idx, loss_only=True)[1].backward()
        grads = [p.grad for p in model.module.parameters()]
        assert len({g.untyped_storage().data_ptr() for g in grads}) == 1
    finally:
        dist.destroy_process_group()
