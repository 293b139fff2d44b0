"""A task's random inputs drawn by a native, parallel, counter-based generator on a CPU.

Every timed call sees fresh inputs (`measure/blocks.py`), and on a CPU PyTorch draws them with one thread from its Mersenne
Twister: a `torch.randn` of 8 million floats takes about 40 ms where the kernel under test takes 2-4 ms, so drawing
was most of a timed phase's wall time, and the time cap, not the stopping rule, ended most large tasks' sides. Here
value i of a draw is a function of a 64-bit key and i alone (splitmix64's finaliser; Box-Muller for normals), computed
by an OpenMP loop of the machine's vectors: about 3.5 ms for those 8 million normals on 2 cores, 1.3 ms uniform.

What the task sees is unchanged in kind: `torch.randn`, `torch.rand`, their `_like` forms and `Tensor.normal_` /
`Tensor.uniform_` on the CPU's default generator give the same distributions (uniform on [0, 1) in steps of 2**-24;
normal with its tails cut at 6.7 sigma, where float32 Box-Muller from 32-bit uniforms ends). The key is drawn from the
default generator, which the harness seeds for each call (`task_runtime.seed_generators`), so a seed still fixes
every input and the generator's later draws (dropout in a forward) depend on it alike. A draw with its own
`generator=`, an `out=`, a float64 or integer dtype, a strided `_like` source or fewer than `MIN_VALUES` values is
left to PyTorch.

Bit-identical in both workers: the functions are part of the harness's library, which the driver builds once per
machine and sends as the same bytes to both (`harness_library.py`); each value depends on (key, i) only, never on
the thread count or on where a vector loop's tail falls (no contraction into FMAs, no library math: log, sin and cos
are polynomials here). A driver without a C compiler sends none, and both workers then draw with PyTorch, as before.
`-fno-trapping-math` lets gcc compute both sides of the log's and the quadrant's selects in vector registers where the
CPU has no masked vector operations: without it, on an AVX2 CPU (AMD EPYC Zen 3, 2026-11-25), the normal loop was not
vectorised at all ("control flow in loop") and 8M normals took 104 ms against PyTorch's 33 (18 ms with it; loaded).

Nothing here is a defence: what a candidate does to its own worker's draws only changes its own inputs, and its
kept outputs are recomputed by the reference worker from the same seed.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from evaluator.native import NativeLibrary

MIN_VALUES = 1 << 14  # smaller draws cost microseconds either way: PyTorch's own
FLAGS = ("-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fno-math-errno", "-fno-trapping-math",
         "-ffp-contract=off")
SOURCE = r"""
#include <stdint.h>
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static inline uint64_t value_hash(uint64_t key, int64_t i) { return mix64(key + (uint64_t)i * 0x9E3779B97F4A7C15ULL); }
/* natural log of x in (0, 1]: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m by the atanh series to s^9 */
static inline float log_unit(float x) {
    union { float f; uint32_t u; } v = { x };
    int32_t e = (int32_t)((v.u >> 23) & 0xFF) - 127;
    v.u = (v.u & 0x007FFFFFu) | 0x3F800000u;
    float m = v.f;
    int big = m > 1.41421356f;
    m = big ? m * 0.5f : m;
    e = big ? e + 1 : e;
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float p = s * (2.0f + s2 * (0.666666667f + s2 * (0.4f + s2 * (0.285714286f + s2 * 0.222222222f))));
    return p + (float)e * 0.693147181f;
}
/* sine and cosine of 2 pi u, u in [0, 1): a quarter turn q and an angle a in [-pi/4, pi/4) by Taylor series */
static inline void sincos_turn(float u, float* sn, float* cs) {
    float q4 = u * 4.0f;
    int q = (int)q4;
    float a = (q4 - (float)q) * 1.57079633f - 0.785398163f, a2 = a * a;
    float s = a * (1.0f + a2 * (-0.166666667f + a2 * (0.00833333333f + a2 * (-0.000198412698f + a2 * 2.75573192e-6f))));
    float c = 1.0f + a2 * (-0.5f + a2 * (0.0416666667f + a2 * (-0.00138888889f + a2 * 2.48015873e-5f)));
    const float r = 0.707106781f;
    float s1 = (s + c) * r, c1 = (c - s) * r;
    *sn = q == 0 ? s1 : q == 1 ? c1 : q == 2 ? -s1 : -c1;
    *cs = q == 0 ? c1 : q == 1 ? -s1 : q == 2 ? -c1 : s1;
}
static inline void normal_pair(uint64_t h, float* a, float* b) {
    float u1 = (float)(uint32_t)(h >> 32) * 2.3283064e-10f + 1.16415322e-10f;
    float u2 = (float)(uint32_t)(h & 0xFFFFFF) * 5.96046448e-8f;
    float r2 = -2.0f * log_unit(u1);
    float r = __builtin_sqrtf(r2 > 0.0f ? r2 : 0.0f), sn, cs;
    sincos_turn(u2, &sn, &cs);
    *a = r * cs;
    *b = r * sn;
}
void draw_normal_f32(float* out, int64_t n, uint64_t key) {
    int64_t pairs = n / 2;
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < pairs; ++i) normal_pair(value_hash(key, i), out + 2 * i, out + 2 * i + 1);
    if (n & 1) { float spare; normal_pair(value_hash(key, pairs), out + n - 1, &spare); }
}
/* each value of `in` replaced by a normal draw * scale keyed on its float32 bits (-0.0 as 0.0): equal values, equal
   draws (task_runtime._redraw, the second distribution and the large-magnitude trial) */
