"""Native seed for tiny/row_sum: rows split across OpenMP threads in contiguous static blocks (one stream per
thread for the prefetcher), each row summed with UNROLL independent AVX-512 accumulators (enough to hide the add
latency behind the loads), its lines prefetched into L2 ahead (see AHEAD_BYTES), and a masked tail; a portable loop
with UNROLL x 16 scalar partial sums where AVX-512 is missing."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define UNROLL 8
/* Each line read is first prefetched into L2 AHEAD_BYTES ahead (past a row's end into the next one: the rows are
   contiguous): the hardware prefetchers alone seem to keep too few reads in flight here (paired against the loop
   without it: 0.98-1.15x in eleven runs, median 1.07x, loaded machine). Computed as integers: a prefetch past
   the end never faults, but C's pointer arithmetic past the array may not be done. */
#define AHEAD_BYTES 8192
#define AHEAD(p) ((const char*)((uintptr_t)(p) + AHEAD_BYTES))
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
static float sum_row(const float* restrict row, int64_t cols) {
#ifdef __AVX512F__
    __m512 acc[UNROLL];
    for (int u = 0; u < UNROLL; ++u) acc[u] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 * UNROLL <= cols; i += 16 * UNROLL) {
        for (int u = 0; u < UNROLL; ++u) _mm_prefetch(AHEAD(row + i + 16 * u), _MM_HINT_T1);
        for (int u = 0; u < UNROLL; ++u) acc[u] = _mm512_add_ps(acc[u], _mm512_loadu_ps(row + i + 16 * u));
    }
    for (; i < cols; i += 16) acc[0] = _mm512_add_ps(acc[0], _mm512_maskz_loadu_ps(tail16(cols - i), row + i));
    for (int u = 1; u < UNROLL; ++u) acc[0] = _mm512_add_ps(acc[0], acc[u]);
    return _mm512_reduce_add_ps(acc[0]);
#else
    float acc[UNROLL * 16] = {0}, total = 0.0f;
    int64_t i = 0;
    for (; i + UNROLL * 16 <= cols; i += UNROLL * 16)
        for (int j = 0; j < UNROLL * 16; ++j) acc[j] += row[i + j];
    for (; i < cols; ++i) total += row[i];
    for (int j = 0; j < UNROLL * 16; ++j) total += acc[j];
    return total;
#endif
}

void row_sum(const float* restrict x, float* restrict out, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) out[r] = sum_row(x + r * cols, cols);
}
"""
lib = load_c("row_sum", SOURCE, functions=["row_sum"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        out = torch.empty(x.shape[:-1], dtype=x.dtype)
        lib.row_sum(x, out, x.numel() // cols, cols)
        return out
