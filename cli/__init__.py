"""What every command line of the project shares: cli/command.py (the parser, the error line, the exit codes)."""
