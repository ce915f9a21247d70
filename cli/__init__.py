"""What every command line of the project shares: cli/command.py (the parser, the error line, the exit codes),
cli/messages.py (every text they print, in English and Korean), and here the first lines of every entry point,
run before torch loads (a second or more):

    if __name__ == "__main__":   # at the top of train.py, generate.py and the `python -m` commands
        from cli import stop_quietly_while_loading

        stop_quietly_while_loading()

Until the command starts, Ctrl-C or SIGTERM then ends the process with one line instead of a traceback from
deep inside an import; nothing has been written yet, so it simply exits (128 + the signal's number).
cli.command.run_command puts its own handlers in place as soon as the command starts. This file imports
nothing of the project, so it loads in an instant.
"""

import os
import signal


def says_errors() -> bool:
    """Whether this process prints its error line: under torchrun rank 0 alone (RANK), since every rank meets
    the same input and torchrun stops the others when one fails; else always."""
    return os.environ.get("RANK", "0") == "0"


def exit_now(signum, frame) -> None:
    name = signal.Signals(signum).name
    if says_errors():
        os.write(2, f"\nerror: {name} while starting; nothing was done (run the command again)\n".encode())
    os._exit(128 + signum)


def stop_quietly_while_loading() -> None:
    """Until the command starts, a Ctrl-C or SIGTERM ends the process at once with one line (a signal the
    shell ignores for a background job stays ignored)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, exit_now)
