"""Seeds built for another x86-64 level than this CPU: the benches' `--march LEVEL`.

Every seed asks `load_c` for `-march=native`. On a CPU with AVX-512 that never builds the portable path a CPU without
it runs (AVX2, SSE, NEON). `build_seeds_for("x86-64-v3")` makes `evaluator.native.load_c` build with `-march=x86-64-v3`
(AVX2 and FMA) where a caller asks for `-march=native`, so a bench on this machine can check and time that path: at
this machine's memory bandwidth and clock, a proxy for a CPU without AVX-512, not a measurement of one. Seed modules
take `load_c` from `evaluator.native` when they are loaded, so call this before loading them."""

from __future__ import annotations

from collections.abc import Sequence

from evaluator import native

MARCH_LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")  # on the native flag allow-list


def build_seeds_for(level: str) -> None:
    if level not in MARCH_LEVELS:
        raise ValueError(f"--march {level!r} is not an x86-64 level ({', '.join(MARCH_LEVELS)})")
    load_c = native.load_c

    def load_c_for_level(name: str, sources: str | list[str], functions: str | list[str],
                         flags: Sequence[str] = (), language: str = "c") -> native.NativeLibrary:
        return load_c(name, sources, functions, [f"-march={level}" if f == "-march=native" else f for f in flags],
                      language)

    native.load_c = load_c_for_level  # type: ignore[assignment]
