"""A run directory (training/run_dir.py): what a resume must match, and what it may lack from an older version.
The refusals of a directory that is not a run, of changed data and of a damaged train state are bad input
(tests/test_bad_input.py, classes 1, 2 and 8).

    python -m pytest tests/test_run_dir.py -q
"""

import json

import pytest

from model.errors import UserError


def test_a_checkpoint_from_before_a_new_model_setting_still_resumes(tmp_path):
    """A setting added later (model.activation) is absent from an old config.json: its default is assumed."""
    from dataclasses import asdict

    from model import GPTConfig
    from training.run_dir import check_same_model

    config = GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
    old = {k: v for k, v in asdict(config).items() if k != "activation"}
    (tmp_path / "config.json").write_text(json.dumps({"model": old}))
    (tmp_path / "meta.json").write_text(json.dumps({"tokenizer_hash": "h"}))
    check_same_model(tmp_path, asdict(config), {"tokenizer_hash": "h"})  # no error
    with pytest.raises(UserError, match="model.activation gelu -> gelu_new"):
        check_same_model(tmp_path, {**asdict(config), "activation": "gelu_new"}, {"tokenizer_hash": "h"})
