"""The direction of imports, read from every module's source (ast): evaluator <- store <- agents <- opforge, with
benchmarks beside (task files and their loader: they may use the evaluator, and only opforge uses them); inside
opforge, run/ (the search and what drives it) never imports the CLI, the web app or the reports."""

from __future__ import annotations

import ast
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What each top-level package may import from the project (itself included).
ALLOWED = {
    "evaluator": {"evaluator"},
    "store": {"evaluator", "store"},
    "agents": {"evaluator", "store", "agents", "prompts"},
    "prompts": {"prompts"},
    "benchmarks": {"evaluator", "benchmarks"},
    "opforge": {"evaluator", "store", "agents", "prompts", "benchmarks", "opforge"},
}
RUN_MUST_NOT_IMPORT = ("opforge.cli", "opforge.web", "opforge.reports")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) for each import of the file, relative imports resolved against its package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module))
            out += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]  # `from opforge import cli`
    return out


def project_modules() -> list[Path]:
    return sorted(p for top in ALLOWED for p in (ROOT / top).rglob("*.py"))


def _violations(path: Path) -> list[str]:
    rel = path.relative_to(ROOT)
    top = rel.parts[0]
    in_run = rel.parts[:2] == ("opforge", "run")
    found = []
    for line, module in imported_modules(path):
        head = module.split(".")[0]
        if head in ALLOWED and head not in ALLOWED[top]:
            found.append(f"{rel}:{line} imports {module} ({top} is below {head})")
        if in_run and any(module == m or module.startswith(m + ".") for m in RUN_MUST_NOT_IMPORT):
            found.append(f"{rel}:{line} imports {module} (opforge/run must not import the CLI, web or reports)")
    return found


def test_no_module_imports_upward() -> None:
    modules = project_modules()
    assert len(modules) > 100  # the walk found the project
    problems = [v for path in modules for v in _violations(path)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("where", "source", "expected"), [
    ("store/x.py", "from agents.tuner import TuneProposer\n", "store is below agents"),
    ("evaluator/x.py", "import store.rows\n", "evaluator is below store"),
    ("benchmarks/x.py", "from opforge.run import archive\n", "benchmarks is below opforge"),
    ("opforge/run/x.py", "from opforge.cli.program import main\n", "must not import the CLI"),
    ("opforge/run/x.py", "from opforge import reports\n", "must not import the CLI"),
    ("opforge/run/x.py", "from ..web import app\n", "must not import the CLI"),
])
def test_an_upward_import_is_caught(where: str, source: str, expected: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake_root = tmp_path
    path = fake_root / where
    path.parent.mkdir(parents=True)
    path.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    assert any(expected in v for v in _violations(path)), _violations(path)


# -- the evaluator's packages: no import cycle, and a worker reaches nothing of the trusted side --------------------
# Every import counts, those inside a function too: a lazy import still makes the module depend on the other one (it
# only moves the failure to the first call), so one placed to break a cycle leaves the cycle where it was. Imports
# under `if TYPE_CHECKING:` do not count: the type checker alone reads them, to name a type in an annotation. A
# package's `__init__.py` is no node: the top one imports its public names lazily, by their module's name (PEP 562),
# and the sub-packages' hold only their docstring. Modules are named by their path below `evaluator/`
# (`worker.zygote`, `native`).
# The trusted side's packages: the driver, its measurements, its correctness and the profilers' drivers. Nothing a
# worker's process imports (its zygote and everything that imports, directly or not), and no module of `worker/`, is
# in one of them: a worker reaching back into the driver is how the evaluator's cycles began.
TRUSTED_PACKAGES = ("driver", "measure", "verify", "profile")
WORKER_PACKAGE = "worker"
WORKER_ROOT = "worker.zygote"


def _type_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            skip |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skip


def evaluator_imports() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of its first import}, for the evaluator's modules (named by their path
    below `evaluator/`, dotted)."""
    package = ROOT / "evaluator"
    names = {".".join(p.relative_to(package).with_suffix("").parts) for p in package.rglob("*.py")
             if p.name != "__init__.py"}
    graph: dict[str, dict[str, int]] = {}
    for name in sorted(names):
        path = package / (name.replace(".", "/") + ".py")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        skip = _type_only(tree)
        here = ["evaluator"] + name.split(".")[:-1]  # the module's package, for relative imports
        edges: dict[str, int] = {}
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                module = ".".join(parts[1:])
                if parts[0] == "evaluator" and module in names and module != name:
                    edges.setdefault(module, node.lineno)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _path(graph: dict[str, dict[str, int]], start: str, goal: str, within: Collection[str]) -> list[str]:
    """The shortest chain of imports from `start` to `goal` through `within` (breadth first), both ends included."""
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child in within and child not in came:
                    came[child] = node
                    following.append(child)
        if goal in came:
            break
        frontier = following
    chain = [goal]
    while chain[-1] != start or len(chain) == 1:
        chain.append(came[chain[-1]])
    return chain[::-1]


def describe(graph: dict[str, dict[str, int]], component: frozenset[str]) -> str:
    """One cycle through the component's first module, each step with the line of its import, then its members."""
    first = min(component)
    chain = _path(graph, first, first, component)
    steps = " -> ".join(f"{a.replace('.', '/')}.py:{graph[a][b]}" for a, b in zip(chain, chain[1:]))
    return f"{steps} -> {first}  (the cycle's {len(component)} modules: {', '.join(sorted(component))})"


