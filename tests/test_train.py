"""train.py (and training/setup.py, what a run does before its first step): the learning-rate schedule, the exact
validation loss, a tiny run end to end, refusals."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from cli.errors import UserError
from training.config import TrainConfig
from storage.checkpoint import load_model
from tests.conftest import ROOT, TINY, tiny
from tests.fake_device import stand_in_cuda


def test_get_lr_warms_up_linearly_then_decays_by_cosine_to_min_lr():
    tc = TrainConfig(lr=1.0, min_lr=0.1, warmup_steps=10, max_steps=110)
    assert train.get_lr(0, tc) == pytest.approx(0.1)
    assert train.get_lr(4, tc) == pytest.approx(0.5)
    assert train.get_lr(9, tc) == pytest.approx(1.0)
    assert train.get_lr(10, tc) == pytest.approx(1.0)  # cosine starts at the peak
    assert train.get_lr(60, tc) == pytest.approx(0.55)  # halfway: min + (max - min) / 2
    assert train.get_lr(85, tc) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(0.75 * math.pi)))
    assert train.get_lr(110, tc) == pytest.approx(0.1)
    assert train.get_lr(500, tc) == pytest.approx(0.1)  # stays at the floor past max_steps
    assert train.get_lr(0, TrainConfig(lr=2.0, min_lr=0.0, warmup_steps=0, max_steps=4)) == pytest.approx(2.0)


def test_tiny_run_end_to_end(tmp_path, data_cache):
    run = tmp_path / "run"
    cfg = tiny(data_cache)
    final = train.train(cfg, run)

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == list(range(1, 21))
    assert all({"step", "loss", "lr", "tokens_per_s"} <= r.keys() for r in steps)
    assert steps[-1]["loss"] < steps[0]["loss"] - 0.3  # it learns
    assert steps[0]["loss"] == pytest.approx(math.log(1024), abs=0.3)  # about ln(vocab) at init
    assert [r["step"] for r in records if r.get("kind") == "eval"] == [10, 20]
    assert records[-1] == final and final["kind"] == "final"

    meta = json.loads((run / "last" / "meta.json").read_text())
    assert final["val_tokens_predicted"] == meta["splits"]["val"]["tokens"] - 1  # all but the first token
    assert final["val_chars"] == meta["splits"]["val"]["chars"]
    assert final["best_step"] == 20 and final["best_val_bpc"] == final["val_bpc"]  # the loss still falls

    for ckpt in ("last", "best"):
        assert sorted(p.name for p in (run / ckpt).iterdir()) == [
            "config.json", "meta.json", "model.safetensors", "tokenizer.json", "train_state.pt"]  # fmt: skip
        state = torch.load(run / ckpt / "train_state.pt", weights_only=True)
        assert state["step"] == 20
    best_eval = min((r for r in records if r.get("kind") == "eval"), key=lambda r: r["val_loss"])  # best/, kept
    assert (state["best_step"], state["best_val_loss"]) == (best_eval["step"], pytest.approx(best_eval["val_loss"], abs=1e-6))
    saved = json.loads((run / "config.json").read_text())
    assert re.fullmatch("[0-9a-f]{16}", saved["run_id"])  # the run's identity, which every checkpoint carries
    assert saved["run_id"] == state["run_id"] == json.loads((run / "best" / "config.json").read_text())["run_id"]
    assert saved == {**cfg.to_dict(), "model": {**cfg.to_dict()["model"], "vocab_size": meta["vocab_size"]},
                     "run_id": saved["run_id"]}  # fmt: skip
    assert json.loads((run / "last" / "config.json").read_text())["train"] == saved["train"]
    assert (run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    model = load_model(run)  # generate.py's way in: best/ of the run dir
    assert model.config.vocab_size == meta["vocab_size"] and not model.training


def test_existing_checkpoint_needs_resume_and_resume_needs_a_checkpoint(tmp_path, data_cache):
    run = tmp_path / "run"
    with pytest.raises(UserError, match="nothing to resume.*drop --resume"):
        train.train(tiny(data_cache), run, resume=True)
    train.train(tiny(data_cache, "--train.max_steps=2", "--train.eval_interval=2", "--train.sample_tokens=0"), run)
    with pytest.raises(UserError, match=r"already holds a run \(best/, last/, metrics.jsonl\); continue it with "
                                        r"--resume, start another with --out NEW_DIR, or replace it with --overwrite"):
        train.train(tiny(data_cache), run)


def files_of(directory: Path) -> dict:
    """Every file below `directory` with its bytes: a snapshot to compare."""
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_new_run_never_replaces_an_old_one_without_overwrite(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    base = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.max_steps=2", "--train.eval_interval=2", "--out", str(run)]  # fmt: skip
    assert train.main(base) == 0
    capsys.readouterr()
    shutil.rmtree(run / "last")  # best/ and metrics.jsonl are left: still a run worth keeping
    before = files_of(run)
    assert train.main(base) == 2
    assert capsys.readouterr().err == (f"error: {run} already holds a run (best/, metrics.jsonl); start another "
                                       f"with --out NEW_DIR, or replace it with --overwrite\n")
    assert files_of(run) == before
    assert train.main([*base, "--resume", "--overwrite"]) == 2
    assert "pass only one" in capsys.readouterr().err
    assert train.main([*base, "--train.max_steps=4", "--overwrite"]) == 0
    assert (run / "last").is_dir() and files_of(run) != before
    steps = [r["step"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]
    assert steps == [1, 2, 3, 4]


def test_resume_refuses_a_changed_model_shape(tmp_path, data_cache):
    run = tmp_path / "run"
    train.train(tiny(data_cache, "--train.max_steps=2", "--train.eval_interval=2", "--train.sample_tokens=0"), run)
    with pytest.raises(UserError, match=r"the run has model.n_embd = 32 from its first step and this command gives 64"):
        train.train(tiny(data_cache, "--model.n_embd=64"), run, resume=True)
    before = (run / "last" / "model.safetensors").read_bytes()
    train.train(tiny(data_cache, "--train.max_steps=4", "--model.dropout=0.0", "--train.sample_tokens=0"), run, resume=True)
    assert (run / "last" / "model.safetensors").read_bytes() != before  # dropout may change


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    base = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--out", str(run)]  # fmt: skip
    assert train.main([*base, "--train.max_steps=10"]) == 0
    good = (run / "last" / "model.safetensors").read_bytes()
    # a huge learning rate blows the weights up within a step or two
    assert train.main([*base, "--train.max_steps=20", "--train.lr=1e30", "--resume"]) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.match(r"error: the training loss is nan at step 1[12], .*last keeps the last good weights", err), err
    assert (run / "last" / "model.safetensors").read_bytes() == good
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 10


@pytest.mark.slow
def test_cli_bad_config_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "r"
    result = subprocess.run(
        [sys.executable, "train.py", "--config", str(TINY), "--train.lrr=1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("error: unknown key train.lrr; valid keys in [train]: max_steps,")
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    cases = {
        "--train.max_steps=ten": "error: train.max_steps = 'ten' must be an integer",
        "--train.dtype=fp8": 'error: train.dtype = "fp8" is not one of',
        "--model.n_head=3": "error: model.n_embd = 32 is not divisible by model.n_head = 3",
        "--data.vocab_size=10": "error: data.vocab_size must be at least 300",
        "train.lr=1": "error: cannot read option 'train.lr=1'",
    }
    for override, message in cases.items():
        assert train.main(["--config", str(TINY), override, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1, err
    assert train.main(["--config", str(tmp_path / "missing.toml")]) == 2
    assert capsys.readouterr().err.startswith("error: config file")
    assert not out.exists()  # nothing written for a bad config


def test_wandb_logs_offline_without_credentials(tmp_path, data_cache, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: no credentials, so offline and no prompt
    monkeypatch.setenv("WANDB_MODE", "unset")  # so that teardown restores the variable train.py sets
    monkeypatch.delenv("WANDB_MODE")
    run = tmp_path / "run"
    cfg = tiny(data_cache, "--train.max_steps=2", "--train.eval_interval=2", "--train.sample_tokens=0", "--log.wandb=true")
    train.train(cfg, run)
    assert os.environ["WANDB_MODE"] == "offline"
    assert list((run / "wandb").glob("offline-run-*"))


def test_patience_stops_the_run_and_best_keeps_the_best_step(tmp_path, data_cache, capsys):
    run = tmp_path / "run"
    # lr 0 never changes the weights, so after the first evaluation none is better
    cfg = tiny(data_cache, "--train.lr=0.0", "--train.min_lr=0.0", "--model.dropout=0.0", "--train.eval_interval=2",
               "--train.patience=2", "--train.sample_tokens=0")  # fmt: skip
    final = train.train(cfg, run)
    assert final["step"] == 6 and final["best_step"] == 2
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    assert [r["step"] for r in evals] == [2, 4, 6]
    assert torch.load(run / "best" / "train_state.pt", weights_only=True)["step"] == 2
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 6
    assert final["best_val_bpc"] == pytest.approx(final["val_bpc"])  # same weights, loaded back from best/
    report, heads = capsys.readouterr().out.strip().splitlines()[-2:]
    assert f"best weights ({run / 'best'}, step 2) " in report and f"last ({run / 'last'}, step 6) " in report
    assert heads.startswith("heads of best/ (step 2): no copying circuit formed: ") and "try" not in heads  # no lessons


def test_best_by_copy_loss_keeps_the_weights_that_copy_best_and_says_whether_heads_formed(tmp_path, data_cache, capsys):
    """train.best_by = "copy_loss": best/ is the evaluation whose second copy of repeated random tokens cost
    least, and the run ends with one line on best/'s heads (none form in 20 tiny steps: what to try)."""
    run = tmp_path / "run"
    final = train.train(tiny(data_cache, "--train.best_by=copy_loss", "--train.copy_lessons=0.5",
                             "--train.eval_interval=4", "--train.sample_tokens=0"), run)
    evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
    copy = [r["heads"]["loss_second_copy"] for r in evals]
    assert [r["step"] for r in evals] == [4, 8, 12, 16, 20] and len(set(copy)) > 1
    best = evals[copy.index(min(copy))]["step"]
    assert final["best_step"] == best == torch.load(run / "best" / "train_state.pt", weights_only=True)["step"]
    assert "best_copy_loss" in evals[-1] and "best_val_loss" not in evals[-1]
    assert final["best_heads"]["loss_second_copy"] == pytest.approx(min(copy), abs=1e-5)  # best/ scored again
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(rf"heads of best/ \(step {best}\): no copying circuit formed: previous-token .*; try another "
                        r"--train\.seed, or more --train\.max_steps", last_line)
    with pytest.raises(UserError, match=r"its best/ holds the lowest copy_loss, and train.best_by = \"val_loss\" "):
        train.train(tiny(data_cache, "--train.copy_lessons=0.5", "--train.max_steps=24"), run, resume=True)
    assert torch.load(run / "last" / "train_state.pt", weights_only=True)["step"] == 20  # nothing changed


