"""How well a model predicts a text: token loss, perplexity, bits per character, characters per token.

    score = score_file(run, "article.txt")
    print(score.loss, score.perplexity, score.bits_per_char)

The text is NFC-normalised, encoded, and the end-of-text token put in front (documents start that way in
training), so every token of the text is predicted, the first one included. The windows over a text
longer than the context are those of `model.nll.stream_nll`, the function behind the run's final
`val_bpc` too, so scoring the validation text gives that figure.
"""

import math
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from cli.arguments import need_int, need_text, need_type
from cli.errors import UserError
from cli.messages import messages
from inference.runs import Run, need_run
from model.nll import bits_per_char, stream_nll
from storage.user_files import TEXT_BYTES, read_user_file


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
        return bits_per_char(self.total_nll, self.chars)

    @property
    def chars_per_token(self) -> float:
        return self.chars / self.tokens


def read_text(path: str | Path) -> str:
    """The NFC text of a UTF-8 file; UserError if it is missing, not UTF-8 or empty."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} is not a file; give the path of a UTF-8 text file to score")
    try:
        text = read_user_file(path, "the text", "give the path of a UTF-8 text file", TEXT_BYTES).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(f"{path} is not UTF-8 (bad byte at offset {e.start}); convert it, e.g. "
                        f"iconv -f cp949 -t utf-8 {path} > out.txt") from None
    if not text:
        raise UserError(f"{path} is empty; give a file with some text to score")
    return unicodedata.normalize("NFC", text)


def score_ids(model, ids: list[int], stride: int | None = None, progress: bool = False, desc: str = "scoring") -> float:
    """Summed NLL (nats) of ids[1:] given everything before them (`model.nll.stream_nll`'s windows); `desc`: the
    progress bar's label."""
    from tqdm import tqdm

    with tqdm(total=len(ids) - 1, unit="tok", desc=desc, disable=not progress) as bar:
        return stream_nll(model, ids, stride=stride, progress=bar.update)[0]


def score_text(run: Run, text: str, stride: int | None = None, progress: bool = False) -> Score:
    """Score a text (see the module docstring); UserError if it has no tokens."""
    need_run(run)
    text = unicodedata.normalize("NFC", need_text("text", text, "the text to score"))
    if stride is not None:
        need_int("stride", stride, what="or None")
    ids = run.encode_document(text)
    if len(ids) == (run.eot_id is not None):  # the end-of-text id alone, if any: the text itself has no tokens
        raise UserError("the text has no tokens to score; give some text")
    if len(ids) < 2:
        raise UserError("the text is a single token and the tokenizer has no end-of-text token to predict it from")
    total = score_ids(run.model, ids, stride=stride, progress=progress, desc=messages()("scoring"))
    return Score(chars=len(text), tokens=len(ids) - 1, total_nll=total)


def score_file(run: Run, path: str | Path, stride: int | None = None, progress: bool = True) -> Score:
    """Score a UTF-8 text file (NFC-normalised), with a progress bar on stderr."""
    need_run(run)
    need_type("path", path, (str, os.PathLike), "the path of a UTF-8 text file (a str or a Path)")
    return score_text(run, read_text(path), stride=stride, progress=progress)