def test_the_evaluator_has_no_import_cycle() -> None:
    graph = evaluator_imports()
    assert len(graph) > 70  # the walk found the package
    found = cycles(graph)
    assert not found, "import cycles in evaluator/:\n" + "\n".join(describe(graph, c) for c in found)


def _plant(root: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, int]]:
    for name, source in files.items():
        path = root / "evaluator" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    return evaluator_imports()


def test_a_planted_cycle_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _plant(tmp_path, {
        "__init__.py": "from evaluator.a import x\n",  # the package is no node
        "a.py": "from evaluator import b\nx = 1\n",
        "b.py": "import os\n\n\ndef f():\n    from evaluator.c import y  # lazy: it counts\n    return y\n",
        "c.py": "from . import a\ny = 2\n",
        "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from evaluator.e import T\n",
        "e.py": "from evaluator.d import U\n",  # d -> e is a type's name only: no cycle
    }, monkeypatch)
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert describe(graph, frozenset({"a", "b", "c"})) == (
        "a.py:1 -> b.py:5 -> c.py:1 -> a  (the cycle's 3 modules: a, b, c)")


def reached(graph: dict[str, dict[str, int]], root: str) -> set[str]:
    """`root` and every module it imports, directly or not."""
    seen = {root}
    frontier = [root]
    while frontier:
        frontier = sorted({child for node in frontier for child in graph[node]} - seen)
        seen.update(frontier)
    return seen


def _trusted(module: str) -> bool:
    return module.split(".")[0] in TRUSTED_PACKAGES


def _trusted_modules_in_a_worker(graph: dict[str, dict[str, int]]) -> list[str]:
    """For each module of the trusted side that a worker's process imports, or that a module of `worker/` imports:
    the chain of imports from the zygote (or that module) to it."""
    problems = []
    for root in sorted(m for m in graph if m == WORKER_ROOT or m.startswith(WORKER_PACKAGE + ".")):
        inside = reached(graph, root)
        problems += [" -> ".join(_path(graph, root, m, inside)) for m in sorted(inside) if _trusted(m)]
    return sorted(set(problems))


def test_a_worker_imports_nothing_of_the_trusted_side() -> None:
    graph = evaluator_imports()
    assert WORKER_ROOT in graph and {m.split(".")[0] for m in graph} >= set(TRUSTED_PACKAGES)  # the names still name
    problems = _trusted_modules_in_a_worker(graph)
    assert not problems, "a worker's process imports the trusted side's modules:\n" + "\n".join(problems)


def test_a_trusted_module_a_worker_reaches_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = _plant(tmp_path, {
        "worker/zygote.py": "def serve():\n    from evaluator.worker import loop\n",
        "worker/loop.py": "from evaluator.helper import f\n",
        "helper.py": "def f():\n    from evaluator.measure.blocks import fresh_seed  # lazy: it counts\n",
        "measure/blocks.py": "",
        "driver/launch.py": "from evaluator.worker import zygote  # the driver may import the worker's modules\n",
        "worker/timer.py": "from ..verify import trials\n",  # a worker module the zygote does not reach
        "verify/trials.py": "",
    }, monkeypatch)
    assert _trusted_modules_in_a_worker(graph) == [
        "worker.loop -> helper -> measure.blocks", "worker.timer -> verify.trials",
        "worker.zygote -> worker.loop -> helper -> measure.blocks"]
