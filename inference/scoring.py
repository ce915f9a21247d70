"""How well a model predicts a text: token loss, perplexity, bits per character, characters per token.

    score = score_file(run, "article.txt")
    print(score.loss, score.perplexity, score.bits_per_char)

The text is NFC-normalised, encoded, and `<|endoftext|>` put in front (documents start that way in
training), so every token of the text is predicted, the first one included. A text longer than the
context is covered by windows of block_size tokens that advance by `stride`: every window after the
first predicts only its tokens that earlier windows did not, each with at least block_size - stride
tokens of context, so every token is predicted exactly once. The loss of each window is the model's
own `model(x, targets)` cross-entropy, with the tokens it does not predict set to -1 (ignored).
"""

import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.runs import Run
from model.errors import UserError


@dataclass
class Score:
    chars: int          # characters of the NFC text
    tokens: int         # tokens of the text, all predicted
    total_nll: float    # summed negative log-likelihood, nats

    @property
    def loss(self) -> float:
        """Mean cross-entropy per token, nats."""
        return self.total_nll / self.tokens

    @property
    def perplexity(self) -> float:
        return math.exp(self.loss)

    @property
    def bits_per_char(self) -> float:
        return self.total_nll / math.log(2) / self.chars

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens


def read_text(path: str | Path) -> str:
    """The NFC text of a UTF-8 file; UserError if it is missing, not UTF-8 or empty."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} is not a file; give the path of a UTF-8 text file to score")
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 (bad byte at offset {e.start}); convert it, e.g. "
                        f"iconv -f cp949 -t utf-8 {path} > out.txt") from None
    if not text:
        raise UserError(f"{path} is empty; give a file with some text to score")
    return unicodedata.normalize("NFC", text)


def windows(n_tokens: int, block_size: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Start of each window over a sequence of n_tokens, and the first target position it predicts.

    Window s reads tokens [s, s + T) and predicts targets at positions [s + 1, s + T], T =
    min(block_size, n_tokens - 1); it predicts only positions from `first[i]` on.
    """
    T = min(block_size, n_tokens - 1)
    starts = list(range(0, n_tokens - 1 - T, stride)) + [n_tokens - 1 - T]
    starts = torch.tensor(starts)
    first = torch.cat([torch.tensor([1]), starts[:-1] + T + 1])  # one past the previous window's last target
    return starts, first


@torch.inference_mode()
def score_ids(model, ids: list[int], stride: int | None = None, batch_windows: int | None = None,
              progress: bool = False) -> float:
    """Summed NLL (nats) of ids[1:] given everything before them, in windows (module docstring)."""
    from tqdm import tqdm

    block_size = model.config.block_size
    stride = stride or max(1, block_size // 2)
    if not 1 <= stride <= block_size:
        raise UserError(f"stride {stride} must be between 1 and block_size {block_size}")
    device = model.tok_emb.weight.device
    seq = torch.tensor(ids, dtype=torch.long, device=device)
    starts, first = windows(len(ids), block_size, stride)
    T = min(block_size, len(ids) - 1)
    batch_windows = batch_windows or max(1, 16384 // T)
    offsets = torch.arange(T)
    total = torch.zeros((), dtype=torch.float64, device=device)
    with tqdm(total=len(ids) - 1, unit="tok", desc="scoring", disable=not progress) as bar:
        for i in range(0, len(starts), batch_windows):
            s, f = starts[i : i + batch_windows], first[i : i + batch_windows]
            pos = (s[:, None] + offsets).to(device)                   # (W, T) input positions
            x, y = seq[pos], seq[pos + 1]                              # (W, T)
            y = y.masked_fill((pos + 1 < f[:, None].to(device)), -1)  # already predicted by an earlier window
            n = (y >= 0).sum()
            _, loss = model(x, targets=y)
            total += loss.double() * n
            bar.update(int(n))
    return float(total)


def score_text(run: Run, text: str, stride: int | None = None, progress: bool = False) -> Score:
    """Score a text (see the module docstring); UserError if it has no tokens."""
    text = unicodedata.normalize("NFC", text)
    ids = run.encode(text)
    if not ids:
        raise UserError("the text has no tokens to score; give some text")
    ids = ([run.eot_id] if run.eot_id is not None else []) + ids
    if len(ids) < 2:
        raise UserError("the text is a single token and the tokenizer has no <|endoftext|> to predict it from")
    total = score_ids(run.model, ids, stride=stride, progress=progress)
    return Score(chars=len(text), tokens=len(ids) - 1, total_nll=total)


def score_file(run: Run, path: str | Path, stride: int | None = None, progress: bool = True) -> Score:
    """Score a UTF-8 text file (NFC-normalised), with a progress bar on stderr."""
    return score_text(run, read_text(path), stride=stride, progress=progress)
