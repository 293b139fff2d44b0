"""Python source to a syntax tree, safe to call from several threads at once: every parse in opforge goes here.

CPython 3.11 counts the AST constructor's recursion depth in per-interpreter state, not per thread. When a garbage
collection inside one thread's `ast.parse` runs a finaliser, the GIL can pass to another thread that is parsing too,
and one of the two fails with `SystemError: AST constructor recursion depth mismatch` (cpython gh-106905; 3.12
keeps the count per parse). opforge parses from the run driver, its proposal thread, the runner's threads and the web
app's request threads, so the parses are serialised by one lock; a parse takes well under a millisecond for a kernel
source, so the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import sys
import threading

_PARSE_LOCK = threading.Lock()
_NEEDS_LOCK = sys.version_info < (3, 12)


def parse_source(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source, filename)`; raises SyntaxError (or ValueError for null bytes) as it does."""
    if not _NEEDS_LOCK:
        return ast.parse(source, filename=filename)
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)
