"""The `opforge` command line: one module per command under `opforge/cli/commands/`."""

from __future__ import annotations

import argparse
import importlib
import sys

from opforge import __version__
from opforge.errors import UsageError

# Each module defines register(subparsers) and sets a `run(args) -> int` default on its parser.
COMMAND_MODULES = ("eval", "task", "optimize", "bench", "leaderboard", "report", "export", "dataset", "submit", "jobs",
                   "cancel", "worker", "serve", "runs", "db")

__all__ = ["COMMAND_MODULES", "UsageError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opforge",
        description="Make PyTorch operators faster with generated Triton/CUDA kernels, verified and timed by a "
                    "trusted evaluator.",
    )
    parser.add_argument("--version", action="version", version=f"opforge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:  # a missing command module is an error, never a command that silently vanishes
        importlib.import_module(f"opforge.cli.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except UsageError as exc:
        print(f"opforge: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a command may say what was kept and how to continue (see optimize)
        detail = str(exc).strip()
        print(f"opforge: interrupted{'; ' + detail if detail else ''}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `opforge ... | head`: the reader left; nothing more to say
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
