"""The one exception type that means "the user's input is wrong", and the check every text from outside needs.

Every package raises `UserError` (or a subclass) for bad input: a setting out of range, a missing or damaged
file, a prompt the model cannot take. The command-line entry points (cli/command.py) print its message as
one `error:` line and exit with its `exit_code`, so bad input never ends in a traceback; anything else
that escapes is a bug.

    check_utf8(prompt, "the prompt", "give UTF-8 text")   # UserError naming the first byte that was not UTF-8
"""

import re

# Python keeps a byte that was not UTF-8 (in sys.argv, in a file name, in stdin under a C locale) as a
# lone surrogate: not text, and no library here can encode it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class UserError(Exception):
    """A problem with the user's input or files; the message says what is wrong and what to do."""

    exit_code = 2
    own_rank = False  # under torchrun: a failure of this rank alone, which it says itself (else rank 0 speaks)

    def _render_traceback_(self) -> list[str]:
        """What IPython (Jupyter, Colab) shows for it: the one line, not a page of the library's internals."""
        return [f"{type(self).__name__}: {self}"]


class ModelConfigError(UserError, ValueError):
    """A model setting is out of range (caught as `UserError` by the CLIs, or as `ValueError`)."""


class ModelInputError(UserError, ValueError):
    """What the model was given does not fit it: a sequence longer than `block_size`, a bad sampling option."""


def check_utf8(text: str, what: str, fix: str) -> None:
    """UserError "`what` is not valid UTF-8 (byte 0xB4 at position 2); `fix`" if `text` holds a lone surrogate."""
    found = LONE_SURROGATE.search(text)
    if found:
        c = ord(found.group())
        what_char = f"byte 0x{c - 0xDC00:02X}" if 0xDC80 <= c <= 0xDCFF else f"U+{c:04X}"
        raise UserError(f"{what} is not valid UTF-8 ({what_char} at position {found.start()}); {fix}")
