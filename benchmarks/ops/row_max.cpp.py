"""Native seed for ops/row_max: the max of each row and the first index holding it, in one pass over memory: rows split
across OpenMP threads in dynamic chunks of CHUNK rows; per row, SETS vectors of 16 AVX-512 lanes each keep their largest
value and where it was (a strict > keeps a lane's first occurrence), then the row's max is the largest lane and its
index the least index among the lanes holding it. Without AVX-512 the same lanes in gcc's generic vectors (built for
x86-64-v3 on a 2-CPU Intel Xeon VM, 2026-11-25: 2.1 ms where the scalar loop it replaced took 8.3 and eager 5.3; the
AVX-512 path 1.6); a scalar loop for rows longer than 2^31 (lane indices are 32-bit) and each row's last columns.

NaN, since 2026-11-28 on the AVX-512 path: a row holding a NaN gives NaN at its first NaN's index, as PyTorch's max does
(the loop ORs an unordered compare of each pair of vectors into a mask, and only a row where it fired is scanned for the
NaN); the loop went from one chain of compare and masked move to SETS side by side at the same time, which took it from
38 to 85 GB/s on one core from L1 (AMD Zen 4; 99 GB/s without the NaN check) and measured 1.35x per round at BATCH=256
(`scripts/bench_seed_ab.py --shape small`, row_max's tuple cut to its values) and 1.01x to 1.03x at the benchmark shape,
which is memory-bound. The portable path still skips NaN (its max is the largest number): the same check there (a sum of
each step's vectors) cost 20% from L1 and 5 to 6% per round at BATCH=256 on the x86-64-v3 build."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define CHUNK 64
#define LANES 8
#define SETS 4
#include <string.h>
typedef float vf8 __attribute__((vector_size(4 * LANES)));
typedef int32_t vi8 __attribute__((vector_size(4 * LANES)));
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
/* The first NaN of a row, which PyTorch's max returns where the row holds one: the compares in max_row skip NaN, and
   its loop notes whether one went by (one unordered compare per two vectors), so only such a row is scanned here. */
static int first_nan(const float* restrict row, int64_t cols, float* restrict value, int64_t* restrict index) {
    for (int64_t i = 0; i < cols; ++i)
        if (row[i] != row[i]) { *value = row[i]; *index = i; return 1; }
    return 0;
}
#endif
static void max_row(const float* restrict row, int64_t cols, float* restrict value, int64_t* restrict index) {
#ifdef __AVX512F__
    if (cols < INT32_MAX - SETS * 16) {
        /* SETS vectors side by side, so that no compare waits on the one before (one chain of compare and masked move
           took 6 to 7 cycles a vector from L1, AMD Zen 4); each lane keeps its largest value and the index of the
           step where it was (a strict > keeps the first), its own offset added at the end */
        __m512 best[SETS];
        __m512i at[SETS], base = _mm512_setzero_si512();
        const __m512i step = _mm512_set1_epi32(SETS * 16);
        __mmask16 nan = 0;
        for (int k = 0; k < SETS; ++k) { best[k] = _mm512_set1_ps(-INFINITY); at[k] = base; }
        int64_t i = 0;
        for (; i + SETS * 16 <= cols; i += SETS * 16) {
            __m512 v[SETS];
            for (int k = 0; k < SETS; ++k) {
                v[k] = _mm512_loadu_ps(row + i + k * 16);
                __mmask16 gt = _mm512_cmp_ps_mask(v[k], best[k], _CMP_GT_OQ);
                best[k] = _mm512_mask_mov_ps(best[k], gt, v[k]);
                at[k] = _mm512_mask_mov_epi32(at[k], gt, base);
            }
            for (int k = 0; k < SETS; k += 2)  /* unordered: a NaN in either */
                nan |= _mm512_cmp_ps_mask(v[k], v[k + 1 < SETS ? k + 1 : k], _CMP_UNORD_Q);
            base = _mm512_add_epi32(base, step);
        }
        for (; i < cols; i += 16) {  /* what is left, in 16-wide steps into the first set (the last one masked) */
            __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail16(cols - i), row + i);
            __mmask16 gt = _mm512_cmp_ps_mask(v, best[0], _CMP_GT_OQ);
            best[0] = _mm512_mask_mov_ps(best[0], gt, v);
            at[0] = _mm512_mask_mov_epi32(at[0], gt, _mm512_set1_epi32((int32_t)i));
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        }
        if (nan && first_nan(row, cols, value, index)) return;
        __m512 m = best[0];
        for (int k = 1; k < SETS; ++k) m = _mm512_max_ps(m, best[k]);
        float mx = _mm512_reduce_max_ps(m);
        int32_t where = INT32_MAX;
        const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int k = 0; k < SETS; ++k) {
            __mmask16 holds = _mm512_cmp_ps_mask(best[k], _mm512_set1_ps(mx), _CMP_EQ_OQ);
            __m512i idx = _mm512_add_epi32(at[k], _mm512_add_epi32(lane, _mm512_set1_epi32(k * 16)));
            if (holds) {
                int32_t w = _mm512_mask_reduce_min_epi32(holds, idx);
                where = w < where ? w : where;
            }
        }
        *value = mx;
        *index = where == INT32_MAX ? 0 : where;
        return;
    }
#endif
    float mx = -INFINITY;
    int64_t where = 0, i = 0;
    if (cols < INT32_MAX - SETS * LANES) {
        /* The AVX-512 path's lanes in gcc's generic vectors (one AVX2 register, two SSE or NEON ones), SETS of them
           side by side so that no compare waits on the one before: each lane keeps its largest value and its first
           index (a strict > and a bitwise select), then the least index among the lanes that hold the row's max. */
        vf8 best[SETS];
        vi8 at[SETS], idx[SETS];
        for (int k = 0; k < SETS; ++k)
            for (int l = 0; l < LANES; ++l) { best[k][l] = -INFINITY; at[k][l] = 0; idx[k][l] = k * LANES + l; }
        for (; i + SETS * LANES <= cols; i += SETS * LANES) {
            for (int k = 0; k < SETS; ++k) {
                vf8 v;
                memcpy(&v, row + i + k * LANES, sizeof v);
                vi8 gt = v > best[k];
                best[k] = (vf8)(((vi8)v & gt) | ((vi8)best[k] & ~gt));
                at[k] = (idx[k] & gt) | (at[k] & ~gt);
                idx[k] += SETS * LANES;
            }
        }
        for (int k = 0; k < SETS; ++k)
            for (int l = 0; l < LANES; ++l) mx = best[k][l] > mx ? best[k][l] : mx;
        where = INT32_MAX;
        for (int k = 0; k < SETS; ++k)
            for (int l = 0; l < LANES; ++l)
                if (best[k][l] == mx && at[k][l] < where) where = at[k][l];
        if (where == INT32_MAX) where = 0;
    }
    for (; i < cols; ++i)
        if (row[i] > mx) { mx = row[i]; where = i; }
    *value = mx;
    *index = where;
}

void row_max(const float* restrict x, float* restrict values, int64_t* restrict indices, int64_t rows, int64_t cols) {
    #pragma omp parallel for schedule(dynamic, CHUNK)
    for (int64_t r = 0; r < rows; ++r) max_row(x + r * cols, cols, values + r, indices + r);
}
"""
lib = load_c("row_max", SOURCE, functions=["row_max"], flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.contiguous()
        cols = x.shape[-1]
        values = torch.empty(x.shape[:-1], dtype=x.dtype)
        indices = torch.empty(x.shape[:-1], dtype=torch.int64)
        lib.row_max(x, values, indices, x.numel() // cols, cols)
        return values, indices
