"""The one exception type that means "the user's input is wrong".

Command-line entry points catch `UserError`, print `error: <message>` on one line and exit with
code 2, so bad input never ends in a traceback. Anything else that escapes is a bug.
"""


class UserError(Exception):
    """A problem with the user's input or files; the message says what is wrong and what to do."""