def test_score_of_the_validation_text_equals_the_runs_val_bpc(tmp_path, data_cache):
    """Training's final val_bpc and `generate.py --score` are one computation (model/nll.py)."""
    from konlpy.corpus import kolaw

    import generate
    from inference import load_run, score_file

    val = tmp_path / "held_out.txt"
    val.write_text(kolaw.open("constitution.txt").read()[:700], encoding="utf-8")  # several 16-token windows
    final = train.train(tiny(data_cache, f"--data.val_source={val}", "--train.sample_tokens=0"), tmp_path / "run")
    assert final["best_step"] == final["step"]  # so best/ and last/ hold the weights val_bpc was computed with
    score = score_file(load_run(tmp_path / "run", device="cpu"), val, progress=False)
    assert score.tokens == final["val_tokens_predicted"] and score.chars == final["val_chars"]
    assert score.bits_per_char == pytest.approx(final["val_bpc"], abs=1e-6)
    assert generate.main(["--ckpt", str(tmp_path / "run"), "--score", str(val)]) == 0


def test_a_small_validation_split_is_scored_exactly_at_each_evaluation(tmp_path, data_cache):
    """When reading the whole validation split costs no more than the evaluation's batches, the evaluation
    scores it exactly, so best/ is chosen by the number the final report bills (model/nll.py)."""
    from konlpy.corpus import kolaw

    from model.nll import windows_read

    val = tmp_path / "held_out.txt"
    val.write_text(kolaw.open("constitution.txt").read()[:700], encoding="utf-8")
    for eval_iters, exact in [(50, True), (2, False)]:  # 50 x 4 x 16 = 3,200 tokens of batches; 2 x 4 x 16 = 128
        cfg = tiny(data_cache, f"--data.val_source={val}", "--train.sample_tokens=0", f"--train.eval_iters={eval_iters}")
        run = tmp_path / f"run{eval_iters}"
        final = train.train(cfg, run)
        meta = json.loads((run / "last" / "meta.json").read_text())
        assert 128 < windows_read(meta["splits"]["val"]["tokens"], 16) <= 3_200
        evals = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"eval"' in line]
        assert evals[-1]["step"] == final["step"] == final["best_step"]
        assert (evals[-1]["val_loss"] == pytest.approx(final["val_loss"], abs=1e-6)) is exact


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_mixed_precision_on_cpu_learns(tmp_path, data_cache, dtype):
    """bf16 autocast, and fp16 autocast with a GradScaler, as on a GPU: the loss falls and stays finite."""
    final = train.train(tiny(data_cache, f"--train.dtype={dtype}", "--train.sample_tokens=0"), tmp_path / dtype)
    losses = [json.loads(line)["loss"] for line in (tmp_path / dtype / "metrics.jsonl").read_text().splitlines()
              if '"loss"' in line and '"kind"' not in line]
    assert len(losses) == 20 and losses[-1] < losses[0] - 0.3 and math.isfinite(final["val_bpc"])
    scaler = torch.load(tmp_path / dtype / "last" / "train_state.pt", weights_only=True)["scaler"]
    if dtype == "fp16":
        assert scaler["scale"] > 0 and scaler["_growth_tracker"] >= 0  # the scaler ran and was saved
    else:
        assert scaler == {}


