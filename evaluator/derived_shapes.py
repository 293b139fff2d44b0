"""Shape variants for a task that gives none: a kernel verified at one shape only serves one shape.

A KernelBench task has no `SHAPES`: every trial runs its single benchmark shape, so a kernel that hard-codes a size,
or is wrong at a ragged edge, passes; and an exported kernel is verified for exactly one size. For such a task the
driver derives variants from the task's own sizes, read statically from its source (never executed here):

- the leading size: the first top-level integer that `get_inputs` names (`batch_size`, `M`), one larger (odd where
  it was even: a ragged edge) and about a third of it, made odd;
- the last such integer, where it is another one (`dim`, `N`), made odd and one smaller where it was even.

`with_shapes` appends them as a `SHAPES` list, marked, to the task's source. Whether the reference runs at each is
not known statically (a size may have to divide another): the caller keeps the variants that the reference's worker
runs on the meta device (`opforge.run.shapes`), so the derived task never fails for the reference.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from evaluator.source_ast import parse_source
from evaluator.task import Task, source_digest

MARK = "# opforge: shape variants derived from the task's sizes (the task gives no SHAPES)"
LARGEST_LEADING = 1 << 20  # a leading size past this is left as it is (one more row of a huge task costs a lot)


def candidates(source: str, label: str = "task") -> list[dict[str, int]]:
    """The variants to try for a task without SHAPES (empty where it has them or names no integer size)."""
    tree = parse_source(source, label)
    assigned = _assigned(tree)
    if "SHAPES" in assigned:
        return []
    ints = {name: value for name, value in assigned.items() if type(value) is int and value >= 2}
    sizes = [name for name in _names_in(tree, "get_inputs") if name in ints]
    if not sizes:
        return []
    out: list[dict[str, int]] = []
    lead = sizes[0]
    v = ints[lead]
    if v <= LARGEST_LEADING:
        out.append({lead: v + 1})
    smaller = max(v // 3, 1) | 1
    if smaller < v:
        out.append({lead: smaller})
    last = sizes[-1]
    if last != lead:
        w = ints[last]
        odd = w - 1 if w % 2 == 0 else w - 2
        if odd >= 1:
            out.append({last: odd})
    return out


def with_shapes(task: Task, shapes: list[dict[str, int]]) -> Task:
    """The task with `shapes` as its SHAPES (appended, marked); the task itself where there are none."""
    if not shapes:
        return task
    body = task.source if task.source.endswith("\n") else task.source + "\n"
    source = f"{body}\n{MARK}\nSHAPES = {shapes!r}\n"
    return replace(task, source=source, digest=source_digest(source))


_FOLDED = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__,
           ast.LShift: int.__lshift__}


def _integer(node: ast.expr, known: dict[str, object]) -> int | None:
    """An integer expression of literals and earlier integer names (`4096 * 8`, `2 * M`, `1 << 14`), folded."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name) and type(known.get(node.id)) is int:
        return known[node.id]  # type: ignore[return-value]
    if isinstance(node, ast.BinOp) and type(node.op) in _FOLDED:
        left, right = _integer(node.left, known), _integer(node.right, known)
        if left is None or right is None or (isinstance(node.op, ast.FloorDiv) and right == 0) or (
                isinstance(node.op, ast.LShift) and not 0 <= right <= 62):
            return None
        return _FOLDED[type(node.op)](left, right)
    return None


def _assigned(tree: ast.Module) -> dict[str, object]:
    """Top-level names bound by `NAME = literal` or an integer expression (the value) or otherwise assigned (None)."""
    out: dict[str, object] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        for t in targets:
            if isinstance(t, ast.Name):
                folded = _integer(value, out) if value is not None else None
                if folded is not None:
                    out[t.id] = folded
                    continue
                try:
                    out[t.id] = ast.literal_eval(value) if value is not None else None
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    out[t.id] = None
    return out


def _names_in(tree: ast.Module, function: str) -> list[str]:
    """The names a top-level function loads, in order of first use."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            seen: dict[str, None] = {}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                    seen.setdefault(sub.id, None)
            return sorted(seen, key=lambda n: _first_use(node, n))
    return []


def _first_use(fn: ast.FunctionDef, name: str) -> tuple[int, int]:
    return min((n.lineno, n.col_offset) for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name)
