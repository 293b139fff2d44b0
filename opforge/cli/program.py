"""The `opforge` command line: one module per command under `opforge/cli/commands/`."""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
from typing import NoReturn

from opforge import __version__
from evaluator.worker.heap import keep_freed_memory
from evaluator.sandbox.zygote_env import openmp_environment
from opforge.errors import UsageError

# Each module defines register(subparsers) and sets a `run(args) -> int` default on its parser.
COMMAND_MODULES = ("eval", "task", "optimize", "bench", "leaderboard", "report", "export", "dataset", "submit", "jobs",
                   "cancel", "worker", "serve", "runs", "db", "model")

__all__ = ["COMMAND_MODULES", "UsageError", "build_parser", "exit_at_once", "main"]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with `only` (a name in COMMAND_MODULES) that command's alone: its module is then
    the only one imported, so that `opforge eval` does not pay for the store's, the LLM client's and the web
    server's imports (seconds on a busy machine) before it starts its evaluator."""
    parser = argparse.ArgumentParser(
        prog="opforge",
        description="Make PyTorch operators faster with generated Triton, CUDA and native C/C++ CPU kernels, "
                    "verified and timed by a trusted evaluator.",
    )
    parser.add_argument("--version", action="version", version=f"opforge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # A missing command module is an error, never a command that silently vanishes.
    for name in (only,) if only in COMMAND_MODULES else COMMAND_MODULES:
        importlib.import_module(f"opforge.cli.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Before anything loads torch (and with it libgomp): this process's own OpenMP work (the CPU's measured peaks,
    # which judge every native kernel's roofline) runs with the same settings as the evaluator's workers.
    for key, value in openmp_environment().items():
        os.environ.setdefault(key, value)
    words = sys.argv[1:] if argv is None else argv
    parser = build_parser(words[0] if words else None)
    args = parser.parse_args(words)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    if argv is None and getattr(args, "drives_evaluations", False):
        keep_freed_memory()  # before torch loads: the driver's copies of the workers' outputs (`heap.py`)
    try:
        code = int(args.run(args) or 0)
        if argv is None and getattr(args, "exit_at_once", False):
            exit_at_once(code)
        return code
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


def exit_at_once(code: int) -> NoReturn:
    """End the process now that a command's output is written and its atexit handlers ran, without the interpreter's
    teardown: with torch loaded, freeing every module's objects takes 0.3-1 s on a busy 2-core machine, after the
    verdict is printed and before the shell gets its prompt back. Only for a process whose command asks for it
    (`exit_at_once`: `opforge eval`, which has closed its workers and zygotes by then) and never for an in-process
    `main(argv)` (tests)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # `opforge eval ... | head`: nothing more to say
        pass
    atexit._run_exitfuncs()
    try:
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
