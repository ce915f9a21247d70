"""metrics.jsonl (training/metrics.py): a damaged log never blocks a resume; MFU per device.

    python -m pytest tests/test_metrics.py -q
"""

import json

import pytest

import train
from training.config import LogConfig
from training.metrics import RunLog, Speedometer, read_metrics
from tests.conftest import TINY


@pytest.fixture(scope="session")
def data_cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "train-data-cache"


def write_lines(path, records, tail: bytes = b""):
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail)


def test_a_line_cut_short_or_garbled_is_dropped_with_a_warning(tmp_path, capsys):
    path = tmp_path / "metrics.jsonl"
    good = [{"step": 1, "loss": 3.0}, {"kind": "eval", "step": 2, "val_loss": 2.9}, {"step": 3, "loss": 2.8}]
    write_lines(path, good[:2], b'["not", "a record"]\n\xff\xfe garbage\n' + json.dumps(good[2]).encode() + b'\n{"step": 4, "lo')
    assert read_metrics(path) == good
    log = RunLog(tmp_path, {}, resume_step=3, wandb_cfg=LogConfig())
    log.write({"step": 4, "loss": 2.7})
    log.close(plot=False)
    assert read_metrics(path) == [*good, {"step": 4, "loss": 2.7}]
    assert capsys.readouterr().err == f"warning: {path} had 3 damaged lines; they were dropped\n"


def test_resume_after_a_log_cut_mid_line(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.eval_interval=2", "--out", str(run)]  # fmt: skip
    assert train.main([*args, "--train.max_steps=2"]) == 0
    with open(run / "metrics.jsonl", "ab") as f:
        f.write(b'{"kind": "final", "val_lo')  # a crash in the middle of the last write
    assert train.main([*args, "--train.max_steps=4", "--resume"]) == 0
    records = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4] and records[-1]["kind"] == "final"


@pytest.mark.parametrize("devices, mfu", [(2, 0.25), (1, 0.5)])
def test_mfu_is_per_device_and_ranks_that_share_a_gpu_count_it_once(devices, mfu):
    """Two ranks training 1,000 tokens/s together at 1e9 FLOPs a token, on two GPUs of 2e12 FLOP/s each (each at
    a quarter of its peak) or sharing one (at half of it)."""
    speed = Speedometer(flops_per_token=1e9, peak=2e12, devices=devices)
    assert speed.figures(tokens=4000, seconds=4.0) == {"tokens_per_s": 1000.0, "mfu": mfu}
