"""The page's tour: cards in the order the explainers teach self-attention, each pointing at the part of the page it
explains, saying this run's own numbers there (inspection/page/tour.js reads them from the page's records), and
showing the line of model/ that computes the step, read from the source when the page is written, so it cannot
drift from the code.

    cards = tour_cards()    # [{"key": "tokens", "target": "#tokens", "file": "model/gpt.py", "line": 95, "code": ...}]

A card's texts are cli/messages.py's "tour.KEY" (title) and "tour.KEY_text" (what it says, with the run's numbers).
"""

from pathlib import Path

from cli.errors import UserError

ROOT = Path(__file__).resolve().parents[1]

# key, the page element it points at (the first of these that the page shows), the file of its code line and a
# piece of that line (None: a card with no line of its own)
CARDS = (
    ("tokens", "#tokens", "model/gpt.py", "self.tok_emb(idx) + self.pos_emb.weight"),
    ("embedding", "#path-section, #tokens", "model/gpt.py", "self.tok_emb(idx) + self.pos_emb.weight"),
    ("qkv", "#explain, #maps", "model/attention.py", "qkv = self.c_attn(x)"),
    ("scores", "#explain, #maps", "model/attention.py", "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"),
    ("scale", "#explain, #maps", "model/attention.py", "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"),
    ("mask", "#maps", "model/attention.py", 'return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)'),
    ("softmax", "#maps", "model/attention.py", 'return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)'),
    ("values", "#lines, #explain", "model/attention.py", "y = self.attn_dropout(att) @ v"),
    ("heads", "#overview-section", "model/attention.py", "view(B, T, 3, self.n_head, C // self.n_head)"),
    ("residual", "#path-section, #maps", "model/gpt.py", "x = x + y"),
    ("next", "#sampling, #next-box", "model/sampling.py", "logits = (logits - top) / temperature"),
    ("cache", "#stepper, #kv-section, #maps", "model/kv_cache.py", "k_all.narrow(2, self.pos, T).copy_(k)"),
    ("cost", "#maps", "model/attention.py", "scores = attention_scores(q, k)  # (B, nh, Tq, Tk)"),
    ("test", "#roles-box, #overview-section", None, None),
)


def code_line(file: str, piece: str) -> tuple[int, str]:
    """(line number, the line) of the first line of `file` (under the project root) that holds `piece`."""
    for number, line in enumerate((ROOT / file).read_text(encoding="utf-8").splitlines(), 1):
        if piece in line:
            return number, line.strip()
    raise UserError(f"{file} has no line with {piece!r}; the tour's card must name a line that computes its step")


def tour_cards() -> list[dict]:
    """Every card of the tour, in order, with its code line read now."""
    cards = []
    for key, target, file, piece in CARDS:
        number, code = code_line(file, piece) if file else (None, None)
        cards.append({"key": key, "target": target, "file": file, "line": number, "code": code})
    return cards
