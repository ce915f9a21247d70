"""Printing on a terminal that cannot show everything: Korean on an ASCII or Latin-1 console, the word-start
mark ␣ on a Korean Windows console (cp949) whose output goes to a file.

    safe_console()      # first thing in every command (cli.command.run_command)

Python's own streams raise UnicodeEncodeError on the first character their encoding lacks, which would end
a training run at its first sample line (and every resume at the same line). After `safe_console()`, stdout
and stderr print such a character as "?" instead, and a note on stderr says once, at the start, how to get
UTF-8. Only the terminal's text changes: every file the commands write is UTF-8 whatever the terminal.
"""

import sys

# What the commands print that an encoding may lack: Hangul, and the marks of the token labels and tables
# (word start, line break, the walkthrough's symbols, the progress bar's blocks).
PRINTED = "가힣␣↵⏎…√Σ·×÷−∞→≥█▏"

TOLERANT = ("replace", "backslashreplace", "xmlcharrefreplace", "namereplace", "ignore")  # already never raise
NOTE = ("note: this terminal's encoding ({encoding}) cannot show some of the characters printed here (Korean "
        "text, or marks such as the word-start mark U+2423); they print as '?'. For UTF-8 set "
        "PYTHONIOENCODING=utf-8 (on Windows, also run chcp 65001 first).")


def shows_everything(stream) -> bool:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        PRINTED.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def safe_console() -> None:
    """Make stdout and stderr replace what their encoding cannot take, and say so once (module docstring).
    A stream that is not a text stream of Python's (a test's StringIO) is left as it is."""
    lacking = []
    for stream in (sys.stdout, sys.stderr):
        if stream is None or not hasattr(stream, "reconfigure") or shows_everything(stream):
            continue
        if stream.errors not in TOLERANT:  # "strict", or "surrogateescape" (a POSIX locale's): both raise
            stream.reconfigure(errors="replace")
            lacking.append(stream.encoding)
    if lacking and sys.stderr is not None:
        sys.stderr.write(NOTE.format(encoding=lacking[0]) + "\n")
