"""Native seed for ops/col_sum: x.sum(dim=0) of a (rows, cols) fp32 tensor, reading x once, row by row (contiguous
streams): each OpenMP thread takes a contiguous band of rows and adds BLOCK_ROWS rows at a time into a float row of
column sums (cols floats: L1 at the benchmark shape), which then goes into the thread's double sums; the threads'
double sums are added at the end. AVX-512 with a masked tail, a portable loop where AVX-512 is missing; that one
also prefetches the band PREFETCH_FLOATS ahead, without which its build for x86-64-v3 read memory at about 60% of the
copy bandwidth (2026-11-28, AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU, `scripts/bench_seed_ab.py
--tasks col_sum --march x86-64-v3 --before HEAD --budget-s 4`: 1.48 -> 0.94 ms, 1.57x paired, roofline 58% -> 91%;
the AVX-512 build, which does not prefetch, unchanged at ~99%). Returns nonzero when the scratch rows cannot be
allocated."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <omp.h>
#define BLOCK_ROWS 64
/* Without AVX-512, the band's lines are prefetched into L1 PREFETCH_FLOATS floats (4 KiB: two rows at the benchmark
   shape) ahead of the row being added: built for x86-64-v3 on a Zen 4 (2026-11-28), the plain loop (vectorised,
   AVX2) read memory at about 60% of the copy bandwidth without it and ~90% with it. The distance is sensitive there:
   768, 1040, 1280 and 2048 floats were 10-30% slower than 1024 in paired runs. The AVX-512 loop, at ~85-100%
   without, lost ~10% with it, so it does not prefetch. */
#define PREFETCH_FLOATS 1024
#ifdef __AVX512F__
#include <immintrin.h>
/* exp of 16 floats: n = round(x log2 e), r = x - n ln2 (two-part ln2), a degree-6 polynomial for e^r on
   [-ln2/2, ln2/2] and scalef for the 2^n (relative error about 2e-7; underflows to 0 below -104). */
static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.7f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504089f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606820309417e-06f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
#endif
static void add_row(float* restrict acc, const float* restrict row, int64_t cols) {
#ifdef __AVX512F__
    int64_t c = 0;
    for (; c + 64 <= cols; c += 64) {
        _mm512_storeu_ps(acc + c, _mm512_add_ps(_mm512_loadu_ps(acc + c), _mm512_loadu_ps(row + c)));
        _mm512_storeu_ps(acc + c + 16, _mm512_add_ps(_mm512_loadu_ps(acc + c + 16), _mm512_loadu_ps(row + c + 16)));
        _mm512_storeu_ps(acc + c + 32, _mm512_add_ps(_mm512_loadu_ps(acc + c + 32), _mm512_loadu_ps(row + c + 32)));
        _mm512_storeu_ps(acc + c + 48, _mm512_add_ps(_mm512_loadu_ps(acc + c + 48), _mm512_loadu_ps(row + c + 48)));
    }
    for (; c < cols; c += 16) {
        __mmask16 k = tail16(cols - c);
        __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(k, acc + c), _mm512_maskz_loadu_ps(k, row + c));
        _mm512_mask_storeu_ps(acc + c, k, sum);
    }
#else
    for (int64_t c = 0; c < cols; ++c) acc[c] += row[c];
#endif
}

int col_sum(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    int threads = omp_get_max_threads(), failed = 0;
    double* partial = calloc((size_t)threads * (size_t)cols, sizeof(double));
    if (partial == NULL) return 1;
    #pragma omp parallel num_threads(threads) reduction(|:failed)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        double* restrict total = partial + (int64_t)t * cols;
        float* restrict acc = malloc(sizeof(float) * (size_t)(cols > 0 ? cols : 1));
        if (acc == NULL) failed = 1;
        else {
#ifndef __AVX512F__
            int64_t ahead = r0 * cols;  /* the band's next line to prefetch, as an offset into x */
#endif
            for (int64_t b = r0; b < r1; b += BLOCK_ROWS) {
                int64_t e = b + BLOCK_ROWS < r1 ? b + BLOCK_ROWS : r1;
                for (int64_t c = 0; c < cols; ++c) acc[c] = 0.0f;
                for (int64_t r = b; r < e; ++r) {
#ifndef __AVX512F__
                    int64_t until = (r + 1) * cols + PREFETCH_FLOATS < r1 * cols ? (r + 1) * cols + PREFETCH_FLOATS
                                                                                 : r1 * cols;
                    for (; ahead < until; ahead += 16) __builtin_prefetch(x + ahead, 0, 3);
#endif
                    add_row(acc, x + r * cols, cols);
                }
                for (int64_t c = 0; c < cols; ++c) total[c] += (double)acc[c];
            }
        }
        free(acc);
    }
    for (int64_t c = 0; c < cols; ++c) {
        double s = 0.0;
        for (int t = 0; t < threads; ++t) s += partial[(int64_t)t * cols + c];
        out[c] = (float)s;
    }
    free(partial);
    return failed;
}
"""
lib = load_c("col_sum", SOURCE, functions=["col_sum"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[1:], dtype=x.dtype)
        if lib.col_sum(x, out, x.shape[0], x[0].numel()) != 0:
            raise MemoryError("col_sum: no memory for the per-thread column sums")
        return out
