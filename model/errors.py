"""The one exception type that means "the user's input is wrong", and an argument parser that raises it.

Command-line entry points catch `UserError`, print `error: <message>` on one line and exit with
code 2, so bad input never ends in a traceback. Anything else that escapes is a bug.
"""

import argparse
import sys


class UserError(Exception):
    """A problem with the user's input or files; the message says what is wrong and what to do."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad argument raises UserError (one line) instead of printing the usage and exiting."""

    def error(self, message):
        raise UserError(f"{message}; see {self.prog} --help")


def print_error(error: Exception | str) -> None:
    """`error: <message>` as one line on stderr, whatever the message holds: a byte that was not UTF-8
    (a lone surrogate from sys.argv) shows as \\xNN, a line break as \\n."""
    text = str(error)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no byte produced
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    print("error: " + text.replace("\r", "\\r").replace("\n", "\\n"), file=sys.stderr)
