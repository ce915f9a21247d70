"""The score view: how well the model predicts a whole text, and what switching heads off costs on it (--score).

    records = compute(run, article, ["score"], off="1.0")    # the text scored with head 1.0 off, and whole
    print(text(records["score"], "ko"))

Unlike the other views it reads the whole text, however long (inference/scoring.py's windows), not the context's
last block_size tokens; `full` is the same text's score with every head on, when heads were switched off.
"""

from cli.messages import messages
from common.heads_off import head_name
from inference.scoring import score_text


def record(run, text: str, off: dict, full: dict | None) -> dict:
    """The score of `text` as the model runs now (`off`: the heads switched off, {(layer, head): mode}), and `full`:
    the score with them on (`scored`), when any is off."""
    return {**scored(run, text), "off": [head_name(*h) for h in sorted(off)], "full": full}


def scored(run, text: str) -> dict:
    """chars, tokens, loss (nats a token), perplexity, bits per character, characters per token."""
    s = score_text(run, text, progress=True)
    return {"chars": s.chars, "tokens": s.tokens, "loss": s.loss, "perplexity": s.perplexity,
            "bits_per_char": s.bits_per_char, "chars_per_token": s.chars_per_token}


def text(record: dict, lang: str) -> str:
    """The loss, perplexity, bits per character and characters per token; beside the full model's with heads off."""
    say = messages(lang)
    lines = [say("score.lines", loss=f"{record['loss']:.4f}", ppl=f"{record['perplexity']:.4f}",
                 bpc=f"{record['bits_per_char']:.4f}", cpt=f"{record['chars_per_token']:.4f}")]
    if record["full"] is not None:
        full = record["full"]["bits_per_char"]
        lines.append(say("score.ablated", heads=", ".join(record["off"]), full=f"{full:.4f}",
                         diff=f"{record['bits_per_char'] - full:+.4f}"))
    return "\n".join(lines)
