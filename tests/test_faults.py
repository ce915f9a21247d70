"""Faults and bad input, class by class (issue 28): each test is named for its class and fails without the fix.

1 a directory that is not a run is refused before anything in it is touched; 2 a resume on changed data is
refused; 3 numbers, sizes and outputs that used to end in a traceback; 4 hostile Hugging Face configs; 5 special
files as a corpus, and read errors named as such; 6 NaN or inf weights; 7 Ctrl-C and SIGTERM at every stage;
8 a UnicodeError of another kind, a train state lacking fields, a device that cannot compute; 9 causes named
right; and the page, which must show every text as text (Chromium). tests/test_sweep.py generates the rest.

    python -m pytest tests/test_faults.py -q

The commands run in this process (their `main(argv)`) against one tiny run trained for the module, except
where a real process is the point (signals while torch loads, a FIFO that would block forever).
"""

import errno
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch

import generate
import train
from cli.command import run_command
from data import prepare, sources
from data.cache import cache_problem
from data.config import DataConfig, DataError
from hf import export_gpt2, import_gpt2
from inspection.html import save_html
from model.config import ModelInputError
from model.sampling import choose_next, keep_top_p, penalize_repetition
from storage.atomic import signals_held
from storage.checkpoint import load_model
from inspection.trace import trace_ids
from tests.conftest import CHROMIUM, ROOT, TINY, biased_model, trained_tiny_run
from tests.test_bad_input import NOT_UTF8, read_only_dir, snapshot
from training.checkpoints import recover


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    env = trained_tiny_run(tmp_path_factory, "faults")  # a run, and root/hf: its Hugging Face export
    assert import_gpt2.main([str(env.root / "hf"), str(env.root / "imported")]) == 0  # a checkpoint dir, not a run
    return env


def refused(main, argv, message, capsys) -> str:
    """Run a command's main(argv); it must exit 2 with one `error:` line holding `message`, no traceback."""
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err, err
    return err


