"""The logit lens (inspection/lens.py): each stage's next-token guess, the last one the model's own.

    python -m pytest tests/test_lens.py -q
"""

import torch

from inspection.lens import format_lens, logit_lens
from tests.conftest import biased_model


def test_the_output_stage_is_the_models_own_distribution_and_the_first_the_embeddings():
    model = biased_model()
    ids = torch.randint(0, 64, (12,), generator=torch.Generator().manual_seed(0)).tolist()
    lens = logit_lens(model, ids, query=7)
    assert lens.query == 7 and lens.probs.shape == (3, 64)  # embeddings, block 0, block 1 (the output)
    own = model(torch.tensor([ids[:8]]))[0][0, -1].softmax(-1)
    torch.testing.assert_close(lens.probs[-1], own, rtol=0, atol=1e-6)
    with torch.no_grad():  # by hand: token 7's embedding plus position 7's, through ln_f and the tied head
        first = model.lm_head(model.ln_f(model.tok_emb.weight[ids[7]] + model.pos_emb.weight[7])).softmax(-1)
    torch.testing.assert_close(lens.probs[0], first, rtol=0, atol=1e-6)
    assert lens.rank(2) == 1 and lens.choice == int(own.argmax())
    assert lens.rank(0) == 1 + int((first > first[lens.choice]).sum())
    assert logit_lens(model, ids).query == 11  # the last token by default


def test_the_table_has_a_line_per_stage_with_the_top_five_and_the_rank():
    model = biased_model()
    ids = list(range(10))
    lens = logit_lens(model, ids)
    lines = format_lens(lens, lambda i: f"t{i}").splitlines()
    assert len(lines) == 5 and f"the model's final choice (t{lens.choice})" in lines[0]
    assert lines[4].startswith("the earlier stages were never trained to be read this way")  # the lens's caveat
    assert lines[1].startswith("token + position embeddings") and lines[3].startswith("after block 1 = output")
    assert "rank 1" in lines[3] and lines[3].count(" 0.") == 5
    top = lens.probs[1].topk(5)
    assert f"t{int(top.indices[0])} {float(top.values[0]):.3f}" in lines[2]
    assert "모델의 최종 선택" in format_lens(lens, lambda i: f"t{i}", "ko")


def test_a_label_names_an_id_past_the_tokenizers_vocabulary_by_its_number():
    from tokenizers import Tokenizer, models

    from inspection.lens import labeller

    tokenizer = Tokenizer(models.WordLevel({"가": 0, "나": 1}, unk_token="가"))
    label = labeller(tokenizer)
    assert label(1) == "나" and label(5) == "<id 5>"  # a model padded past the tokenizer's 2 tokens
