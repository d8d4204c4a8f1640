"""One module per command: argument handling is in cli.py, the work here (imported only when the command runs)."""