void redraw_normal_f32(const float* in, float* out, int64_t n, uint64_t key, float scale) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        union { float f; uint32_t u; } v = { in[i] + 0.0f };
        float a, b;
        normal_pair(mix64(key ^ ((uint64_t)v.u * 0x9E3779B97F4A7C15ULL)), &a, &b);
        out[i] = a * scale;
    }
}
void draw_uniform_f32(float* out, int64_t n, uint64_t key) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = (float)(uint32_t)(value_hash(key, i) >> 40) * 5.96046448e-8f;
}
"""
FUNCTIONS = ("draw_normal_f32", "draw_uniform_f32", "redraw_normal_f32")
_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_FACTORY_KWARGS = {"dtype", "device", "requires_grad", "layout", "pin_memory"}
_LIKE_KWARGS = {"dtype", "device", "requires_grad", "layout", "memory_format"}


class FastDraws:
    """The workers' side: the library loaded from the driver's bytes, and the draws it takes over."""

    def __init__(self, library: NativeLibrary) -> None:
        """`library`: the harness's (`harness_library.load`), loaded through `load_c`'s own loader, the one whose
        ctypes use the audit hook allows in a candidate's worker; its calls are not counted as kernel launches."""
        self._fill: dict[str, Callable[..., None]] = {kind: getattr(library, name)
                                                       for kind, name in zip(("normal", "uniform"), FUNCTIONS)}
        self._redraw = library.redraw_normal_f32
        self._handlers: dict[Any, Callable[[tuple, dict], torch.Tensor | None]] = {
            torch.randn: functools.partial(self._factory, "normal"),
            torch.rand: functools.partial(self._factory, "uniform"),
            torch.randn_like: functools.partial(self._like, "normal"),
            torch.rand_like: functools.partial(self._like, "uniform"),
            torch.Tensor.normal_: functools.partial(self._in_place, "normal"),
            torch.Tensor.uniform_: functools.partial(self._in_place, "uniform")}

    def draw(self, func: Any, args: tuple, kwargs: dict) -> torch.Tensor | None:
        """The result of `func(*args, **kwargs)` drawn here, or None where PyTorch should draw it."""
        handler = self._handlers.get(func)
        if handler is None or kwargs.get("generator") is not None:
            return None
        return handler(args, {k: v for k, v in kwargs.items() if k != "generator"})

    def fill(self, kind: str, out: torch.Tensor) -> None:
        """`out` (contiguous float32 on the CPU) filled with fresh values of `kind` keyed by the default generator."""
        key = int(torch.randint(-2**63, 2**63 - 1, (1,), dtype=torch.int64).item()) & (2**64 - 1)
        self._fill[kind](out, out.numel(), key)

    def redraw(self, x: torch.Tensor, gen: torch.Generator, scale: float) -> torch.Tensor:
        """`task_runtime._redraw` on a CPU tensor: every distinct value replaced by a normal draw * `scale` keyed on
        its float32 bits and on a key drawn from `gen` (equal entries stay equal), in one parallel pass."""
        key = int(torch.randint(-2**63, 2**63 - 1, (1,), dtype=torch.int64, generator=gen).item()) & (2**64 - 1)
        flat = x.detach().reshape(-1).to(torch.float32).contiguous()
        fresh = torch.empty(flat.shape, dtype=torch.float32)
        self._redraw(flat, fresh, flat.numel(), key, float(scale))
        return fresh.reshape(x.shape).to(x.dtype)

    def _factory(self, kind: str, args: tuple, kwargs: dict) -> torch.Tensor | None:
        if set(kwargs) - _FACTORY_KWARGS or kwargs.get("layout", torch.strided) != torch.strided \
                or kwargs.get("pin_memory"):
            return None
        size = kwargs["size"] if "size" in kwargs else (args[0] if len(args) == 1 and not isinstance(args[0], int)
                                                        else args)
        if not isinstance(size, (tuple, list, torch.Size)) or not all(type(d) is int and d >= 0 for d in size):
            return None
        return self._new(kind, tuple(size), kwargs.get("dtype"), kwargs.get("device"), kwargs.get("requires_grad"))

    def _like(self, kind: str, args: tuple, kwargs: dict) -> torch.Tensor | None:
        if len(args) != 1 or not isinstance(args[0], torch.Tensor) or set(kwargs) - _LIKE_KWARGS \
                or kwargs.get("layout", torch.strided) != torch.strided or not args[0].is_contiguous() \
                or args[0].layout != torch.strided:
            return None
        src = args[0]
        return self._new(kind, tuple(src.shape), kwargs.get("dtype") or src.dtype, kwargs.get("device") or src.device,
                         kwargs.get("requires_grad"))

    def _new(self, kind: str, size: tuple[int, ...], dtype: Any, device: Any,
             requires_grad: Any) -> torch.Tensor | None:
        dtype = dtype or torch.get_default_dtype()
        if dtype not in _DTYPES or torch.device(device or torch.get_default_device()).type != "cpu" \
                or torch.Size(size).numel() < MIN_VALUES:
            return None
        out = torch.empty(size, dtype=torch.float32)
        self.fill(kind, out)
        out = out if dtype == torch.float32 else out.to(dtype)
        return out.requires_grad_() if requires_grad else out

    def _in_place(self, kind: str, args: tuple, kwargs: dict) -> torch.Tensor | None:
        if not args or not isinstance(args[0], torch.Tensor):
            return None
        t, params = args[0], list(args[1:])
        names = ("mean", "std") if kind == "normal" else ("from", "to")
        for name in names[len(params):]:
            if name in kwargs:
                params.append(kwargs.pop(name))
            else:
                break
        numbers = all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in params)
        if kwargs or len(params) > 2 or not numbers or t.device.type != "cpu" or t.dtype not in _DTYPES \
                or not t.is_contiguous() or t.numel() < MIN_VALUES or t.requires_grad:
            return None
        first, second = params + [0.0, 1.0][len(params):]  # PyTorch's defaults: mean 0, std 1; from 0, to 1
        mean, std = (first, second) if kind == "normal" else (first, second - first)
        if std < 0:  # PyTorch's own error for a negative std or from > to
            return None
        work = t if t.dtype == torch.float32 else torch.empty(t.shape, dtype=torch.float32)
        self.fill(kind, work)
        if (mean, std) != (0.0, 1.0):
            work.mul_(std).add_(mean)
        if work is not t:
            t.copy_(work)
        return t
