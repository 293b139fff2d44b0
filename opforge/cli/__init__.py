"""The `opforge` command line: `program.py` (the parser and `main`, the entry point), `flags.py` (flags several commands share), and one
module per command under `commands/`."""

from opforge.cli.program import main

__all__ = ["main"]