@pytest.mark.slow
def test_compiled_training_on_cpu_matches_eager(tmp_path, data_cache):
    """torch.compile (inductor, on the CPU here) computes the same losses as eager mode, to float tolerance."""
    args = ("--train.max_steps=6", "--train.eval_interval=6", "--train.sample_tokens=0", "--model.dropout=0.0")
    eager = train.train(tiny(data_cache, *args, "--train.compile=off"), tmp_path / "eager")
    compiled = train.train(tiny(data_cache, *args, "--train.compile=on"), tmp_path / "compiled")

    def losses(run):
        return [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]

    assert losses(tmp_path / "compiled") == pytest.approx(losses(tmp_path / "eager"), abs=1e-4)
    assert compiled["val_bpc"] == pytest.approx(eager["val_bpc"], abs=1e-4)


def test_a_compiler_that_fails_at_the_first_step_leaves_the_run_eager_with_a_warning(tmp_path, data_cache, capsys,
                                                                                    monkeypatch):
    class CompilerFails(torch.nn.Module):  # what torch.compile gives where the compiler cannot build its kernels
        def __init__(self, module):
            super().__init__()
            self._orig_mod = module

        def forward(self, *args, **kwargs):
            raise RuntimeError("BackendCompilerFailed: backend='inductor' raised:\nCalledProcessError: gcc not found")

    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.max_steps=4",
            "--train.eval_interval=4", "--train.sample_tokens=0"]
    assert train.main([*args, "--out", str(tmp_path / "eager")]) == 0
    monkeypatch.setattr(torch, "compile", CompilerFails)
    capsys.readouterr()
    assert train.main([*args, "--train.compile=true", "--out", str(tmp_path / "compiled")]) == 0
    out = capsys.readouterr().out
    assert "warning: torch.compile failed at the first step (RuntimeError: BackendCompilerFailed: backend='inductor' " \
           "raised:), so the run goes on eager" in out
    # the failed attempt is taken back whole: the run is the eager run, weights and all
    assert (tmp_path / "compiled" / "last" / "model.safetensors").read_bytes() == \
        (tmp_path / "eager" / "last" / "model.safetensors").read_bytes()


