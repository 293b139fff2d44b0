"""This CPU's speed of light, measured: copy bandwidth and peak fp32 FLOP/s, with PyTorch's intra-op thread count.

A GPU's roofline comes from its datasheet (`agents/device_facts.py`); a CPU's cannot (clocks, memory channels and
neighbours vary), so it is measured once per device and kept in the store (`Store.set_device_peaks`):

- copy bandwidth: the best of several OpenMP copies of `copy_bytes` (half read, half written, as STREAM's "Copy"
  counts), each timed as the evaluator times a kernel (`CallTimer`): its input pushed out of the caches first and
  its output after (their lines flushed, `line_flush.py`, since 2026-11-25), the OpenMP pool asleep until the call
  wakes it (passive waiting), the timer's own cost taken off. `copy_bytes` is
  64 MiB moved, about the median memory-bound built-in task's bytes; the output is written once before timing and
  reused, so page faults (the allocator's cost, not the memory's) are not counted;
- peak FLOP/s: the best of several runs of a loop of independent vector FMAs (enough accumulators to cover the FMA
  latency, as wide as the compiler's `-march=native` vectors), two FLOPs per lane per FMA.

Both kernels are built with `load_c` (trusted code: ours), so the figures come from the same compiler and flags as
the native kernels they judge. On a shared machine they are a floor of what the hardware can do.

Why the copy is timed as a kernel is (until 2026-11-24 it was the best of seven back-to-back copies of two 64 MiB
arrays, timed bare): every timed kernel pays a fixed cost per call that no kernel can avoid under the evaluator's
rules (waking the sleeping pool and joining it, 0.09-0.22 ms on this loaded 2-core VM, against 0.7-1.5 ms for a
memory-bound task's bytes), and it starts with cold caches after the eviction. A bare copy of 128 MiB back to back
hid the fixed cost (the eviction alone changes little at that size), so it measured a bandwidth that a kernel of
the tasks' size, timed by this evaluator, could not reach even when it ran as fast as a copy of its own bytes
(docs/EVALUATOR.md, "Timing"; `scripts/bench_copy.py` times each difference). Best-of, not median: one quiet moment
among the repeats is enough, where a median taken once at start-up on a loaded machine would be low, and a low
bandwidth makes every kernel look closer to the bound than it is.

The copy uses ordinary stores, as most seeds do: the read-for-ownership of the destination happens but is not
counted (STREAM's convention), exactly as a kernel's bound counts its output once (a seed that streams a large
output past the caches saves that read, and may pass 100% of this bound honestly). `copy_like` is the same copy sized
to one task's bytes, for timing beside a kernel under the same load, threads and allocator state (a fresh output per
call, as a seed allocates its result): a shared machine moves a best-of peak and a median kernel time apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from evaluator.harness_library import local_flush
from evaluator.native import NativeLibrary, load_c
from evaluator.worker.timing import CallTimer

COPY_BYTES = 64 << 20  # moved: 32 MiB read, 32 MiB written
FMA_ITERS = 20_000_000
REPEATS = 7
COPY_REPEATS = 15  # each a cold call of about 1.5 ms between flushes of its lines of about 1 ms

SOURCE = r"""
#include <stdint.h>
#define ACC 12
#define LANES 16
void copy_floats(const float* restrict src, float* restrict dst, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
/* Each thread runs `iters` steps of ACC independent vector FMAs (enough chains to cover the FMA unit's latency on
   both pipes) and returns the sum of its accumulators (kept, so the work cannot be optimised away). Written with
   intrinsics: left to the compiler, the same loop over a float array vectorised at half width on this machine (94
   GFLOP/s measured where a GEMM micro-kernel reached 270 on one core). out[0]: threads, out[1]: lanes per FMA. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define VEC __m512
#define VLANES 16
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSUM(v) _mm512_reduce_add_ps(v)
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define VEC __m256
#define VLANES 8
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
static float VSUM(__m256 v) { float t[8]; _mm256_storeu_ps(t, v); return t[0]+t[1]+t[2]+t[3]+t[4]+t[5]+t[6]+t[7]; }
#else
#define VEC float
#define VLANES 1
#define VSET(x) (x)
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VSUM(v) (v)
#endif
double fma_loop(int64_t iters, float* restrict out) {
    double keep = 0.0;
    int threads = 0;
    #pragma omp parallel reduction(+:keep, threads)
    {
        VEC acc[ACC];
        for (int r = 0; r < ACC; ++r) acc[r] = VSET(1e-3f * (float)(r + 1));
        const VEC a = VSET(0.999999f), b = VSET(1e-7f);
        for (int64_t it = 0; it < iters; ++it) {
            #pragma GCC unroll 12
            for (int r = 0; r < ACC; ++r) acc[r] = VFMA(acc[r], a, b);
        }
        for (int r = 0; r < ACC; ++r) keep += VSUM(acc[r]);
        threads += 1;
    }
    out[0] = (float)threads;
    out[1] = (float)VLANES;
    return keep;
}
"""
FMAS_PER_STEP = 12  # ACC: each FMA is 2 FLOPs per lane
# Names how the figures below are measured; change it whenever the method changes, so that a store holding peaks
# measured the old way measures them again (`opforge/run/peaks.py`) instead of judging new kernels against them.
METHOD = "timed-copy-64MiB-flushed-lines/fma-intrinsics"


@dataclass(frozen=True, slots=True)
class CpuPeaks:
    copy_gbps: float
    peak_gflops: float
    threads: int
    method: str = METHOD


def measure_cpu_peaks(copy_bytes: int = COPY_BYTES, fma_iters: int = FMA_ITERS, repeats: int = REPEATS,
                      copy_repeats: int = COPY_REPEATS) -> CpuPeaks:
    """Measure this machine's copy bandwidth and peak fp32 FLOP/s (best of their repeats); takes a second or two."""
    lib = _library()
    n = max(1, copy_bytes // 8)  # floats per array
    copy_s = _best_copy_s(lib, n, copy_repeats)
    facts = torch.zeros(2)  # threads, lanes per FMA
    lib.fma_loop(max(1, fma_iters // 100), facts)
    fma_s = _best_s(lambda: lib.fma_loop(fma_iters, facts), repeats)
    used, lanes = max(1, int(facts[0].item())), max(1, int(facts[1].item()))
    flops = 2 * lanes * FMAS_PER_STEP * fma_iters * used
    return CpuPeaks(copy_gbps=2 * n * 4 / copy_s / 1e9, peak_gflops=flops / fma_s / 1e9, threads=used)


def _best_copy_s(lib: NativeLibrary, n: int, repeats: int) -> float:
    """The best of `repeats` copies of `n` floats, each timed by the evaluator's timer as a kernel's call is: caches
    evicted before every call, whatever its size (`cold_from_bytes=0`), the pool asleep until the call wakes it."""
    src, dst = torch.ones(n), torch.zeros(n)  # both touched before timing: no page faults are timed

    def copy(source: torch.Tensor) -> torch.Tensor:
        lib.copy_floats(source, dst, n)
        return dst

    copy(src)
    timer = CallTimer(torch.device("cpu"), cold_from_bytes=0, flush=local_flush())
    timer.calibrate()
    return min(timer.time_call(copy, [src])[0] for _ in range(max(1, repeats))) / 1e3


def copy_like(total_bytes: int) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    """A function and its source tensor: called on it, the function moves `total_bytes` as the peak's copy does (half
    read from the source, half written) into a fresh output each call (`torch.empty`, as a native seed allocates its
    result), and returns that output. The source is an argument so that a timer treats it as a kernel's input."""
    lib = _library()
    n = max(1, total_bytes // 8)

    def copy(src: torch.Tensor) -> torch.Tensor:
        dst = torch.empty_like(src)
        lib.copy_floats(src, dst, src.numel())
        return dst

    return copy, torch.ones(n)


def _library() -> NativeLibrary:
    return load_c("cpu_peaks", SOURCE, functions=["copy_floats", "fma_loop"],
                  flags=["-O3", "-march=native", "-fopenmp"])


def _best_s(call, repeats: int) -> float:
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best
