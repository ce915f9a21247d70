"""The words view: Korean words (어절) as units, tokens grouped by the spaces of the text, attention read word by word.

    records = compute(run, text, ["words"], Settings(head=(1, 0)))
    records["words"]["spans"]    # [[0], [1, 2], [3, 4, 5], ...]: the tokens of each word
    records["words"]["att"]      # (L, H, W, W): every head's map by word
    print(text(records["words"], "ko"))   # where each query word of settings.head looks, by word

A word is a token that starts with a whitespace character (a space, a newline, a tab, U+3000: str.isspace; its
label starts with ␣, ↵, ⇥ or the character's bytes) and the tokens after it up to the next such token; the first token of the text begins the first word, and the <|endoftext|> every
document begins with is a word of its own. Punctuation written against a word belongs to it, as in an 어절.

The word-level map of a head: for a query word Q and a key word K, the attention of Q's tokens on K's tokens,
summed over K's tokens (the share of attention the word gets) and averaged over Q's tokens (each query token
counts once). Each row then sums to 1, as a token's does; the keys after a query token carry 0, as ever.

Three role scores read the word structure (inspection/views/roles.py measures them beside its five), each leaving the
previous token to the previous-token role (its keys are at least two tokens back, as duplicate-token leaves the
previous and first tokens to theirs), so a previous-token head is not named by the words its previous tokens fall
in: for every query token that is not the first of its word, the attention on the earlier tokens of the same word
("same-word") and on the first token of its word ("word-start"); for every token of the third word on, the
attention on the tokens of the word before ("previous-word"; the first word is left out, as its first token is
where heads park attention they have no use for). A query counts where its role has a key.
"""

import re

import numpy as np
import torch

from cli.messages import messages
from inspection.labels import VISIBLE, bytes_label, display_width, pad
from cli.arguments import ArgumentTypeError, ArgumentValueError, kind, need_labels, need_maps, need_token_ids, need_type

MARKED = {symbol: ch for ch, symbol in VISIBLE.items()}  # "␣" -> " ": a label's markers read back
LABEL_PIECE = re.compile(r"<0x([0-9A-F]{2})>|<U\+(10[0-9A-F]{4}|0?[0-9A-F]{4,5})>|(.)", re.S)  # a byte, a code point, a character


def begins_with_space(data: bytes) -> bool:
    """Whether `data` begins with a whole whitespace character (str.isspace: a space, a tab, a newline, U+3000, ...);
    a byte inside a character begins none."""
    for n in range(1, 5):
        try:
            return data[:n].decode("utf-8").isspace()
        except UnicodeDecodeError:
            continue
    return False


def word_start_ids(token_bytes: list[bytes]) -> np.ndarray:
    """(V,) bool: the token ids whose bytes begin with a whitespace character, the tokens that begin a word."""
    return np.array([begins_with_space(b) for b in token_bytes], dtype=bool)


def is_special(label: str) -> bool:
    return label.startswith("<|") and label.endswith("|>")


def label_bytes(label: str) -> bytes:
    """The bytes a token's label stands for (inspection/labels.py read back): "<0xEC>" the byte, "<U+3000>" and "␣"
    their character, any other character itself."""
    out = bytearray()
    for byte, code, ch in LABEL_PIECE.findall(label):
        if byte:
            out.append(int(byte, 16))
        else:
            out += (chr(int(code, 16)) if code else MARKED.get(ch, ch)).encode("utf-8", "surrogatepass")
    return bytes(out)


def word_starts_of(labels: list[str]) -> np.ndarray:
    """(T,) bool: whether each token begins a word: the first token, a token that begins with a whitespace character
    of the text (its bytes read back from the labels, so a space in byte pieces counts too), and a special token
    (<|endoftext|>) and the token after it, which are words of their own."""
    special = np.array([is_special(label) for label in labels], dtype=bool)
    pieces = [b"" if is_special(label) else label_bytes(label) for label in labels]
    text, starts = b"".join(pieces), np.zeros(len(labels), dtype=bool)
    at = 0
    for t, piece in enumerate(pieces):
        starts[t] = bool(piece) and begins_with_space(text[at : at + 4])
        at += len(piece)
    starts |= special
    starts[1:] |= special[:-1]
    if len(starts):
        starts[0] = True
    return starts


def word_spans(labels: list[str]) -> list[list[int]]:
    """The tokens of each word, in order (the module docstring's rule); `labels`: maps.labels, one str per token."""
    need_type("labels", labels, (list, tuple), "a list of strs, one label per token (maps.labels)")
    labels = need_labels("labels", labels, len(labels))
    ids = np.cumsum(word_starts_of(labels)) - 1  # (T,): the word of each token
    return [np.flatnonzero(ids == w).tolist() for w in range(int(ids[-1]) + 1)] if len(ids) else []


def word_maps(att: np.ndarray, words: list[list[int]]) -> np.ndarray:
    """att (..., T, T) -> (..., W, W): summed over each key word's tokens, averaged over each query word's tokens."""
    att = need_maps("att", att, dims=None)
    T = att.shape[-1]
    said = f"a list of words, each a non-empty list of token positions 0..{T - 1} (word_spans(maps.labels))"
    need_type("words", words, (list, tuple), said)
    for tokens in words:
        if not isinstance(tokens, (list, tuple)) or not tokens:
            raise ArgumentTypeError(f"words must be {said}, got a {kind(tokens)} {tokens!r} in it")
        need_token_ids("words", tokens, T, said)
    member = np.zeros((len(words), T))  # (W, T): 1 where token t belongs to word w
    for w, tokens in enumerate(words):
        member[w, tokens] = 1.0
    if (member.sum(0) > 1).any():  # a token in two words would count its attention twice: a row summing to 2
        raise ArgumentValueError(f"words must be {said}, each token in one word at most; token "
                                 f"{int(np.flatnonzero(member.sum(0) > 1)[0])} is in two")
    summed = np.asarray(att, dtype=np.float64) @ member.T  # (..., T, W): each query token's mass on each word
    return np.einsum("wt,...tk->...wk", member / member.sum(1, keepdims=True), summed)  # mean over query tokens


