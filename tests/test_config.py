"""Config loading (training/config.py): TOML tables onto dataclasses, command-line overrides, typos and wrong
types."""

from dataclasses import replace

import pytest

from cli.errors import UserError
from training.config import ConfigError, RunConfig, TrainConfig, load_config, parse_override


def write(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_configs_load():
    for name in ("tiny", "small", "gpu", "heads"):
        cfg = load_config(f"configs/{name}.toml")
        assert isinstance(cfg, RunConfig)
        assert cfg.model.vocab_size == (2048 if cfg.data.vocab_size == "auto" else cfg.data.vocab_size)


def test_tables_map_onto_dataclasses_and_defaults_fill_the_rest(tmp_path):
    cfg = load_config(write(tmp_path, "[data]\nvocab_size = 512\n[model]\nn_layer = 3\n[train]\nlr = 1\n"))
    assert cfg.data.vocab_size == 512
    assert cfg.model.n_layer == 3 and cfg.model.n_head == 4  # GPTConfig default
    assert cfg.model.vocab_size == 512  # data.vocab_size until the tokenizer is built
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)  # an int widens to float
    assert cfg.train.max_steps == TrainConfig().max_steps
    assert cfg.log.wandb is False
    saved = cfg.to_dict()
    assert saved["model"]["vocab_size"] == 512 and saved["model"]["n_layer"] == 3
    assert set(saved) == {"data", "model", "train", "log", "auto", "run_id"} and saved["auto"] == [] and saved["run_id"] == ""


def test_overrides_are_toml_values(tmp_path):
    path = write(tmp_path, "[train]\nlr = 1e-3\n")
    cfg = load_config(path, ["--train.lr=3e-4", "--train.compile=false", "--train.device=cpu",
                             '--log.wandb_run_name="a b"', "--model.dropout=0.25", "--data.vocab_size=600"])
    assert cfg.train.lr == 3e-4
    assert cfg.train.compile is False
    assert cfg.train.device == "cpu"  # a bare word is a string
    assert cfg.log.wandb_run_name == "a b"
    assert cfg.model.dropout == 0.25
    assert cfg.data.vocab_size == 600


def test_parse_override():
    assert parse_override("--train.max_steps=20") == ("train", "max_steps", 20)
    assert parse_override("--train.compile=on") == ("train", "compile", "on")
    for bad in ("--train", "--train.lr", "train.lr=1", "--lr=1"):
        with pytest.raises(ConfigError, match="overrides look like"):
            parse_override(bad)


def test_unknown_key_lists_valid_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key train\.lrr.*valid keys in \[train\]: max_steps, time_budget, batch_size"):
        load_config(write(tmp_path, "[train]\nlrr = 1e-3\n"))
    with pytest.raises(ConfigError, match=r"unknown key model\.n_layers.*n_layer"):
        load_config(write(tmp_path, ""), ["--model.n_layers=2"])
    with pytest.raises(ConfigError, match="comes from the tokenizer"):
        load_config(write(tmp_path, "[model]\nvocab_size = 100\n"))
    with pytest.raises(ConfigError, match=r"unknown section \[optim\]"):
        load_config(write(tmp_path, "[optim]\nlr = 1\n"))
    with pytest.raises(UserError, match="vocab_sise"):  # the [data] table is checked too
        load_config(write(tmp_path, "[data]\nvocab_sise = 100\n"))


def test_wrong_types_are_refused(tmp_path):
    path = write(tmp_path, "")
    cases = {
        "--train.max_steps=1.5": "train.max_steps = 1.5 must be an integer",
        "--train.max_steps=true": "train.max_steps = True must be an integer",
        "--train.lr=fast": "train.lr = 'fast' must be a number",
        "--log.wandb=1": "log.wandb = 1 must be true/false",
        "--train.compile=2": "train.compile = 2 must be a string or true/false",
        "--model.bias=0": "model.bias = 0 must be true/false",
    }
    for override, message in cases.items():
        with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
            load_config(path, [override])


