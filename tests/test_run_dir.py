"""A run directory (training/run_dir.py): what a resume must match, and what it may lack from an older version.
The refusals of a directory that is not a run, of changed data and of a damaged train state are bad input
(tests/test_bad_input.py, classes 1, 2 and 8).

    python -m pytest tests/test_run_dir.py -q
"""

import json
from types import SimpleNamespace

import pytest

from cli.errors import UserError


def test_a_checkpoint_from_before_a_new_setting_still_resumes(tmp_path):
    """A setting added later (model.activation, train.heads_off_mode) is absent from an old config.json: its
    default is assumed."""
    from model import GPTConfig
    from training.config import RunConfig
    from training.run_dir import check_same_experiment

    config = RunConfig(model=GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)).to_dict()
    old = {"model": {k: v for k, v in config["model"].items() if k != "activation"}, "data": config["data"],
           "train": {k: v for k, v in config["train"].items() if k != "heads_off_mode"}}
    (tmp_path / "config.json").write_text(json.dumps(old))
    check_same_experiment(tmp_path, config)  # no error
    with pytest.raises(UserError, match='the run has model.activation = "gelu" from its first step and this command '
                                       'gives "gelu_new"'):
        check_same_experiment(tmp_path, {**config, "model": {**config["model"], "activation": "gelu_new"}})


# ---- a run's identity: every setting that makes its experiment, changed on a resume, is refused ---------

def changed_value(section: str, key: str, value, env):
    """A value of `section.key` other than the run's `value` that the config takes on its own: doubled, halved,
    negated, or one of these (a string setting added tomorrow fails here until it has one)."""
    others = {"data.source": str(env.corpus), "data.val_source": str(env.corpus), "data.encoding": "euc-kr",
              "data.text_field": "body", "data.hf_config": "plain", "data.hf_split": "test",
              "data.tokenizer": str(env.run / "last"), "model.activation": "gelu_new",
              "train.init_from": str(env.run / "last"), "train.heads_off": "0.1", "train.heads_off_mode": "zero",
              "data.unit": "jamo"}
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 if isinstance(value, int) else value / 2
    assert f"{section}.{key}" in others, f"{section}.{key} makes a run's experiment: give it a changed value here"
    return others[f"{section}.{key}"]


@pytest.fixture(scope="module")
def kept_off_run(tmp_path_factory):
    """A tiny run trained 4 steps with head 1.0 kept off, and a text file to name as another corpus."""
    import train
    from tests.conftest import TINY

    root = tmp_path_factory.mktemp("identity")
    cache = tmp_path_factory.getbasetemp() / "train-data-cache"
    base = ["--config", str(TINY), f"--data.cache_dir={cache}", "--train.threads=1", "--train.sample_tokens=0",
            "--train.eval_interval=2", "--train.max_steps=4", "--train.heads_off=1.0", "--out", str(root / "run")]
    assert train.main(base) == 0
    (root / "corpus.txt").write_text("대한민국은 민주공화국이다.\n" * 50, encoding="utf-8")
    return SimpleNamespace(run=root / "run", corpus=root / "corpus.txt", base=base)


def run_files(run) -> dict:
    return {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}


def identity_cases():
    from training.run_dir import IDENTITY

    return [(section, key) for section, key, _ in IDENTITY] + [("train", "heads_off=")]  # none off at all (T18)


@pytest.mark.parametrize("section, key", identity_cases(), ids=[f"{s}.{k}" for s, k in identity_cases()])
def test_a_resume_that_changes_what_makes_the_run_s_experiment_is_refused_and_changes_nothing(
        kept_off_run, section, key, capsys):  # fmt: skip
    # every setting of IDENTITY (22 now) and an emptied train.heads_off: one line naming the setting and the run's value
    import train

    saved = json.loads((kept_off_run.run / "last" / "config.json").read_text(encoding="utf-8"))
    if key.endswith("="):
        key, override = key[:-1], f"--{section}.{key}"
    else:
        value = changed_value(section, key, saved[section][key], kept_off_run)
        override = f"--{section}.{key}={value if isinstance(value, str) else json.dumps(value)}"
    before = run_files(kept_off_run.run)
    capsys.readouterr()
    assert train.main([*kept_off_run.base, "--resume", override]) == 2
    err = capsys.readouterr().err
    was = json.dumps(saved[section][key], ensure_ascii=False)
    assert err.startswith(f"error: cannot resume from {kept_off_run.run / 'last'}: the run has {section}.{key} = {was} "
                          "from its first step") and err.count("\n") == 1, err
    assert run_files(kept_off_run.run) == before


def test_a_resume_may_change_the_schedule_and_name_the_same_heads_as_a_list(kept_off_run, tmp_path, capsys):
    import shutil

    import train

    run = tmp_path / "run"
    shutil.copytree(kept_off_run.run, run)
    argv = [*[a if a != str(kept_off_run.run) else str(run) for a in kept_off_run.base], "--resume"]
    assert train.main([*argv, "--train.max_steps=6", "--train.lr=1e-3", '--train.heads_off=["1.0"]']) == 0
    saved = json.loads((run / "last" / "config.json").read_text(encoding="utf-8"))
    assert saved["step"] == 6 and saved["kept_off"]["heads"] == ["1.0"]
