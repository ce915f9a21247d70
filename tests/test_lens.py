"""The logit lens (inspection/views/lens.py): each stage's next-token guess, the last one the model's own.

    python -m pytest tests/test_lens.py -q
"""

import torch

from inspection.labels import labeller
from inspection.views import VIEWS, Settings, compute
from tests.conftest import biased_model, toy_run


def lens_of(model, ids, query=-1):
    return compute(toy_run(model), ids, ["lens"], Settings(query=query))["lens"]


def test_the_output_stage_is_the_models_own_distribution_and_the_first_the_embeddings():
    model = biased_model()
    ids = torch.randint(0, 64, (12,), generator=torch.Generator().manual_seed(0)).tolist()
    lens = lens_of(model, ids, query=7)
    assert lens["query"] == 7 and len(lens["top"]) == 3  # embeddings, block 0, block 1 (the output)
    own = model(torch.tensor([ids[:8]]))[0][0, -1].softmax(-1)
    with torch.no_grad():  # by hand: token 7's embedding plus position 7's, through ln_f and the tied head
        first = model.lm_head(model.ln_f(model.tok_emb.weight[ids[7]] + model.pos_emb.weight[7])).softmax(-1)
    for stage, probs in ((2, own), (0, first)):
        top = probs.topk(5)
        assert lens["top"][stage][7] == top.indices.tolist()
        torch.testing.assert_close(torch.tensor(lens["p"][stage][7]), top.values, rtol=0, atol=1e-6)
    choice = int(own.argmax())
    assert lens["rank"][2][7] == 1 and lens["top"][2][7][0] == choice
    assert lens["rank"][0][7] == 1 + int((first > first[choice]).sum())
    assert lens_of(model, ids)["query"] == 11  # the last token by default


def test_the_text_has_a_line_per_stage_with_the_top_five_and_the_rank():
    model = biased_model()
    ids = list(range(10))
    lens = lens_of(model, ids)
    lines = VIEWS["lens"].text(lens, "en").splitlines()
    choice = lens["top"][-1][9][0]
    assert len(lines) == 5 and f"the model's final choice (t{choice})" in lines[0]
    assert lines[4].startswith("the earlier stages were never trained to be read this way")  # the lens's caveat
    assert lines[1].startswith("token + position embeddings") and lines[3].startswith("after block 1 = output")
    assert "rank 1" in lines[3] and lines[3].count(" 0.") == 5
    assert f"t{lens['top'][1][9][0]} {lens['p'][1][9][0]:.3f}" in lines[2]
    assert "모델의 최종 선택" in VIEWS["lens"].text(lens, "ko")


def test_a_label_names_an_id_past_the_tokenizers_vocabulary_by_its_number():
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.WordLevel({"가": 0, "나": 1}, unk_token="가"))
    label = labeller(tokenizer)
    assert label(1) == "나" and label(5) == "<id 5>"  # a model padded past the tokenizer's 2 tokens
