"""The one exception type that means "the user's input is wrong".

Every package raises `UserError` (or a subclass) for bad input: a setting out of range, a missing or damaged
file, a prompt the model cannot take. The command-line entry points (cli/command.py) print its message as
one `error:` line and exit with its `exit_code`, so bad input never ends in a traceback; anything else
that escapes is a bug.
"""


class UserError(Exception):
    """A problem with the user's input or files; the message says what is wrong and what to do."""

    exit_code = 2
