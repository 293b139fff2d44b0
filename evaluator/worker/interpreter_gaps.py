"""Triton's CPU interpreter (`TRITON_INTERPRET=1`) is not the compiler: known gaps, bridged or explained.

- `@triton.autotune` benchmarks its configs through the GPU driver, which the interpreter does not have ("0 active
  drivers"). Under the interpreter the autotuner keeps the first config its own pruning leaves, runs it without
  benchmarking, and the verdict says so (`Guards.notes`). On a GPU autotuning runs as usual; it benchmarks on the
  first call with a new key (warm-up and the first correctness trial), never inside a timed call, whose inputs
  keep the benchmark shape's key.
- Other gaps (libdevice and extern calls, inline assembly, float scalar arguments, aliased builtins) fail inside
  the interpreter with a bare error; `hint` maps them to one sentence that says it is the interpreter's limit.
"""

from __future__ import annotations

import os
from typing import Any

AUTOTUNE_NOTE = "under Triton's CPU interpreter, @triton.autotune ran one config (the first), without benchmarking"

_HINTS = (
    ("active drivers", "Triton found no GPU driver: under the CPU interpreter, code that needs one (benchmarking, "
                       "device properties) cannot run"),
    ("extern_elementwise not supported", "libdevice and other extern calls are not supported by Triton's CPU "
                                         "interpreter; use the tl.math functions"),
    ("libdevice", "libdevice calls are not supported by Triton's CPU interpreter; use the tl.math functions"),
    ("inline_asm not supported", "inline assembly is not supported by Triton's CPU interpreter"),
    ("has no attribute 'dtype'", "a plain Python value reached a tl function where the CPU interpreter needs a "
                                 "tensor (float scalar arguments and aliased builtins are interpreter gaps); wrap it "
                                 "with tl.full or pass it as a tensor"),
    ("'float' object", "a float scalar argument is not handled by Triton's CPU interpreter here; pass it as a "
                       "tl.constexpr or a one-element tensor"),
)


def install(notes: set[str]) -> bool:
    """Under the interpreter: the autotuner runs one config. Returns whether it was installed."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    prune = Autotuner.prune_configs

    def prune_configs(self: Any, kwargs: dict[str, Any]) -> list[Any]:
        notes.add(AUTOTUNE_NOTE)
        return list(prune(self, kwargs))[:1]

    Autotuner.prune_configs = prune_configs
    return True


def hint(message: str) -> str | None:
    """One sentence for a known interpreter gap named in an error message, else None."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return None
    for needle, sentence in _HINTS:
        if needle in message:
            return sentence
    return None