def word_key_sets(starts: torch.Tensor) -> dict[str, torch.Tensor]:
    """starts (B, T) bool -> role: (B, T, T) bool, the keys each query token's role looks at (none for the queries
    that do not count: a word's first token for the first two roles, the first two words for previous-word)."""
    B, T = starts.shape
    word = starts.long().cumsum(-1)  # (B, T): 1-based word number of each token
    same = word[:, :, None] == word[:, None, :]  # (B, query, key)
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-2)  # key < query - 1: the previous token is its own role
    inner = (~starts)[:, :, None]  # queries that are not the first token of their word
    first = same & starts[:, None, :]
    previous = word[:, None, :] == word[:, :, None] - 1
    # the word before the query's, unless that is the first word, whose first token is the attention sink
    return {"same-word": inner & same & earlier, "word-start": inner & first & earlier,
            "previous-word": previous & earlier & (word[:, :, None] > 2)}


def word_role_sums(maps: torch.Tensor, starts: torch.Tensor) -> dict[str, tuple[torch.Tensor, int]]:
    """maps (B, L, H, T, T), starts (B, T) -> role: (summed mass (L, H), number of queries that count)."""
    sums = {}
    for role, keys in word_key_sets(starts).items():
        counts = keys.any(-1)  # (B, T): queries with a key of this role
        mass = (maps.double() * keys[:, None, None]).sum(-1)  # (B, L, H, T)
        sums[role] = ((mass * counts[:, None, None]).sum((0, 3)), int(counts.sum()))
    return sums


def word_labels(labels: list[str], words: list[list[int]], pieces: list[bytes] | None = None) -> list[str]:
    """Each word's label: its tokens' bytes (`pieces`, each token's; else read back from its label) decoded together
    and made visible (`bytes_label`), so a syllable that fell back to byte pieces or was cut between jamo tokens reads
    whole ("␣서<0xEC><0x9A><0xB8>이다" -> "␣서울이다"); a special token's label as it is."""
    pieces = pieces or [label_bytes(label) for label in labels]
    return ["".join(labels[t] for t in tokens) if any(is_special(labels[t]) for t in tokens)
            else bytes_label(b"".join(pieces[t] for t in tokens)) for tokens in words]


def even_spread(words: list[list[int]]) -> np.ndarray:
    """(W, W): the word-level map of attention spread evenly over the keys each query token sees (1 / (q + 1) on
    each of keys 0..q), the value a word would get for its tokens alone."""
    T = sum(len(tokens) for tokens in words)
    even = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # (T, T)
    return word_maps(even, words)


def record(look, settings) -> dict:
    """The text's words ("spans", their labels "words", how many tokens each has, "tokens"), every head's map by word
    ("att") and the even spread's ("even", `even_spread`); with settings.head where each query word of that head
    looks ("head"), with settings.explain the query token's attention summed per word ("sums", the walkthrough's
    keys by word) beside the even spread's over its keys 0..query ("sums_even")."""
    spans = word_spans(look.labels)
    pieces = [look.run.token_bytes[i] for i in look.ids]  # the text's bytes, whatever its tokens' labels show
    found = {"spans": spans, "words": word_labels(list(look.labels), spans, pieces), "att": word_maps(look.att, spans),
             "tokens": [len(tokens) for tokens in spans], "even": even_spread(spans), "query": look.query,
             "head": None if settings.head is None else list(settings.head), "sums": None, "sums_even": None}
    if settings.explain is not None:
        row, q = look.att[settings.explain[0], settings.explain[1], look.query], look.query
        found["sums"] = [float(row[tokens].sum()) for tokens in spans]
        found["sums_even"] = [sum(t <= q for t in tokens) / (q + 1) for tokens in spans]
    return found


def text(record: dict, lang: str, k: int = 3) -> str:
    """Where each query word of record["head"] looks (its `k` words it attends to most), and the walkthrough's
    query summed per word: each word with its tokens and its value under an even spread beside the measured one."""
    say, lines, names, n = messages(lang), [], record["words"], record["tokens"]
    if record["head"] is not None:
        layer, head = record["head"]
        by_word, even = record["att"][layer, head], record["even"]
        width = max(display_width(name) for name in names)
        lines.append(say("words.top", layer=layer, head=head))
        for q, name in enumerate(names):
            top = np.argsort(-by_word[q, : q + 1], kind="stable")[:k]
            targets = "  ".join(say("words.value", word=f"{names[j]}({j})", value=f"{by_word[q, j]:.3f}", n=n[j],
                                    even=f"{even[q, j]:.3f}") for j in top)
            lines.append(f"{q:>4} {pad(name, width)} -> {targets}")
    if record["sums"] is not None:
        parts = [say("words.value", word=name, value=f"{x:.4f}", n=count, even=f"{even:.4f}")
                 for name, x, count, even, tokens in zip(names, record["sums"], n, record["sums_even"], record["spans"])
                 if min(tokens) <= record["query"]]
        lines.append(say("words.sums", sums=", ".join(parts)))
    return "\n".join(lines)
