"""The checks a public function (the notebook API: generate_text, head_stats, nb.page, ...) makes on its arguments
where they enter, so a bad one is one line naming it and what it takes, never an error from deep inside:

    max_new_tokens = need_int("max_new_tokens", max_new_tokens, lo=0)   # "max_new_tokens must be an int >= 0, got str"
    att = need_maps("att", att)                                          # numpy (L, H, T, T), or one line naming att

A wrong type raises `ArgumentTypeError` (a UserError and a TypeError), a value out of range, of the wrong shape or
not one of the choices `ArgumentValueError` (a ModelInputError: a UserError and a ValueError), so `except
TypeError`/`except ValueError` keep catching what they caught before. Each check runs once, at entry, never per
token.
"""

import math
import numbers

import numpy as np

from cli.errors import ModelInputError, UserError


class ArgumentTypeError(UserError, TypeError):
    """An argument of the wrong type: None, a str where a number goes, a list where a text goes."""


class ArgumentValueError(ModelInputError):
    """An argument of the right type but out of range, of the wrong shape, or not one of its choices."""


def kind(value) -> str:
    """What the message says was given: the type's name ("NoneType", "str", "list")."""
    return type(value).__name__


def need_type(name: str, value, types, what: str):
    """`value` if it is one of `types`, else ArgumentTypeError "`name` must be `what`, got TYPE"."""
    if not isinstance(value, types):
        raise ArgumentTypeError(f"{name} must be {what}, got {kind(value)}")
    return value


def need_text(name: str, value, what: str = "the text") -> str:
    """`value` if it is a str: "prompt must be a str (the text to continue), got int"."""
    return need_type(name, value, str, f"a str ({what})")


def bounds(lo, hi) -> str:
    """" >= 0", " between 1 and 4096" or "" for the message."""
    if lo is not None and hi is not None:
        return f" between {lo} and {hi}"
    return f" >= {lo}" if lo is not None else f" <= {hi}" if hi is not None else ""


def need_int(name: str, value, lo: int | None = None, hi: int | None = None, what: str = "") -> int:
    """`value` as an int (numpy's integers too, never a bool) within [lo, hi]; `what` says what it counts."""
    said = f"an int{bounds(lo, hi)}{f' ({what})' if what else ''}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name} must be {said}, got {kind(value)}")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ArgumentValueError(f"{name} must be {said}, got {value}")
    return value


def need_real(name: str, value, said: str = "a number"):
    """`value` if it is a real number (an int or a float, numpy's too, never a bool); its range is the caller's. An
    int too large for a float (10**400) is taken as inf, which a range check then refuses in its own words."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be {said}, got {kind(value)}")
    if isinstance(value, numbers.Integral) and abs(value) > 2**1023:  # math and torch would raise OverflowError
        return math.inf if value > 0 else -math.inf
    return value


def need_choice(name: str, value, choices):
    """`value` if it is one of `choices`: "mode must be one of 'mean', 'zero', got 'half'"."""
    if isinstance(value, (list, dict, set)) or value not in choices:  # unhashable values are no choice either
        raise ArgumentValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def need_token_ids(name: str, value, vocab_size: int | None = None, what: str = ""):
    """`value` as a non-empty list of token ids (ints in [0, vocab_size)): what run.encode_prompt gives (a 1-D
    integer array or tensor is checked as one, by its dtype and shape, and returned as a list of ints); `what`: what
    the message says it takes."""
    said = what or "a non-empty list of token ids (ints, e.g. run.encode_prompt(text))"
    in_range = "" if vocab_size is None or f"0..{vocab_size - 1}" in said else f" in 0..{vocab_size - 1}"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or not hasattr(value, "__iter__"):
        raise ArgumentTypeError(f"{name} must be {said}, got {kind(value)}")
    if hasattr(value, "dtype"):  # an array or a tensor: its dtype and shape say it, not a loop over every id
        ids = np.asarray(value.cpu() if hasattr(value, "cpu") else value)
        if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
            raise ArgumentTypeError(f"{name} must be {said}, got {kind(value)} of {ids.dtype} {tuple(ids.shape)}")
        if ids.size == 0 or (vocab_size is not None and not (0 <= ids.min() and ids.max() < vocab_size)):
            got = "an empty one" if ids.size == 0 else f"{ids.min()}..{ids.max()}"
            raise ArgumentValueError(f"{name} must be {said}{in_range}, got {got}")
        return ids.tolist()
    ids = list(value)
    if not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in ids):
        bad = next(i for i in ids if not isinstance(i, numbers.Integral) or isinstance(i, bool))
        raise ArgumentTypeError(f"{name} must be {said}, got a {kind(bad)} in it")
    if not ids:
        raise ArgumentValueError(f"{name} must be {said}, got an empty one")
    if vocab_size is not None and not all(0 <= i < vocab_size for i in ids):
        raise ArgumentValueError(f"{name} must be {said}{in_range}, got {next(i for i in ids if not 0 <= i < vocab_size)}")
    return [int(i) for i in ids]


def need_maps(name: str, att, dims: int | None = 4) -> np.ndarray:
    """`att` as a float numpy array of `dims` dimensions whose last two are equal (T, T): (L, H, T, T) maps, one
    head's (T, T) with dims=2, any (..., T, T) with None. A tensor is read as its numbers; NaN stays NaN."""
    shape = {4: "(layers, heads, T, T)", 2: "(T, T)", None: "(..., T, T)"}[dims]
    said = f"one head's attention map of shape {shape}" if dims == 2 else f"attention maps of shape {shape}"
    if att is None or isinstance(att, (str, bytes, dict)):
        raise ArgumentTypeError(f"{name} must be {said} (a numpy array or a tensor), got {kind(att)}")
    try:
        w = np.asarray(att.detach().cpu() if hasattr(att, "detach") else att, dtype=np.float64)
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{name} must be {said} (a numpy array or a tensor of numbers), got {kind(att)}") from None
    if (w.ndim != dims if dims else w.ndim < 2) or w.shape[-1] != w.shape[-2] or w.shape[-1] == 0:
        raise ArgumentValueError(f"{name} must be {said}, got shape {tuple(w.shape)}")
    if np.isinf(w).any():  # weights are probabilities; inf would make an entropy of -inf (NaN stays: see the doc)
        raise ArgumentValueError(f"{name} must be {said} holding probabilities (0..1), got an inf in it")
    return w


def need_labels(name: str, labels, T: int) -> list[str]:
    """`labels` if it is a list of T strs, one per token of the maps (maps.labels)."""
    said = f"a list of {T} strs, one label per token of the maps (maps.labels)"
    if isinstance(labels, (str, bytes)) or not isinstance(labels, (list, tuple)):
        raise ArgumentTypeError(f"{name} must be {said}, got {kind(labels)}")
    if not all(isinstance(label, str) for label in labels):
        raise ArgumentTypeError(f"{name} must be {said}, got a {kind(next(x for x in labels if not isinstance(x, str)))} in it")
    if len(labels) != T:
        raise ArgumentValueError(f"{name} must be {said}, got {len(labels)} of them")
    return list(labels)