def test_a_gpu_out_of_memory_at_the_first_compiled_step_is_its_one_line_not_a_compile_failure(tmp_path, data_cache,
                                                                                              capsys, monkeypatch):
    """torch.compile stubbed (as above): the compiled forward raises what torch raises when a CUDA allocation fails.
    It is no compiler's failure, so the run does not go on eager: it stops with the out-of-memory line."""
    class OutOfMemory(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self._orig_mod = module

        def forward(self, *args, **kwargs):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
                                         "of 14.74 GiB of which 1.06 GiB is free.")

    monkeypatch.setattr(torch, "compile", OutOfMemory)
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.max_steps=4",
            "--train.sample_tokens=0", "--train.compile=true", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    assert train.main(args) == 2
    out, err = capsys.readouterr()
    assert "torch.compile failed" not in out + err and "Traceback" not in err
    assert err.rstrip().splitlines()[-1:] == ["error: the GPU ran out of memory (CUDA out of memory. Tried to allocate 2.00 GiB); "
                                "lower train.batch_size (raise train.grad_accum to keep the batch), model.block_size "
                                "or the model's size, or generate fewer --num-samples at once"]


def test_under_torchrun_a_failed_first_compiled_step_stops_its_rank_with_one_line_and_no_retry():
    """Two ranks (world 2) faked around first_compiled_step: rank 1's compiler fails. Building DDP again there would
    wait in its broadcast while rank 0 waits in the backward's all-reduce (2 hours, the collective timeout), so the
    rank stops at once with one line, its step tried once and its model left as it was (tests/test_distributed.py
    runs it under torchrun)."""
    from types import SimpleNamespace

    from training.setup import Progress, first_compiled_step

    attempts, wrapped = [], []

    def step(run, p, lr):
        attempts.append(lr)
        raise RuntimeError("BackendCompilerFailed: backend='inductor' raised:\nCalledProcessError: gcc not found")

    loader = SimpleNamespace(state_dict=lambda: {}, load_state_dict=lambda state: None)
    ddp = SimpleNamespace(world=2, rank=1, master=False, device=torch.device("cpu"), wrap=wrapped.append)
    compiled = object()
    run = SimpleNamespace(loader=loader, ddp=ddp, model=compiled, raw=None, lang="en", compiling=True,
                          optimizer=SimpleNamespace(zero_grad=lambda set_to_none: None))
    with pytest.raises(UserError) as caught:
        first_compiled_step(run, Progress(loss_sum=torch.zeros(())), 1e-3, step)
    assert str(caught.value) == (
        "torch.compile failed at the first step on rank 1 (RuntimeError: BackendCompilerFailed: backend='inductor' "
        "raised:); under torchrun no rank can go on eager while the others wait for it in DDP's all-reduce, so every "
        "rank stops: run again with --train.compile=off")
    assert attempts == [1e-3] and wrapped == [] and run.model is compiled and not run.compiling


