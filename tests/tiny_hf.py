"""Tiny Hugging Face GPT-2 directories for the tests: random GPT2LMHeadModels with a byte-level (Ġ) or a
Metaspace (▁, KoGPT2's kind) tokenizer, saved with save_pretrained. Needs transformers (the `hf` extra).
"""

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

DOCS = [
    "대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.",
    "모든 국민은 법 앞에 평등하다. 누구든지 성별, 종교 또는 사회적 신분에 의하여 차별을 받지 아니한다.",
    "서울에서 부산까지 기차로 세 시간쯤 걸립니다.\n창밖으로 논과 산이 지나갑니다.",
] * 4
PROMPT = "대한민국의 주권은 국민에게 있고, 모든 국민은 법 앞에 평등하다. 서울에서 부산까지"
N_POSITIONS = 32
KOGPT2_SPECIALS = ["<s>", "</s>", "<usr>", "<pad>", "<sys>", "<unk>", "<mask>"]  # bos 0, eos 1, pad 3 as in KoGPT2


def byte_level_tokenizer() -> Tokenizer:
    """GPT-2's kind: bytes mapped to printable letters, word starts carry Ġ."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
    tok.train_from_iterator(DOCS, trainer)
    return tok


def metaspace_tokenizer() -> Tokenizer:
    """KoGPT2's kind: whole characters merged inside words, word starts carry ▁, an <unk> for the rest."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(DOCS, trainers.BpeTrainer(vocab_size=110, special_tokens=KOGPT2_SPECIALS,
                                                      show_progress=False))  # fmt: skip
    return tok


TOKENIZERS = {"byte_level": byte_level_tokenizer, "metaspace": metaspace_tokenizer}


def eot_of(kind: str) -> tuple[str, int]:
    return ("<|endoftext|>", 0) if kind == "byte_level" else ("</s>", 1)


def save_hf_model(tok: Tokenizer, directory: Path, eot_id: int, activation="gelu_new", extra_rows=3, **config):
    """A random GPT2LMHeadModel saved with save_pretrained, tokenizer.json beside it; returns the model.

    Every weight is drawn large (LayerNorms and biases too), so a wrong name, transpose or GELU form shows;
    the embedding has a few rows more than the tokenizer has tokens, as real checkpoints often do.
    """
    import transformers

    torch.manual_seed(0)
    hf_config = transformers.GPT2Config(
        vocab_size=tok.get_vocab_size() + extra_rows, n_positions=N_POSITIONS, n_embd=32, n_layer=2, n_head=2,
        activation_function=activation, layer_norm_epsilon=1e-5, bos_token_id=0, eos_token_id=eot_id, **config,
    )  # fmt: skip
    hf = transformers.GPT2LMHeadModel(hf_config)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.3)
    hf.save_pretrained(directory)
    tok.save(str(directory / "tokenizer.json"))
    return hf.eval()


