"""Parsing Python from several threads at once (cpython gh-106905 on 3.11), and that opforge parses only that way."""

from __future__ import annotations

import ast
import gc
import re
import threading
from pathlib import Path

from evaluator.source_ast import parse_source

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evaluator", "store", "agents", "opforge", "benchmarks", "prompts", "scripts")
SOURCE = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)] if x else {{'a': (1, {i})}}"
                   for i in range(200))


class _Finalised:
    """Garbage in a reference cycle whose finaliser runs Python code long enough for the GIL to change hands."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        sum(range(3000))


def test_parses_from_several_threads_agree_with_one():
    """Three threads parse while collections run finalisers mid-parse: on 3.11 a bare ast.parse fails here with
    'AST constructor recursion depth mismatch' within a few hundred parses (the run loop's CI failure)."""
    expected = ast.dump(ast.parse(SOURCE))
    problems: list[str] = []

    def parse_many() -> None:
        for _ in range(60):
            for _ in range(40):
                _Finalised()
            try:
                if ast.dump(parse_source(SOURCE)) != expected:
                    problems.append("a different tree")
            except SystemError as exc:
                problems.append(str(exc))

    threshold = gc.get_threshold()
    gc.set_threshold(50)
    try:
        threads = [threading.Thread(target=parse_many) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*threshold)
    assert problems == []


def test_opforge_parses_only_through_parse_source():
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "source_ast.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"\bast\.parse\(", line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}")
    assert offenders == [], "parse with evaluator.source_ast.parse_source (thread-safe on 3.11): " + ", ".join(offenders)


def test_syntax_errors_pass_through():
    try:
        parse_source("def f(:\n", "bad.py")
    except SyntaxError as exc:
        assert exc.filename == "bad.py" and exc.lineno == 1
    else:
        raise AssertionError("a syntax error was not raised")
