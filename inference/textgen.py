"""Generate text that arrives character by character.

    for ids, pieces in stream_text(run, "대한민국은", max_new_tokens=100, seed=0):
        print(pieces[0], end="", flush=True)
    texts = generate_text(run, "대한민국은", num_samples=3, temperature=0.8)

A byte-fallback token can carry a single byte of a multi-byte character (a rare syllable becomes
three `<0xNN>` tokens), so each sample has an incremental UTF-8 decoder: a piece holds exactly the
characters completed by its token, never half of one (no U+FFFD while the character is unfinished). A jamo
tokenizer's tokens (data.unit = "jamo") hold 초성, 중성 and 종성, so the syllables are joined as its decoder
joins them, each once no later token can add to it (data.jamo.Composing).
"""

import codecs
from collections.abc import Iterator
from dataclasses import replace

import torch

from cli.arguments import need_int, need_token_ids, need_type
from cli.errors import ModelInputError
from data.jamo import Composing, splits_syllables
from inference.runs import Run, need_run
from model.sampling import Sampling, stream

PROMPT = "a str (the text to continue) or a list of token ids (run.encode_prompt(text))"
MAX_SAMPLES = 4096  # rows decoded together; more is no batch anyone reads, and a list per sample is built first


class Utf8Stream:
    """Token ids in, completed characters out (with `jamo`: completed syllables)."""

    def __init__(self, token_bytes: list[bytes], jamo: bool = False):
        self.token_bytes = token_bytes
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.syllables = Composing() if jamo else None

    def push(self, token_id: int) -> str:
        """The characters this token completes ("" while a character is still unfinished)."""
        text = self.decoder.decode(self.token_bytes[token_id])
        return self.syllables.push(text) if self.syllables else text

    def flush(self) -> str:
        """Whatever is left at the end: U+FFFD for bytes that never formed a character."""
        text = self.decoder.decode(b"", final=True)
        return self.syllables.push(text, final=True) if self.syllables else text


def check_batch(max_new_tokens: int, num_samples: int) -> tuple[int, int]:
    """Both as ints (numpy's too); a UserError for a number of tokens or samples no decoding takes."""
    max_new_tokens = need_int("max_new_tokens", max_new_tokens, lo=0)
    num_samples = need_int("num_samples", num_samples)
    if num_samples < 1:
        raise ModelInputError(f"num_samples {num_samples} must be >= 1")
    if num_samples > MAX_SAMPLES:
        raise ModelInputError(f"num_samples {num_samples} is more than {MAX_SAMPLES}; decode the samples in several runs")
    return max_new_tokens, num_samples


def stream_text(run: Run, prompt: str | list[int], max_new_tokens: int = 200, num_samples: int = 1,
                sampling: Sampling | None = None, attention: list | None = None, stop_at_eot: bool = True,
                **options) -> Iterator[tuple[list[int], list[str]]]:
    """Continue `prompt` (text, or ids from `run.encode_prompt`) in `num_samples` rows decoded as a batch.

    Yields `(ids, pieces)` per step: the new token id and the completed text of each sample; after
    the last step once more `([], pieces)` with what the decoders still held. `sampling`, or its fields as
    keywords (model.sampling.Sampling; temperature model.sampling.TEMPERATURE unless given, 0 = greedy): the same seed gives
    the same text. Bytes that never form a character (a model can sample a lone byte token) print as U+FFFD.
    `attention`: a list that receives the attention maps of every forward of the decoding
    (`model.sampling.stream_with_logits`). Everything is checked now, before the first token is decoded.
    """
    need_run(run)
    if not isinstance(prompt, str):  # anything else must be token ids: an int 123 is no prompt (nor one token)
        prompt = need_token_ids("prompt", prompt, what=PROMPT)  # their range: the model's own check_decoding
    max_new_tokens, num_samples = check_batch(max_new_tokens, num_samples)
    sampling = Sampling(**options) if sampling is None else need_type("sampling", sampling, Sampling, "a Sampling, or None")
    sampling = replace(sampling, eos_token_id=run.eot_id if stop_at_eot else None)
    ids = run.encode_prompt(prompt) if isinstance(prompt, str) else prompt
    idx = torch.tensor([ids], dtype=torch.long, device=run.device).expand(num_samples, -1)  # (B, T), one row stored
    columns = stream(run.model, idx, max_new_tokens, sampling, attention=attention)
    jamo = splits_syllables(run.tokenizer)
    return pieces_of(columns, [Utf8Stream(run.token_bytes, jamo) for _ in range(num_samples)])


def pieces_of(columns, decoders: list[Utf8Stream]) -> Iterator[tuple[list[int], list[str]]]:
    for column in columns:
        step = column.tolist()                                                      # (B,)
        yield step, [d.push(i) for d, i in zip(decoders, step)]
    yield [], [d.flush() for d in decoders]


def generate_text(run: Run, prompt: str, max_new_tokens: int = 200, num_samples: int = 1, **options) -> list[str]:
    """The generated continuation of `prompt` (without the prompt), one string per sample."""
    steps = stream_text(run, prompt, max_new_tokens, num_samples, **options)  # checks them all, num_samples too
    texts = [""] * num_samples
    for _, pieces in steps:
        texts = [t + p for t, p in zip(texts, pieces)]
    return texts
