"""The deterministic train/validation split of one source's chunk stream.

Several documents: whole documents from the end of the list until `val_fraction` of the characters is held
out (for the built-in corpus that is the last bill). One document: its tail, cut just after a line break
near the nominal point. `plan_split` counts once; `split_chunks` replays the same cut on every pass.
"""

from array import array
from dataclasses import dataclass
from typing import Iterable, Iterator

from data.config import DataError

Chunks = Iterator[tuple[bool, str]]


@dataclass
class Plan:
    documents: int
    chars: int
    first_val_doc: int  # index of the first held-out document (several documents)
    tail_chars: int  # nominal length of the held-out tail (one document)
    val_chars: int  # characters held out (before the tail's cut moves to a line break)


def plan_split(chunks: Iterable[tuple[bool, str]], val_fraction: float, name: str) -> Plan:
    """Count a source's documents and characters and decide where validation starts."""
    doc_chars, has_text = array("q"), False
    for first, text in chunks:
        if first:
            doc_chars.append(0)
        doc_chars[-1] += len(text)
        has_text = has_text or (text != "" and not text.isspace())
    total = sum(doc_chars)
    if not has_text:
        raise DataError(f"{name} has no text, only empty or blank documents; point data.source at a corpus")
    first_val, held = len(doc_chars), 0
    while first_val > 1 and held < val_fraction * total:
        first_val -= 1
        held += doc_chars[first_val]
    tail = max(1, round(val_fraction * total))
    return Plan(len(doc_chars), total, first_val, tail, held if len(doc_chars) > 1 else tail)


def split_chunks(chunks: Iterable[tuple[bool, str]], plan: Plan, part: str) -> Chunks:
    """The chunks of `part` ("train" or "val"); a held-out tail starts a document of its own."""
    want_val = part == "val"
    if plan.documents > 1:
        doc = -1
        for first, text in chunks:
            doc += first
            if (doc >= plan.first_val_doc) == want_val:
                yield first, text
        return
    cut, pos = plan.chars - plan.tail_chars, 0
    for first, text in chunks:
        start, pos = pos, pos + len(text)
        if pos <= cut or start >= cut:
            if (start >= cut) == want_val:
                yield first or start == cut, text
            continue
        local = cut - start
        # Prefer a line break, if one lies within a quarter of the tail's length before the cut.
        local = text.rfind("\n", max(0, local - plan.tail_chars // 4), local) + 1 or local
        yield (True, text[local:]) if want_val else (first, text[:local])