def copy_run(env, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(env.run, run)
    return run


# ---- 1. a directory that is not this project's run ------------------------------------------------------

def test_1_training_into_an_export_or_an_import_is_refused_and_both_still_load(env, capsys):
    for directory, what in ((env.root / "hf", "a Hugging Face 'gpt2' model"), (env.root / "imported", "a checkpoint")):
        before = snapshot(directory)
        for flag in ([], ["--overwrite"], ["--resume"]):
            refused(train.main, [*env.base, "--out", str(directory), *flag], f"not a run directory of this project "
                    f"(it holds config.json (not a run's: {what}))", capsys)  # fmt: skip
        assert snapshot(directory) == before  # no .lock, config.json as it was
    assert load_model(env.root / "imported").config.n_embd == 32
    assert import_gpt2.open_hf(env.root / "hf").config.n_embd == 32


def test_1_crash_repair_never_runs_in_a_directory_it_refuses(env, tmp_path, capsys):
    mine = tmp_path / "mine"
    (mine / "last.old").mkdir(parents=True)  # names a crashed save would leave, beside files of the user's
    (mine / "last.old" / "notes.txt").write_text("keep", encoding="utf-8")
    (mine / ".config.json.1234.tmp").write_text("keep", encoding="utf-8")
    (mine / "model.safetensors").write_bytes(b"mine")
    before = snapshot(mine)
    for flag in ([], ["--overwrite"]):
        refused(train.main, [*env.base, "--out", str(mine), *flag], "(it holds model.safetensors)", capsys)
    assert snapshot(mine) == before


def test_1_repair_in_a_run_removes_only_the_runs_own_leftovers(env, tmp_path):
    run = copy_run(env, tmp_path)
    (run / ".config.json.ab12cd.tmp").write_text("a temporary file of an atomic write", encoding="utf-8")
    (run / ".my-notes.tmp").write_text("the user's", encoding="utf-8")
    recover(run)
    assert not (run / ".config.json.ab12cd.tmp").exists()
    assert (run / ".my-notes.tmp").read_text(encoding="utf-8") == "the user's"


def test_1_force_never_replaces_a_run_or_a_folder_of_the_users(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.txt").write_text("years of work", encoding="utf-8")
    for target in (run, run / "last", mine):
        before = snapshot(target)
        for command, source in ((export_gpt2.main, env.run), (import_gpt2.main, env.root / "hf")):
            refused(command, [str(source), str(target), "--force"], "which this command does not write", capsys)
        assert snapshot(target) == before
    assert export_gpt2.main([str(env.run), str(tmp_path / "export")]) == 0
    assert export_gpt2.main([str(env.run), str(tmp_path / "export"), "--force"]) == 0  # an export it may replace


# ---- 2. --resume on changed data ------------------------------------------------------------------------

@pytest.mark.slow
def test_2_resume_refuses_a_changed_validation_text_or_corpus(tmp_path, capsys):
    texts = [f.read_text(encoding="utf-8") for f in sources.builtin_files()]
    corpus, held = tmp_path / "corpus.txt", tmp_path / "held.txt"
    corpus.write_text(texts[0], encoding="utf-8")
    held.write_text(texts[-1], encoding="utf-8")
    args = ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", "--train.threads=1",
            "--train.sample_tokens=0", f"--data.source={corpus}", f"--data.val_source={held}", "--out", str(tmp_path / "run")]  # fmt: skip
    assert train.main([*args, "--train.max_steps=2", "--train.eval_interval=2"]) == 0
    for path, what in ((held, "the validation text"), (corpus, "the training text")):
        original = path.read_text(encoding="utf-8")
        path.write_text(original + "\n대한민국의 수도는 서울이다.", encoding="utf-8")
        before = snapshot(tmp_path / "run")
        refused(train.main, [*args, "--resume", "--train.max_steps=4"], f"{what} changed since it was saved", capsys)
        assert snapshot(tmp_path / "run") == before
        path.write_text(original, encoding="utf-8")
    assert train.main([*args, "--resume", "--train.max_steps=4"]) == 0  # the same data again: it goes on


# ---- 3. anything but the project's own error type, at the entry points ----------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--head", "².0"], "--head '².0' must be LAYER.HEAD"),  # "²".isdigit(), but int("²") fails
    (["--explain", "0.²"], "--explain '0.²' must be LAYER.HEAD"),
    (["--attention", "{out}", "--layers", "²"], "must list layers like 0,2 or 0-3"),
    (["--max-new-tokens", str(2**63)], "tokens needs at least"),  # past int64: torch.empty overflowed
    (["--max-new-tokens", "1", "--num-samples", str(10**9)], "num_samples 1000000000 is more than 4096"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)  # fmt: skip
def test_3_numbers_and_sizes_are_refused_before_anything_is_built(env, tmp_path, argv, message, capsys):
    argv = [a.format(out=tmp_path / "maps") for a in argv]
    refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가", *argv], message, capsys)
    assert not (tmp_path / "maps").exists()


def test_3_a_layer_range_is_checked_before_it_is_built(monkeypatch):
    built = []
    monkeypatch.setattr(generate, "range", lambda a, b: built.append(b - a) or range(0), raising=False)
    with pytest.raises(generate.UserError, match="names a layer this model lacks"):
        generate.parse_layers("0-99999999999", 2)
    assert built == []  # no set of 10**11 layers


def test_3_sampling_at_the_edges_of_its_settings_stays_finite():
    torch.manual_seed(0)
    logits = torch.randn(3, 50)
    seen = torch.zeros(3, 50, dtype=torch.bool)
    seen[:, :10] = True
    for penalty in (1e-308, 1e308):  # divides positive logits by the penalty: inf, then inf - inf = NaN
        ids = choose_next(penalize_repetition(logits, seen, penalty), temperature=0.7)
        assert ids.shape == (3,) and bool(((ids >= 0) & (ids < 50)).all())
    kept = keep_top_p(logits, 1e-320)  # rounds to 0 in float32, and every token used to be dropped
    assert (torch.isfinite(kept).sum(-1) == 1).all()
    assert choose_next(kept, temperature=1.0).tolist() == logits.argmax(-1).tolist()
    with pytest.raises(ModelInputError, match="logits hold NaN or inf"):
        choose_next(torch.full((1, 50), float("nan")))


def test_3_a_model_too_big_for_memory_is_refused_before_it_is_built(env, capsys, monkeypatch):
    def not_built(config):
        pytest.fail(f"a model of {config} was built")

    monkeypatch.setattr(train, "GPT", not_built)
    for size in (["--model.n_embd=65536", "--model.n_head=1"], ["--train.batch_size=100000000"],
                 ["--train.sample_tokens=1000000000000"]):  # fmt: skip
        refused(train.main, [*env.base, *size, "--out", str(env.root / "fresh")], "GB available; lower", capsys)
    assert not (env.root / "fresh").exists()


def test_3_attention_files_are_moved_in_whole_or_not_at_all(env, tmp_path, capsys):
    out = tmp_path / "maps"
    (out / "attention.npz").mkdir(parents=True)  # the name of one file of the set is taken by a directory
    (out / "layer_0.png").write_bytes(b"an old picture")
    before = snapshot(out)
    refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가나", "--attention", str(out)],
            f"{out / 'attention.npz'} is a directory", capsys)  # fmt: skip
    assert snapshot(out) == before  # no new PNG beside the old files, no temporary file
    ro = read_only_dir(tmp_path / "ro")
    if ro is not None:
        try:
            refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가나", "--attention", str(ro)], "cannot write",
                    capsys)  # fmt: skip
        finally:
            if os.geteuid() == 0:
                subprocess.run(["umount", "-l", str(ro)], check=True)
    assert generate.main(["--ckpt", str(env.run), "--prompt", "가나", "--attention", str(tmp_path / "new")]) == 0
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == [
        "attention.html", "attention.npz", "explain.npz", "layer_0.png", "layer_1.png"]