def test_a_resume_on_another_number_of_processes_draws_new_batches_and_dropout_masks(tmp_path, data_cache, capsys,
                                                                                    monkeypatch):
    """last/ as two processes would have saved it (two ranks' states), resumed by one: the ranks' states are not
    its own, and it must not start again from step 0's seeds, which would draw step 0's batches and dropout masks
    a second time. It draws from (seed, rank, step) instead: other batches, another RNG state, the same on a
    second resume from the same checkpoint."""
    from data.loader import BatchLoader
    from storage.checkpoint import load_train_state, save_train_state

    drawn = []  # (step, its batch, torch's RNG state as the step begins: its dropout masks)
    next_batch = BatchLoader.next_batch

    def recorded(loader):
        x, y = next_batch(loader)
        drawn.append((x.clone(), torch.get_rng_state()))
        return x, y

    monkeypatch.setattr(BatchLoader, "next_batch", recorded)
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.eval_interval=4",
            "--train.sample_tokens=0"]
    run = tmp_path / "run"
    assert train.main([*args, "--train.max_steps=4", "--out", str(run)]) == 0
    first = drawn[:]
    state = load_train_state(run / "last")
    save_train_state({**state, "world_size": 2, "ranks": state["ranks"] * 2}, run / "last" / "train_state.pt")
    shutil.copytree(run, tmp_path / "again")
    resumed, printed = [], []
    for directory in (run, tmp_path / "again"):
        drawn.clear()
        capsys.readouterr()
        assert train.main([*args, "--train.max_steps=6", "--out", str(directory), "--resume"]) == 0
        printed.append(capsys.readouterr().out)
        resumed.append(drawn[:])
    (x, rng), (x0, rng0) = resumed[0][0], first[0]
    assert not torch.equal(x, x0) and not torch.equal(rng, rng0)  # not step 0's batch, not its dropout masks
    assert all(torch.equal(a, b) for (a, _), (b, _) in zip(resumed[0], resumed[1]))  # the same draws again
    assert torch.equal(resumed[0][0][1], resumed[1][0][1])
    assert all("warning: 2 processes saved this run, 1 resume it: from step 4 each draws new batches" in out
               for out in printed)


