"""Which backend a candidate's kernels belong to, and whether it runs in Triton's interpreter.

Backend names (CLI, store, leaderboard): `triton`, `cuda`, `cpp` (native C/C++ on the CPU: `load_c`, or a
`load_inline` extension without CUDA sources), and `torch` (PyTorch only, admitted with --allow-torch).
"""

from __future__ import annotations

import re

from evaluator.device.rules import rules

BACKENDS = ("triton", "cuda", "cpp", "torch")
_TRITON = re.compile(r"\btriton\b")
_JIT = re.compile(r"\b(jit|autotune)\b")
_NATIVE_BUILD = ("load_inline", "cpp_extension", "load_c")


def backend_of(kernels: dict[str, int], *, cuda_sources: bool, device_kind: str, allow_torch: bool) -> str | None:
    """The backend of the kernels the checked calls launched (label -> launches): `triton:*` triton,
    `extension:*` cuda (CUDA sources on a CUDA device) or cpp, `cpp:*` cpp; none: torch where PyTorch-only
    candidates are admitted. Several kinds: the one launched most."""
    counts: dict[str, int] = {}
    for label, n in kernels.items():
        kind = label.split(":", 1)[0]
        backend = {"triton": "triton", "cpp": "cpp"}.get(kind)
        if kind == "extension":
            backend = "cuda" if cuda_sources and rules(device_kind).cuda_runtime else "cpp"
        if backend is not None and n > 0:
            counts[backend] = counts.get(backend, 0) + n
    if counts:
        return max(sorted(counts), key=lambda b: counts[b])
    return "torch" if allow_torch else None


def names_triton(source: str) -> bool:
    """Whether a candidate's text names Triton at all: only then do its watched calls carry the store ledger's copy
    grants (`call_watch.watched`). A source that hides the name loses the grants, never a check: its Triton kernels'
    outputs are still judged by the ledger, without PyTorch's copies of them counted as the kernels' (stricter)."""
    return bool(_TRITON.search(source))


def has_cuda_sources(source: str) -> bool:
    return "cuda_sources" in source or "load_inline" in source and "__global__" in source


def runs_in_triton_interpreter(source: str, device_kind: str) -> bool:
    """A Triton candidate evaluated on the CPU (decided from its text: Triton's jit and no native build), which
    runs in Triton's interpreter and is timed on the task's INTERPRETER_SHAPE where it has one."""
    if not rules(device_kind).triton_interpreted or any(word in source for word in _NATIVE_BUILD):
        return False
    return bool(_TRITON.search(source) and _JIT.search(source))
