"""A task run at other sizes: `--set NAME=VALUE` replaces the value of one of the task file's top-level assignments.

KernelBench's tasks keep their sizes in module globals (`batch_size = 4096`, `dim = 393216`), which `get_inputs` and
`get_init_inputs` read when the reference worker calls them. A task too big for the machine, or one a user wants
at the size their model sees, is run by rewriting those assignments in the task's source before anything else sees
it. The rewrite is the task: its digest, the store's copy and every verdict follow from the rewritten source, and each
rewritten line says so (`# opforge --set dim=4096; the file says 393216`), so the store records what ran and a later
reader finds it in the source (`recorded`). The driver never executes the task: the values are Python literals, read
with `ast.literal_eval`, and the file is only parsed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from evaluator.source_ast import parse_source
from evaluator.task import Task, TaskError, source_digest

MARK = "# opforge --set "
CLI_HELP = ("run the task with its top-level assignment NAME given VALUE, a Python literal (repeatable; for example "
            "--set batch_size=16 to run a KernelBench task at a size that fits): the rewritten task is what is "
            "evaluated and stored, and each rewritten line says what the file had")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_RECORDED = re.compile(re.escape(MARK) + r"([A-Za-z_][A-Za-z0-9_]*)=(.*); the file says ")


@dataclass(frozen=True, slots=True)
class Setting:
    """One `--set NAME=VALUE`: the name of a top-level assignment and the literal that replaces its value."""

    name: str
    value_text: str  # as written, re-rendered from the literal (`repr`)

    @classmethod
    def parse(cls, text: str, label: str) -> "Setting":
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not _NAME.fullmatch(name) or not value:
            raise TaskError(f"{label}: --set {text!r}: write NAME=VALUE, such as --set batch_size=16.")
        try:
            literal = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise TaskError(f"{label}: --set {name}={value}: the value must be a Python literal (a number, a "
                            f"string in quotes, a tuple or list of them), not an expression.") from None
        return cls(name, repr(literal))


def apply_settings(task: Task, texts: Sequence[str]) -> Task:
    """`task` with each `NAME=VALUE` of `texts` replacing the value of its top-level assignment `NAME = ...`.

    Raises TaskError (one sentence naming the file) for a malformed setting, a name the file does not assign at its
    top level, one it assigns more than once, or one set twice."""
    if not texts:
        return task
    settings = [Setting.parse(t, task.label) for t in texts]
    seen: set[str] = set()
    for s in settings:
        if s.name in seen:
            raise TaskError(f"{task.label}: --set {s.name} is given twice; give each name once.")
        seen.add(s.name)
    tree = parse_source(task.source, task.label)
    targets = _assignments(tree)
    lines = task.source.splitlines(keepends=True)
    edits: list[tuple[ast.expr, Setting]] = []
    for s in settings:
        found = targets.get(s.name, [])
        if not found:
            names = ", ".join(sorted(targets)) or "nothing"
            raise TaskError(f"{task.label}: --set {s.name}: the task has no top-level assignment to {s.name} "
                            f"(it assigns {names}).")
        if len(found) > 1:
            raise TaskError(f"{task.label}: --set {s.name}: the task assigns {s.name} {len(found)} times at its top "
                            f"level (lines {', '.join(str(line) for line, _ in found)}); which one is meant is unclear.")
        edits.append((found[0][1], s))
    # From the last edit up, so that earlier positions stay valid.
    for value, s in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        lines = _replace(lines, value, s)
    source = "".join(lines)
    return replace(task, source=source, digest=source_digest(source))


def recorded(source: str) -> tuple[str, ...]:
    """The `NAME=VALUE` settings a rewritten task's source records, in the order of its lines."""
    return tuple(f"{m.group(1)}={m.group(2)}" for m in _RECORDED.finditer(source))


def _assignments(tree: ast.Module) -> dict[str, list[tuple[int, ast.expr]]]:
    """Each top-level name assigned a value by `NAME = value` or `NAME: T = value`: the statement's line and the
    value's node, for each such assignment."""
    out: dict[str, list[tuple[int, ast.expr]]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append((node.lineno, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append((node.lineno, node.value))
    return out


def _replace(lines: list[str], value: ast.expr, setting: Setting) -> list[str]:
    """`lines` with `value`'s source span replaced by the setting's literal and the line marked; a value that spans
    several lines becomes one (the lines after it keep their text; only their numbers move up)."""
    assert value.end_lineno is not None and value.end_col_offset is not None
    first, last = value.lineno - 1, value.end_lineno - 1
    # ast's offsets are in UTF-8 bytes
    head = lines[first].encode("utf-8")[: value.col_offset].decode("utf-8")
    tail_bytes = lines[last].encode("utf-8")[value.end_col_offset:]
    tail = tail_bytes.decode("utf-8")
    was = "".join(lines[first:last + 1]).encode("utf-8")
    old = was[value.col_offset: len(was) - len(tail_bytes)].decode("utf-8")
    old_one_line = " ".join(old.split())
    if len(old_one_line) > 60:
        old_one_line = old_one_line[:57] + "..."
    newline = "\n" if tail.endswith("\n") or last + 1 < len(lines) else ""
    body = tail.rstrip("\n")
    mark = f"{MARK}{setting.name}={setting.value_text}; the file says {old_one_line}"
    text = f"{head}{setting.value_text}{body}  {mark}{newline}"  # after any comment the line had: still a comment
    return lines[:first] + [text] + lines[last + 1:]
