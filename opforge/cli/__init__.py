"""The `opforge` command line: `main.py` (the entry point), `flags.py` (flags several commands share), and one
module per command under `commands/`."""

from opforge.cli.main import main

__all__ = ["main"]
