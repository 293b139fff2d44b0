"""Native CPU kernels in an exported package: the package carries its own copy of `load_c`'s local build path.

A `cpp` kernel module calls `load_c` (`evaluator.native`), which an installed package cannot import: the export
vendors the five modules of that path (the prototype parser and flag allow-list, the local build, the cache's entries
(`entry_cache.py`, which the CUDA cache shares), the build verdicts, the ctypes binding) as `<package>/_native/`, with
their imports made relative, and points the kernel modules at it. The kernels are then built at first use with the
system compiler into the same per-user cache keyed by the SHA-256 of (sources, flags, language, compiler version). Without a compiler, a call the kernel was proven for raises the package's
`CompilerMissingError` (one sentence: which compiler, what to install) instead of running the reference; calls on
shapes or devices the kernel was never proven on use the reference, as for every exported kernel.
"""

from __future__ import annotations

import re
from pathlib import Path

import evaluator

SOURCES = {"__init__.py": "native.py", "spec.py": "build/native_spec.py", "build.py": "build/native_build.py",
           "entry_cache.py": "build/entry_cache.py", "verdict.py": "wire/build_verdict.py"}
_IMPORTS = (("from evaluator.build.native_build import", "from .build import"),
            ("from evaluator.build.entry_cache import", "from .entry_cache import"),
            ("from evaluator.build.native_spec import", "from .spec import"),
            ("from evaluator.wire.build_verdict import", "from .verdict import"))
_KERNEL_IMPORT = re.compile(r"^(\s*)from\s+evaluator\.native\s+import\s+", re.MULTILINE)
HEADER = "# Vendored by opforge export from opforge's evaluator/{source} (load_c's local build path): no opforge needed.\n"


def vendored_loader(package: str) -> dict[str, str]:
    """The files of `<package>/_native/`, by path relative to the output folder."""
    root = Path(evaluator.__file__).resolve().parent
    files = {}
    for target, source in SOURCES.items():
        text = (root / source).read_text(encoding="utf-8")
        for old, new in _IMPORTS:
            text = text.replace(old, new)
        leftover = re.search(r"^\s*(from|import)\s+evaluator\b.*$", text, re.MULTILINE)
        if leftover:
            raise RuntimeError(f"evaluator/{source} imports {leftover.group(0).strip()!r}, which the vendored loader "
                               "cannot carry")
        files[f"{package}/_native/{target}"] = HEADER.format(source=source) + text
    return files


def rewrite_kernel(source: str, package: str) -> str:
    """A `cpp` kernel module importing the package's own `load_c` instead of opforge's: the one change made to an
    evaluated source (the manifest says so, and the package's tests undo it before checking the digest)."""
    return _KERNEL_IMPORT.sub(lambda m: f"{m.group(1)}from {package}._native import ", source)