def test_a_bf16_run_resumed_on_a_gpu_that_only_emulates_bf16_goes_on_in_fp16_and_a_bf16_by_name_stays(
        tmp_path, data_cache, capsys):  # fmt: skip
    """Stand-in GPUs (tests/fake_device.py; the numbers are the CPU's, the decisions a GPU's): a run started with
    train.dtype = auto on an A100 (compute capability 8.0) trains in bf16; resumed on a T4 (7.5), which emulates
    bf16 slowly and has no fused bf16 attention, it goes on in fp16 with a loss scaler, and says so. bf16 asked
    for by name stays bf16 there, with a warning."""
    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.eval_interval=2",
            "--train.sample_tokens=0", "--train.device=cuda", "--train.compile=off", "--lang=en"]
    run = tmp_path / "run"
    with stand_in_cuda(capability=(8, 0), name="NVIDIA A100-SXM4-80GB"):
        assert train.main([*args, "--train.dtype=auto", "--train.max_steps=2", "--out", str(run)]) == 0
    assert "on cuda:0, bf16, compile off" in capsys.readouterr().out
    with stand_in_cuda(capability=(7, 5), name="Tesla T4"):
        assert train.main([*args, "--train.dtype=auto", "--train.max_steps=4", "--out", str(run), "--resume"]) == 0
        out = capsys.readouterr().out
        assert "warning: this run trained in bf16, which cuda:0 (Tesla T4) only emulates, slowly and without fused " \
               "attention: it goes on in fp16 with a loss scaler (train.dtype = bf16 keeps bf16)\n" in out
        assert "on cuda:0, fp16, compile off" in out
        state = torch.load(run / "last" / "train_state.pt", weights_only=True)
        assert state["step"] == 4 and state["precision"] == "fp16" and state["scaler"]["scale"] > 0
        assert train.main([*args, "--train.dtype=bf16", "--train.max_steps=2", "--out", str(tmp_path / "named")]) == 0
        out = capsys.readouterr().out
        assert "warning: train.dtype = bf16, which cuda:0 (Tesla T4) only emulates: steps are slow, and without " \
               "fused attention every (T, T) attention map of a batch stays in memory (auto takes fp16 there)\n" in out
        assert "on cuda:0, bf16, compile off" in out


def test_a_resume_keeps_the_precision_auto_chose_at_the_start_on_another_machine(tmp_path, data_cache, capsys,
                                                                                  monkeypatch):
    from training import hardware

    args = ["--config", str(TINY), f"--data.cache_dir={data_cache}", "--train.threads=1", "--train.eval_interval=2",
            "--train.sample_tokens=0", "--train.dtype=auto", "--out", str(tmp_path / "run")]
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: True)  # started where bf16 is native
    assert train.main([*args, "--train.max_steps=2"]) == 0
    assert torch.load(tmp_path / "run" / "last" / "train_state.pt", weights_only=True)["precision"] == "bf16"
    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: False)  # resumed where "auto" would mean fp32
    capsys.readouterr()
    assert train.main([*args, "--train.max_steps=4", "--resume"]) == 0
    assert "on cpu, bf16, compile off" in capsys.readouterr().out
