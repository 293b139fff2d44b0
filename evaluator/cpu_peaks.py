"""This CPU's speed of light, measured: copy bandwidth and peak fp32 FLOP/s, with PyTorch's intra-op thread count.

A GPU's roofline comes from its datasheet (`agents/device_facts.py`); a CPU's cannot (clocks, memory channels and
neighbours vary), so it is measured once per device and kept in the store (`Store.set_device_peaks`):

- copy bandwidth: the best of several OpenMP copies of a large array (each array `copy_bytes`, well beyond the last
  level cache), counting bytes read plus bytes written, as STREAM's "Copy" does;
- peak FLOP/s: the best of several runs of a loop of independent vector FMAs (enough accumulators to cover the FMA
  latency, as wide as the compiler's `-march=native` vectors), two FLOPs per lane per FMA.

Both kernels are built with `load_c` (trusted code: ours), so the figures come from the same compiler and flags as
the native kernels they judge. On a shared machine they are a floor of what the hardware can do.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from evaluator.native import load_c

COPY_BYTES = 64 << 20
FMA_ITERS = 20_000_000
REPEATS = 7

SOURCE = r"""
#include <stdint.h>
#define ACC 12
#define LANES 16
void copy_floats(const float* restrict src, float* restrict dst, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
/* Each thread runs `iters` steps of ACC x LANES independent FMAs; returns the sum of the accumulators (kept, so the
   work cannot be optimised away). The FLOPs done are 2 * ACC * LANES * iters * threads. */
double fma_loop(int64_t iters, float* restrict threads_out) {
    double keep = 0.0;
    int threads = 0;
    #pragma omp parallel reduction(+:keep, threads)
    {
        float acc[ACC][LANES];
        for (int r = 0; r < ACC; ++r)
            for (int l = 0; l < LANES; ++l) acc[r][l] = 1e-3f * (float)(r * LANES + l);
        const float a = 0.999999f, b = 1e-7f;
        for (int64_t it = 0; it < iters; ++it)
            for (int r = 0; r < ACC; ++r) {
                #pragma omp simd
                for (int l = 0; l < LANES; ++l) acc[r][l] = acc[r][l] * a + b;
            }
        for (int r = 0; r < ACC; ++r)
            for (int l = 0; l < LANES; ++l) keep += acc[r][l];
        threads += 1;
    }
    threads_out[0] = (float)threads;
    return keep;
}
"""
FLOPS_PER_STEP = 2 * 12 * 16  # 2 * ACC * LANES


@dataclass(frozen=True, slots=True)
class CpuPeaks:
    copy_gbps: float
    peak_gflops: float
    threads: int


def measure_cpu_peaks(copy_bytes: int = COPY_BYTES, fma_iters: int = FMA_ITERS, repeats: int = REPEATS) -> CpuPeaks:
    """Measure this machine's copy bandwidth and peak fp32 FLOP/s (best of `repeats`); takes a few seconds."""
    lib = load_c("cpu_peaks", SOURCE, functions=["copy_floats", "fma_loop"],
                 flags=["-O3", "-march=native", "-fopenmp"])
    n = max(1, copy_bytes // 4)
    src, dst = torch.ones(n), torch.zeros(n)  # touched before timing: no page faults are timed
    lib.copy_floats(src, dst, n)
    copy_s = _best_s(lambda: lib.copy_floats(src, dst, n), repeats)
    threads = torch.zeros(1)
    lib.fma_loop(max(1, fma_iters // 100), threads)
    fma_s = _best_s(lambda: lib.fma_loop(fma_iters, threads), repeats)
    used = max(1, int(threads.item()))
    return CpuPeaks(copy_gbps=2 * n * 4 / copy_s / 1e9, peak_gflops=FLOPS_PER_STEP * fma_iters * used / fma_s / 1e9,
                    threads=used)


def _best_s(call, repeats: int) -> float:
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best
