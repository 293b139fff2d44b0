"""A task: a KernelBench problem file (`Model`, `get_inputs`, `get_init_inputs`), read and statically checked.

The trusted driver never executes a task here: it only reads and parses it. The reference worker (a separate process)
imports it, runs it and reports what it found (see `reference_worker.py`).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass
from pathlib import Path

from evaluator.source_ast import parse_source

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


class TaskError(Exception):
    """A task file that cannot be used; the message is one readable sentence naming the file and the problem."""


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    source: str
    digest: str
    path: str | None = None

    @property
    def label(self) -> str:
        return self.path or self.name


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def task_from_source(source: str, name: str, path: str | None = None) -> Task:
    label = path or name
    try:
        tree = parse_source(source, label)
    except SyntaxError as exc:
        raise TaskError(f"{label}: syntax error on line {exc.lineno}: {exc.msg}; fix the task file.") from None
    defined = _top_level_names(tree)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        raise TaskError(
            f"{label}: not a task file: it does not define {', '.join(missing)} "
            "(a task defines class Model(nn.Module), get_inputs() and get_init_inputs())."
        )
    return Task(name=name, source=source, digest=source_digest(source), path=path)


def load_task(path: str | Path) -> Task:
    p = Path(path)
    if not p.exists():
        raise TaskError(f"{p}: no such task file.")
    if not p.is_file():
        raise TaskError(f"{p}: is not a file; give the path of a task's .py file.")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{p}: cannot be read as UTF-8 text ({exc.__class__.__name__}).") from None
    return task_from_source(source, name=p.stem, path=str(p))


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return names