def test_3_a_checkpoint_whose_meta_json_names_another_dtype_reads_its_data_in_the_data_s_own(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    meta = json.loads((run / "last" / "meta.json").read_text(encoding="utf-8"))
    (run / "last" / "meta.json").write_text(json.dumps({**meta, "dtype": "float64"}), encoding="utf-8")
    capsys.readouterr()
    assert generate.main(["--ckpt", str(run / "last"), "--heads"]) == 0
    assert "on the run's validation split" in capsys.readouterr().out


def test_3_a_directory_named_like_a_jsonl_file_is_a_folder_of_texts(tmp_path):
    folder = tmp_path / "news.jsonl"
    folder.mkdir()
    (folder / "a.txt").write_text("대한민국 헌법", encoding="utf-8")
    source = sources.open_source(str(folder), DataConfig(source=str(folder)))
    assert sources.read_documents(source.chunks()) == ["대한민국 헌법"]


# ---- 4. a hostile Hugging Face config.json -------------------------------------------------------------

@pytest.mark.parametrize("changes, message", [
    ({"activation_function": ["gelu"]}, "sets activation_function = ['gelu']"),  # unhashable: a TypeError
    ({"n_embd": None, "n_inner": 128}, "model.n_embd = None must be a positive integer"),  # 4 * None
    ({"n_embd": "32", "n_inner": 128}, "model.n_embd = '32' must be a positive integer"),
    ({"n_layer": 10**6}, "model.n_layer = 1000000 is absurdly large"),  # built for minutes
    ({"n_positions": 1 << 40}, "model.block_size = 1099511627776 is absurdly large"),
    ({"layer_norm_epsilon": "1e-5"}, "model.layer_norm_eps = '1e-5' must be a positive number"),
    ({"layer_norm_epsilon": float("nan")}, "model.layer_norm_eps = nan must be a positive number"),
    ({"resid_pdrop": [0.1]}, "model.dropout = [0.1] must be a number"),
    ({"eos_token_id": 2**70}, f"names eos_token_id {2**70}"),  # the tokenizer's u32 overflowed
], ids=lambda v: ",".join(v) if isinstance(v, dict) else None)  # fmt: skip
def test_4_a_hostile_hugging_face_config_is_refused_before_anything_is_built(env, tmp_path, changes, message, capsys,
                                                                             monkeypatch):
    src = tmp_path / "src"
    shutil.copytree(env.root / "hf", src)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    (src / "config.json").write_text(json.dumps({**config, **changes}), encoding="utf-8")
    monkeypatch.setattr(import_gpt2, "expected_shapes", lambda config: pytest.fail(f"{config} was built"))
    refused(import_gpt2.main, [str(src), str(tmp_path / "out")], message, capsys)
    assert not (tmp_path / "out").exists()


# ---- 5. special files as a corpus; read errors ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "character device"])
def test_5_a_fifo_or_a_device_as_the_corpus_is_refused_not_read_forever(env, tmp_path, kind):
    source = "/dev/zero" if kind == "character device" else tmp_path / "pipe.txt"
    if kind == "fifo":
        os.mkfifo(source)  # opening it for reading blocks until a writer comes: forever
    result = subprocess.run([sys.executable, "-m", "data.prepare", "--config", str(TINY),
                             f"--data.cache_dir={env.cache}", f"--data.source={source}"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert f"data source {source} is a {'FIFO' if kind == 'fifo' else 'character device'}" in result.stderr


def test_5_a_read_error_in_the_corpus_is_named_as_one_not_as_the_cache(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국 헌법 " * 200, encoding="utf-8")

    def failing_disk(text):
        raise OSError(errno.EIO, "Input/output error", str(corpus))

    monkeypatch.setattr(sources, "split_pieces", failing_disk)
    refused(prepare.main, ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", f"--data.source={corpus}"],
            f"cannot read {corpus} (Input/output error)", capsys)  # fmt: skip
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


# ---- 6. weights holding NaN or inf ----------------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_6_weights_holding_nan_or_inf_are_refused_at_load(env, tmp_path, value, capsys):
    run = copy_run(env, tmp_path)
    file = run / "best" / "model.safetensors"
    tensors = safetensors.torch.load_file(file)
    tensors["blocks.1.mlp.c_fc.weight"][3, 5] = value
    safetensors.torch.save_file(tensors, file)
    (tmp_path / "text.txt").write_text("대한민국은 민주공화국이다.", encoding="utf-8")
    for argv in (["--prompt", "가"], ["--score", str(tmp_path / "text.txt")], ["--prompt", "가", "--attention", str(tmp_path / "maps")]):
        refused(generate.main, ["--ckpt", str(run), *argv], "holds NaN or infinite values (blocks.1.mlp.c_fc.weight)",
                capsys)  # fmt: skip
    assert not (tmp_path / "maps").exists()
    export_gpt2.export(env.run, tmp_path / "hf")  # and an import of such weights
    hf = safetensors.torch.load_file(tmp_path / "hf" / "model.safetensors")
    hf["transformer.h.0.attn.c_attn.bias"][0] = value
    safetensors.torch.save_file(hf, tmp_path / "hf" / "model.safetensors")
    refused(import_gpt2.main, [str(tmp_path / "hf"), str(tmp_path / "out")], "holds NaN or infinite values", capsys)


# ---- 7. signals at the edges ----------------------------------------------------------------------------

def signalling(signum, then=None):
    """A function that signals this process (as Ctrl-C or `kill` would), then calls `then`."""
    def hook(*args, **kwargs):
        os.kill(os.getpid(), signum)
        return then(*args, **kwargs) if then else None

    return hook


def test_7_sigterm_while_preparing_the_data_is_one_line_and_leaves_nothing(env, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(train, "prepare", signalling(signal.SIGTERM, train.prepare))
    capsys.readouterr()
    assert train.main([*env.base, f"--data.cache_dir={tmp_path / 'cache'}", "--out", str(tmp_path / "run")]) == 143
    err = capsys.readouterr().err
    assert err.startswith("error: stopped by SIGTERM; no checkpoint of this run was saved; start it again with: ")
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").glob(".tmp-*"))


@pytest.mark.parametrize("stage", ["the last evaluation", "the final scores"])
def test_7_sigterm_at_the_end_of_a_run_is_not_ignored(env, tmp_path, stage, monkeypatch, capsys):
    name = "evaluate" if stage == "the last evaluation" else "final_scores"
    monkeypatch.setattr(train, name, signalling(signal.SIGTERM, getattr(train, name)))
    args = [*env.base, "--train.max_steps=4", "--train.eval_interval=4", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    assert train.main(args) == 143
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "resume with: " in line and line.endswith("--resume")
    monkeypatch.undo()
    resume = shlex.split(line.split("resume with: ")[1])[2:]  # the printed command, after "python train.py"
    assert train.main(resume) == 0  # the final report, done now
    final = json.loads((tmp_path / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert final["kind"] == "final" and final["step"] == 4


def ctrl_c_twice_at(at: int):
    """A test hook of train.main that presses Ctrl-C twice at step `at` (after it, or halfway through its save)."""
    def hook(step, *name):
        if step == at:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    return hook


def test_7_two_ctrl_c_before_the_first_save_advise_one_command_that_works(env, tmp_path, capsys):
    args = [*env.base, "--train.max_steps=6", "--train.eval_interval=3", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    assert train.main(args, after_step=ctrl_c_twice_at(1)) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: aborted by a second Ctrl-C without saving; no checkpoint of this run was saved; "
                           "start it again with: python ")  # fmt: skip
    again = shlex.split(line.split("start it again with: ")[1])[2:]
    assert again[-1] == "--overwrite"  # metrics.jsonl is there: the same command alone would be refused
    assert train.main(again) == 0


def test_7_a_second_ctrl_c_in_the_middle_of_a_save_leaves_no_half_written_checkpoint(env, tmp_path, capsys):
    args = [*env.base, "--train.max_steps=6", "--train.eval_interval=3", "--out", str(tmp_path / "run")]
    capsys.readouterr()
    assert train.main(args, during_save=ctrl_c_twice_at(6)) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{tmp_path / 'run' / 'last'} keeps step 3; resume with: " in line
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["best", "config.json", "last", "metrics.jsonl"]
    assert train.main(shlex.split(line.split("resume with: ")[1])[2:]) == 0


def test_7_signals_wait_for_a_held_block():
    order = []
    # Python's own Ctrl-C handler, whatever an earlier test left installed (CI once saw no KeyboardInterrupt here)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with signals_held():
                os.kill(os.getpid(), signal.SIGINT)
                order.append("the block went on")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert order == ["the block went on"]


def test_7_sigterm_in_a_command_unwinds_through_its_cleanups(capsys):
    cleaned = []

    def work():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        finally:
            cleaned.append(True)

    assert run_command(work, interrupted="interrupted; nothing was written") == 143
    assert cleaned == [True] and capsys.readouterr().err == "error: interrupted; nothing was written\n"


@pytest.mark.slow
@pytest.mark.parametrize("command", [["-m", "data.prepare"], ["train.py", "--out", "{root}/startup"]])
def test_7_ctrl_c_while_torch_loads_is_one_line(env, command):
    command = [a.format(root=env.root) for a in command]
    proc = subprocess.Popen([sys.executable, *command, "--config", str(TINY), f"--data.cache_dir={env.cache}"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    # the imports take a second or more; a few tenths in, they are still going
    try:
        proc.wait(timeout=0.3)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 130 and err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert err.strip().startswith("error: ")


@pytest.mark.slow
def test_7_kept_two_processes_preparing_one_corpus_leave_one_good_cache(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있다.\n" * 2000, encoding="utf-8")
    command = [sys.executable, "-m", "data.prepare", "--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}",
               f"--data.source={corpus}"]  # fmt: skip
    both = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"}) for _ in range(2)]  # fmt: skip
    assert [p.wait(timeout=300) for p in both] == [0, 0], [p.stderr.read() for p in both]
    built = list((tmp_path / "cache").iterdir())
    assert len(built) == 1 and cache_problem(built[0]) is None


# ---- 8. kept from the second pass -----------------------------------------------------------------------

def test_8_a_unicode_error_that_is_not_a_decode_error_is_the_encoding_line(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("대한민국 헌법", encoding="utf-8")
    refused(prepare.main, ["--config", str(TINY), f"--data.cache_dir={tmp_path / 'cache'}", f"--data.source={corpus}",
                           "--data.encoding=undefined"], f"{corpus} is not valid undefined (undefined encoding)", capsys)  # fmt: skip
    with pytest.raises(DataError, match="'base64' is not a text encoding"):  # bytes in, bytes out
        DataConfig(encoding="base64")


@pytest.mark.parametrize("damage, message", [
    (lambda s: {"step": s["step"]}, "it lacks best_val_loss"),
    (lambda s: {**s, "ranks": [{"rng": s["ranks"][0]["rng"]}]}, "it lacks ranks[].loader"),
    (lambda s: {**s, "best_step": "2"}, "best_step is str"),
    (lambda s: {**s, "optimizer": {**s["optimizer"], "state": {0: {"step": torch.tensor(2.0), "exp_avg": torch.zeros(3),
                                                                     "exp_avg_sq": torch.zeros(3)}}}},
     "optimizer.state[0].exp_avg is not a tensor of shape (1024, 32)"),
    (lambda s: {**s, "optimizer": {**s["optimizer"], "param_groups": s["optimizer"]["param_groups"][:1]}},
     "optimizer.param_groups is not the two groups of this model"),
    (lambda s: {**s, "ranks": [{**s["ranks"][0], "loader": {"rng_state": torch.zeros(3, dtype=torch.uint8)}}]},
     "ranks[].loader.rng_state is not the state of a random generator"),
], ids=["fields", "rank fields", "type", "moment shape", "groups", "generator"])  # fmt: skip
def test_8_a_train_state_that_loads_but_lacks_fields_is_refused(env, tmp_path, damage, message, capsys):
    run = copy_run(env, tmp_path)
    state = torch.load(run / "last" / "train_state.pt", weights_only=True)
    torch.save(damage(state), run / "last" / "train_state.pt")
    before = snapshot(run)
    refused(train.main, [*env.base, "--train.max_steps=4", "--out", str(run), "--resume"],
            f"train_state.pt is not a train state of this model ({message})", capsys)  # fmt: skip
    assert snapshot(run) == before


def test_8_a_device_torch_takes_but_cannot_compute_on_is_refused(env, capsys):
    refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가", "--device", "meta"], '"meta" is not one of', capsys)
    refused(train.main, [*env.base, "--train.device=cuda:²", "--out", str(env.root / "fresh")], "is not one of", capsys)


# ---- 9. causes named right --------------------------------------------------------------------------------

def test_9_a_numeric_csv_column_is_named_as_not_text(tmp_path):
    table = tmp_path / "numbers.csv"
    table.write_text("text,label\n1,2\n3,4\n", encoding="utf-8")
    source = sources.open_source(str(table), DataConfig(source=str(table), cache_dir=str(tmp_path / "cache")))
    with pytest.raises(DataError, match=r"field 'text' is int, not text"):
        list(source.chunks())


def test_9_a_non_utf8_checkpoint_path_is_named_as_such_not_as_a_damaged_file(env, tmp_path, capsys):
    odd = tmp_path / f"run{NOT_UTF8}"
    shutil.copytree(env.run, odd)
    refused(generate.main, ["--ckpt", str(odd), "--prompt", "가"], "is not valid UTF-8 (byte 0xB4 at position", capsys)
    refused(import_gpt2.main, [str(odd / "best"), str(tmp_path / "out")], "is not valid UTF-8", capsys)


def test_9_a_lock_that_is_a_directory_is_not_a_full_disk(env, tmp_path, capsys):
    run = copy_run(env, tmp_path)
    (run / ".lock").mkdir()
    refused(train.main, [*env.base, "--train.max_steps=4", "--out", str(run), "--resume"],
            f"{run / '.lock'} is not the lock file a trainer leaves (it is a directory)", capsys)  # fmt: skip


def test_9_num_samples_are_refused_with_the_memory_they_need(env, capsys):
    err = refused(generate.main, ["--ckpt", str(env.run), "--prompt", "가", "--num-samples", "4096",
                                  "--max-new-tokens", str(10**8)], "decoding 4096 x 100,000,002 tokens needs at least",
                  capsys)  # fmt: skip
    needed = float(err.split("needs at least ")[1].split(" GB")[0].replace(",", ""))
    assert needed > 3000  # the token buffer alone is 3,277 GB: the figure is not "0.0 GB"


# ---- the page shows every text as text --------------------------------------------------------------------

HOSTILE = ['<img src=x onerror="window.pwned=1">', "</script><script>window.pwned=2</script>", "\"'><svg onload=window.pwned=3>",
           "${window.pwned=4}", "`${alert(5)}`", "a\u2028b\u2029c", "nul\x00byte", "<!--", "]]>", "&amp;&lt;", "__DATA__"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium); CI installs it")
def test_the_page_shows_injected_markup_as_text_and_fetches_nothing(env, tmp_path, browser):  # noqa: F811
    # the prompt, through the run's own tokenizer, into the title and the token spellings of a real page
    prompt = "대한민국 " + " ".join(HOSTILE)
    assert generate.main(["--ckpt", str(env.run), "--prompt", prompt, "--attention", str(tmp_path / "maps")]) == 0
    # the spellings whole, as tokens of a tokenizer could spell them, with a walkthrough and hostile roles
    trace = trace_ids(biased_model(), list(range(len(HOSTILE))))
    page = save_html(trace.att, HOSTILE, tmp_path / "tokens.html", title=" ".join(HOSTILE), trace=trace,
                     roles=[[HOSTILE[0], HOSTILE[2]]] * 2)  # fmt: skip
    for path, fragment in ((tmp_path / "maps" / "attention.html", "#layer=1&head=0&focus=3&explain=1"),
                           (page, "#layer=<img src=x onerror=window.pwned=6>&focus=2&head=1")):  # fmt: skip
        b = browser(path, fragment)
        b.click(*b.centre("#tokens .tok", 2))  # a click opens the walkthrough, which shows the spellings again
        b.move(*b.centre("#tokens .tok", 1))
        assert b.evaluate("window.pwned") is None
        assert b.evaluate("document.querySelectorAll('img, svg:not(#lines > svg), iframe, object, embed').length") == 0
        assert b.evaluate("document.querySelectorAll('#lines svg *:not(line):not(text)').length") == 0  # its lines alone
        assert b.evaluate("document.scripts.length") == 3  # the error hook, the data and the code
        assert b.evaluate("performance.getEntriesByType('resource').length") == 0  # nothing fetched
        assert b.problems() == ([], "")
        if path == page:
            assert b.texts("#tokens .t") == HOSTILE
            assert b.evaluate("document.title") == " ".join(HOSTILE).replace("\x00", "\ufffd")
            assert HOSTILE[0] in b.evaluate("document.getElementById('explain').textContent")
