"""Find and load a trained run: the model, its tokenizer, and the bytes each token stands for.

    run = load_run()                      # the most recent run under runs/
    run = load_run("runs/small")          # a run dir (best/, else last/) or a checkpoint dir
    run = load_run(speed=False)           # the textbook network alone, without the speed layer (model/speed/)
    run = load_run(weights="int8")        # a decoded token multiplies by int8 copies of the matrices (CPU)
    ids = run.encode_prompt("대한민국은")   # [end of text, ...], cropped to block_size
    ids = run.encode_document(text)       # [end of text, ...], whole

"Most recent" is the run whose `last/model.safetensors` has the newest modification time. The
tokenizer is the `tokenizer.json` saved beside the weights, so text is always encoded the way the
model was trained. Every problem with the files is a `UserError` with a one-line message.
"""

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from cli.arguments import need_type
from cli.errors import UserError, check_utf8
from cli.messages import messages
from common.heads_off import head_name
from data.token_bytes import token_bytes
from model import GPT
from model.device import resolve_device
from model.speed import speed_up
from storage.checkpoint import checkpoint_tokenizer, find_checkpoint, load_kept_off, load_model

TRAIN_HINT = "train one first: python train.py (or python train.py --config configs/tiny.toml, seconds on a CPU)"


def warn(message: str) -> None:
    """A one-line warning on stderr (the CLI's channel for things the user should know), in the terminal's language."""
    print(messages()("warning", text=message), file=sys.stderr, flush=True)


def find_latest_run(runs_dir: str | Path = "runs") -> Path:
    """The run dir under `runs_dir` whose last/model.safetensors is newest."""
    runs_dir = Path(runs_dir)
    runs = [d for d in runs_dir.iterdir() if (d / "last" / "model.safetensors").is_file()] if runs_dir.is_dir() else []
    if not runs:
        raise UserError(f"no trained run under {runs_dir}/; {TRAIN_HINT}, or pass --ckpt RUN_DIR")
    return max(runs, key=lambda d: (d / "last" / "model.safetensors").stat().st_mtime)


@dataclass
class Run:
    """A loaded checkpoint: the model in eval mode, its tokenizer and where it came from."""

    model: GPT
    tokenizer: object
    ckpt_dir: Path
    eot_id: int | None = None  # the token that starts every document (storage.checkpoint.end_of_text_id)
    kept_off: object = None  # the heads the run kept off from its first step (train.heads_off: common.heads_off.HeadsOff)
    memo: dict = field(default_factory=dict, repr=False)  # what is measured once per run: its held-out text, means
    _token_bytes: list[bytes] | None = field(default=None, repr=False)

    @property
    def device(self) -> torch.device:
        return self.model.tok_emb.weight.device

    @property
    def block_size(self) -> int:
        return self.model.config.block_size

    @property
    def token_bytes(self) -> list[bytes]:
        """The bytes each token id stands for (`data.token_bytes.token_bytes`: `<0xNN>` one byte, special
        tokens none, `▁` and byte-level letters read back as the tokenizer's decoder reads them)."""
        if self._token_bytes is None:
            self._token_bytes = token_bytes(self.tokenizer, self.model.config.vocab_size)
        return self._token_bytes

    def encode(self, text: str, what: str = "the text") -> list[int]:
        """Token ids of `text` (NFC-normalised by the tokenizer), no special tokens added; a literal
        "<|endoftext|>" is text (data.tokenizer.load_tokenizer)."""
        check_text(text, what)
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_document(self, text: str, what: str = "the text") -> list[int]:
        """The end-of-text id (when the tokenizer has one) + the text's ids: a document as training saw it,
        so its first token is predicted from something (data/prepare.py puts the id before each document)."""
        return ([self.eot_id] if self.eot_id is not None else []) + self.encode(text, what)

    def encode_prompt(self, prompt: str) -> list[int]:
        """The prompt as a document (`encode_document`), cropped to the last block_size tokens (with a
        warning) when longer than the context."""
        if prompt == "":
            raise UserError("the prompt is empty; give some text, e.g. --prompt \"대한민국은\"")
        return crop(self.encode_document(prompt, "the prompt"), self.block_size, "cut.prompt")


def need_run(run, name: str = "run") -> Run:
    """`run` if it is a Run, else one line naming the argument: what every function taking a run checks first."""
    return need_type(name, run, Run, "a Run (inference.load_run(\"runs/NAME\"))")


def check_text(text: str, what: str) -> None:
    """UserError for a lone surrogate: a byte that was not UTF-8, which Python keeps that way in sys.argv
    and in stdin under a C locale (cp949 bytes from a Korean Windows console, an encoded surrogate)."""
    check_utf8(text, what, "give UTF-8 text (convert cp949 with iconv -f cp949 -t utf-8)")


def crop(ids: list[int], block_size: int, what: str) -> list[int]:
    """The last block_size ids, with a warning when that drops some (`what`: the message key naming the text)."""
    if len(ids) > block_size:
        say = messages()
        warn(say("cut", what=say(what), n=len(ids), block=block_size))
        return ids[-block_size:]
    return ids


def load_run(path: str | Path | None = None, runs_dir: str | Path = "runs", device: str = "auto",
             speed: bool = True, weights: str = "fp32", quiet: bool = False) -> Run:
    """Load a run dir or checkpoint dir (default: the most recent run under `runs_dir`); `speed`: with the speed
    layer (model/speed/), else the textbook network alone; `weights`: the speed layer's decoding step's matrices
    (fp32, bf16 or int8: model/speed/decode_weights.py); `quiet`: no note on the heads the run kept off (the live
    training page loads every evaluation's weights). Its warnings are in the terminal's language (cli/messages.py)."""
    if path is not None:
        need_type("path", path, (str, os.PathLike), "a run's folder (a str or a Path), or None for the newest run")
    need_type("runs_dir", runs_dir, (str, os.PathLike), "a folder of runs (a str or a Path)")
    need_type("device", device, str, 'a str ("auto", "cpu", "cuda", "mps")')
    need_type("speed", speed, bool, "True (the speed layer) or False (the textbook network alone)")
    if weights != "fp32" and not speed:
        raise UserError(f"weights {weights} is a speed variant of decoding; leave it at fp32, or turn the speed "
                        "layer on")
    ckpt = find_checkpoint(find_latest_run(runs_dir) if path is None else path)
    model = load_model(ckpt, device=resolve_device(device, option="--device"))
    kept = load_kept_off(model, ckpt)  # train.heads_off: said once, as every number below is without them
    if speed:
        speed_up(model, weights)
    tokenizer, eot_id = checkpoint_tokenizer(ckpt, model.config.vocab_size)
    if kept is not None and not quiet:
        say = messages()
        print(say("note", text=say("note.kept_off", heads=", ".join(head_name(*h) for h in kept.heads),
                                   how=say("kept_off." + kept.mode))), file=sys.stderr)
    return Run(model, tokenizer, ckpt, eot_id, kept)
