"""The direction of imports, read from every module's source (ast): evaluator <- store <- agents <- opforge, with
benchmarks beside (task files and their loader: they may use the evaluator, and only opforge uses them); inside
opforge, run/ (the search and what drives it) never imports the CLI, the web app or the reports."""

from __future__ import annotations

import ast
import sys
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