def test_out_of_range_values_are_refused(tmp_path):
    path = write(tmp_path, "")
    for override, message in {
        "--train.dtype=fp8": "train.dtype",
        "--train.compile=maybe": "train.compile",
        "--train.device=tpu": "train.device",
        "--train.min_lr=1": "min_lr",
        "--train.batch_size=0": "train.batch_size",
        "--train.lr=nan": "train.lr",
        "--model.n_head=3": "not divisible",  # GPTConfig's own check, before any data work
        "--train.best_by=val": 'train.best_by = "val" is not one of "val_loss", "copy_loss"',
    }.items():
        with pytest.raises(UserError, match=message):
            load_config(path, [override])
    with pytest.raises(ConfigError, match=r'best_by = "copy_loss" needs model.block_size of at least 5 .* \(it is 4\)'):
        load_config(path, ["--train.best_by=copy_loss", "--model.block_size=4"])
    assert load_config(path, ["--train.best_by=copy_loss", "--model.block_size=5"]).train.best_by == "copy_loss"


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="config file .*nope.toml does not exist"):
        load_config(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[train\n"))


@pytest.mark.parametrize("overrides, most", [(["--train.snapshots=100000"], 2), ([f"--train.snapshots={2**63 - 1}"], 2),
                                             (["--train.snapshots=3", "--train.max_steps=10"], 1)])  # fmt: skip
def test_snapshots_past_the_evaluations_of_a_fixed_run_are_refused_with_the_largest_useful_value(overrides, most):
    with pytest.raises(ConfigError, match=f"more than this run's {most} evaluations can take .* set at most {most},"):
        load_config("configs/tiny.toml", overrides)  # 20 steps (or 10), an evaluation every 10
    assert load_config("configs/tiny.toml", ["--train.snapshots=2"]).train.snapshots == 2  # one at each: allowed


def test_a_setting_the_run_cannot_honour_is_said_once_at_its_start():
    cfg = load_config("configs/tiny.toml", ["--train.warmup_steps=50", "--train.patience=2", "--train.sample_tokens=17",
                                            "--train.eval_interval=30", "--train.time_budget=1m"])  # fmt: skip
    notes = [line for line in cfg.describe().splitlines() if line.startswith("note: ")]
    assert [n.split(" = ")[0] for n in notes] == ["note: train.time_budget", "note: train.warmup_steps",
                                                  "note: train.eval_interval", "note: train.patience",
                                                  "note: train.sample_tokens"]  # fmt: skip
    assert "not below the 20 steps" in notes[1] and "one evaluation, at the last step" in notes[2]
    assert "can never stop the run: it makes 1 evaluations" in notes[3] and "its last 8" in notes[4]
    planned = replace(load_config("configs/small.toml"), train=replace(TrainConfig(), max_steps=500, eval_interval=50,
                                                                         snapshots=20))  # a budget's plan: kept, said
    planned = replace(planned, auto=("train.max_steps",))
    assert "train.snapshots = 20, but the planned 10 evaluations take at most one snapshot each" in planned.describe()
    assert "note:" not in load_config("configs/tiny.toml").describe()


def test_heads_off_is_a_string_or_a_toml_list_of_names(tmp_path):
    listed = write(tmp_path, '[model]\nn_layer = 2\nn_head = 2\nn_embd = 32\n[train]\nheads_off = ["1.1", "0"]\n')
    assert load_config(listed).train.heads_off == "1.1,0"  # one string, as config.json keeps it
    assert load_config(listed, ["--train.heads_off=[]"]).train.heads_off == ""
    for value, message in (("[1]", r"train.heads_off = \[1\] must name one head or layer per string"),
                           ('["0.1,1.0"]', "must name one head or layer per string"),
                           ("１.０", 'names "１.０"; name a head as "LAYER.HEAD"')):  # fmt: skip
        with pytest.raises(UserError, match=message):
            load_config(listed, [f"--train.heads_off={value}"])
