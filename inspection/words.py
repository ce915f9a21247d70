"""Korean words (어절) as units: tokens grouped by the spaces of the text, and attention read word by word.

    words = word_spans(labels)                 # [[0], [1, 2], [3, 4, 5], ...]: the tokens of each word
    att_words = word_maps(maps.att, words)     # (L, H, W, W)

A word is a token that starts with a space or a newline (its label starts with ␣ or ↵) and the tokens after it
up to the next such token; the first token of the text begins the first word, and the <|endoftext|> every
document begins with is a word of its own. Punctuation written against a word belongs to it, as in an 어절.

The word-level map of a head: for a query word Q and a key word K, the attention of Q's tokens on K's tokens,
summed over K's tokens (the share of attention the word gets) and averaged over Q's tokens (each query token
counts once). Each row then sums to 1, as a token's does; the keys after a query token carry 0, as ever. A sum
grows with the word's tokens: attention spread evenly over the keys a query token sees gives a word of 4 tokens
4 times what it gives a word of 1. So the texts show each word's tokens and its value under that even spread
(`even_spread`) beside the measured one.

Three role scores read the word structure (inspection/heads.py measures them beside its five), each leaving the
previous token to the previous-token role (its keys are at least two tokens back, as duplicate-token leaves the
previous and first tokens to theirs), so a previous-token head is not named by the words its previous tokens fall
in: for every query token that is not the first of its word, the attention on the earlier tokens of the same word
("same-word") and on the first token of its word ("word-start"); for every token of the third word on, the
attention on the tokens of the word before ("previous-word"; the first word is left out, as its first token is
where heads park attention they have no use for). A query counts where its role has a key.
"""

import numpy as np
import torch

from cli.messages import messages
from inspection.labels import display_width, pad
from model.arguments import ArgumentTypeError, kind, need_maps, need_token_ids, need_type

WORD_START = ("␣", "↵")  # a label that starts a word (inspection/labels.py marks a leading space and newline so)


def word_start_ids(token_bytes: list[bytes]) -> np.ndarray:
    """(V,) bool: the token ids whose bytes begin with a space or a newline, the tokens that begin a word."""
    return np.array([b[:1] in (b" ", b"\n") for b in token_bytes], dtype=bool)


def word_starts_of(labels: list[str]) -> np.ndarray:
    """(T,) bool: whether each token begins a word: the first token, a token after a space or newline, and a special
    token (<|endoftext|>) and the token after it, which are words of their own."""
    special = np.array([label.startswith("<|") and label.endswith("|>") for label in labels], dtype=bool)
    starts = np.array([label.startswith(WORD_START) for label in labels], dtype=bool) | special
    starts[1:] |= special[:-1]
    if len(starts):
        starts[0] = True
    return starts


def word_spans(labels: list[str]) -> list[list[int]]:
    """The tokens of each word, in order (the module docstring's rule)."""
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


def word_labels(labels: list[str], words: list[list[int]]) -> list[str]:
    """Each word's label: its tokens' labels joined."""
    return ["".join(labels[t] for t in tokens) for tokens in words]


def even_spread(words: list[list[int]]) -> np.ndarray:
    """(W, W): the word-level map of attention spread evenly over the keys each query token sees (1 / (q + 1) on
    each of keys 0..q), the value a word would get for its tokens alone."""
    T = sum(len(tokens) for tokens in words)
    even = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # (T, T)
    return word_maps(even, words)


def format_word_top(att: np.ndarray, labels: list[str], words: list[list[int]], layer: int, head: int,
                    lang: str = "en", k: int = 3) -> str:
    """One head's map `att` (T, T) by word in `lang`: for each query word the `k` words it attends to most, each
    with its tokens and its value under an even spread (the --words --head table)."""
    say, names = messages(lang), word_labels(labels, words)
    by_word, even = word_maps(att, words), even_spread(words)
    width = max(display_width(name) for name in names)
    lines = [say("words.top", layer=layer, head=head)]
    for q, name in enumerate(names):
        top = np.argsort(-by_word[q, : q + 1], kind="stable")[:k]
        targets = "  ".join(say("words.value", word=f"{names[j]}({j})", value=f"{by_word[q, j]:.3f}",
                                n=len(words[j]), even=f"{even[q, j]:.3f}") for j in top)
        lines.append(f"{q:>4} {pad(name, width)} -> {targets}")
    return "\n".join(lines)


def format_word_sums(row: np.ndarray, query: int, labels: list[str], words: list[list[int]],
                     lang: str = "en") -> str:
    """Query token `query`'s attention `row` (T,) summed per word, as a line in `lang` (the walkthrough's keys by
    word), each word with its tokens and its value under an even spread over the query's keys 0..query."""
    say = messages(lang)
    parts = [say("words.value", word=name, value=f"{row[tokens].sum():.4f}", n=len(tokens),
                 even=f"{sum(t <= query for t in tokens) / (query + 1):.4f}")
             for name, tokens in zip(word_labels(labels, words), words) if min(tokens) <= query]
    return say("words.sums", sums=", ".join(parts))
