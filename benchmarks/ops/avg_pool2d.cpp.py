"""Native seed for ops/avg_pool2d. The benchmark's window (3x3, stride 2, padding 1) has an AVX-512 path that keeps
everything in registers: one OpenMP iteration per output row (rows split into one contiguous band per thread, so each
thread streams its part of the input once), and per 32 input columns the window's input rows summed in two vectors
(masked loads past the width read zeros: the padding), split into their even and odd columns by two permutes, and
each output's window is even + odd + the odd column before it (one lane shift that carries across blocks), times 1 /
the count of real pixels (count_include_pad=False: the column counts' reciprocals computed once per call); a large
output goes plane by plane through an L1 buffer and out with non-temporal stores (see STREAM_FROM_BYTES). Without
AVX-512 the same window, row prefetch and streaming run with gcc's generic vectors of 8 floats, 16 input columns a
step (pool_row_3s2's #else; AVX2 built for x86-64-v3, SSE or NEON elsewhere; the last columns through a zero-padded
block). That replaced the general path there, which left the portable build at 40% of the bound: per output row a
copy of the rows into a line, k passes over it and a strided scalar loop for the outputs, with no prefetching
(2026-11-28, AMD EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU, `scripts/bench_seed_ab.py --tasks
avg_pool2d --march x86-64-v3 --before HEAD --budget-s 4`: 2.11 -> 0.97 ms, 2.18x paired, roofline 40% -> 88%; the
AVX-512 build unchanged at ~93%). Other windows take the general path: one OpenMP iteration per output row of a
plane, the window's input rows summed column by column into a zero-padded line, then the stride-1 window sums along
that line, then every stride-th one scaled. Returns nonzero when the per-thread lines cannot be allocated."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#define CHUNK 16
/* An output of STREAM_FROM_BYTES or more whose planes are whole cache lines (the benchmark's 56 x 56 outputs are 196)
   is pooled plane by plane into a per-thread buffer in L1 and written with non-temporal stores: it outgrows the
   caches anyway, and streaming it to memory saves the read of each output line that an ordinary store makes first. */
#define STREAM_FROM_BYTES (4 << 20)
/* Input rows [first, first + 2) of the (planes x h, w) input into L1, PREFETCH_ROWS output rows ahead of the one
   being pooled: a window reads three rows 448 bytes apart at the benchmark shape, in turns, a pattern the hardware
   prefetchers follow poorly (the pooling ran at a fifth of its in-cache speed on input from memory). */
#define PREFETCH_ROWS 8
static inline void prefetch_rows(const float* x, int64_t first, int64_t total_rows, int64_t w) {
    for (int64_t r = first; r < first + 2 && r < total_rows; ++r)
        for (int64_t i = 0; i < w; i += 16) __builtin_prefetch(x + r * w + i, 0, 3);
}
#ifdef __AVX512F__
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
/* The 3x3, stride 2, padding 1 window: output ox covers input columns 2ox - 1 .. 2ox + 1. Per block of 32 input
   columns c .. c + 31 (16 outputs): E = columns c, c + 2, ..., O = columns c + 1, c + 3, ...; output c / 2 + i is
   O[i - 1] + E[i] + O[i], where O[-1] is the previous block's last odd column (zero before the first block). */
static void pool_row_3s2(const float* restrict src, float* restrict dst, const float* restrict inv_x, int64_t h,
                         int64_t w, int64_t ow, int64_t oy) {
    int64_t y0 = 2 * oy - 1, y1 = y0 + 3 < h ? y0 + 3 : h;
    y0 = y0 > 0 ? y0 : 0;
    const int64_t rows = y1 - y0;
    const float* restrict r0 = src + y0 * w;
    const float* restrict r1 = r0 + w;
    const float* restrict r2 = r1 + w;
    const __m512 vy = _mm512_set1_ps(1.0f / (float)rows);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 carry = _mm512_setzero_ps();
    for (int64_t ox = 0, c = 0; ox < ow; ox += 16, c += 32) {
        __mmask16 kl = tail16(w - c), kh = tail16(w - c - 16 > 0 ? w - c - 16 : 0);
        __m512 lo = _mm512_maskz_loadu_ps(kl, r0 + c), hi = _mm512_maskz_loadu_ps(kh, r0 + c + 16);
        if (rows > 1) {
            lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(kl, r1 + c));
            hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(kh, r1 + c + 16));
        }
        if (rows > 2) {
            lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(kl, r2 + c));
            hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(kh, r2 + c + 16));
        }
        __m512 e = _mm512_permutex2var_ps(lo, even, hi), o = _mm512_permutex2var_ps(lo, odd, hi);
        __m512 prev = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(o), _mm512_castps_si512(carry), 15));
        carry = o;
        __m512 sum = _mm512_add_ps(_mm512_add_ps(prev, e), o);
        if (ox + 16 <= ow) {
            _mm512_storeu_ps(dst + ox, _mm512_mul_ps(_mm512_mul_ps(sum, _mm512_loadu_ps(inv_x + ox)), vy));
        } else {
            __mmask16 k = tail16(ow - ox);
            _mm512_mask_storeu_ps(dst + ox, k, _mm512_mul_ps(_mm512_mul_ps(sum, _mm512_maskz_loadu_ps(k, inv_x + ox)), vy));
        }
    }
}
#define STREAM_LANES 16
static inline void stream_lanes(float* dst, const float* src) { _mm512_stream_ps(dst, _mm512_load_ps(src)); }
#else
/* Without AVX-512 the same window in gcc's generic vectors of 8 floats (one AVX2 register built for x86-64-v3, two
   SSE or NEON registers elsewhere), 16 input columns (8 outputs) a step: the rows summed in two vectors, split into
   even and odd columns by two shuffles, and the odd column before each output shifted in from the previous step. */
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));  /* for unaligned loads and stores */
typedef int32_t v8i __attribute__((vector_size(32)));
#if defined(__clang__)
#define EVEN8(a, b) __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14)
#define ODD8(a, b) __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15)
#define PREV8(c, o) __builtin_shufflevector(c, o, 7, 8, 9, 10, 11, 12, 13, 14)
#else
#define EVEN8(a, b) __builtin_shuffle(a, b, (v8i){0, 2, 4, 6, 8, 10, 12, 14})
#define ODD8(a, b) __builtin_shuffle(a, b, (v8i){1, 3, 5, 7, 9, 11, 13, 15})
#define PREV8(c, o) __builtin_shuffle(c, o, (v8i){7, 8, 9, 10, 11, 12, 13, 14})
#endif
#define load8(p) (*(const v8f_u*)(p))
static void pool_row_3s2(const float* restrict src, float* restrict dst, const float* restrict inv_x, int64_t h,
                         int64_t w, int64_t ow, int64_t oy) {
    int64_t y0 = 2 * oy - 1, y1 = y0 + 3 < h ? y0 + 3 : h;
    y0 = y0 > 0 ? y0 : 0;
    const int64_t rows = y1 - y0;
    const float* restrict r0 = src + y0 * w;
    const float* restrict r1 = r0 + w;
    const float* restrict r2 = r1 + w;
    const float fy = 1.0f / (float)rows;
    const v8f vy = {fy, fy, fy, fy, fy, fy, fy, fy};
    v8f carry = {0};
    int64_t ox = 0, c = 0;
    for (; c + 16 <= w; c += 16, ox += 8) {
        v8f lo = load8(r0 + c), hi = load8(r0 + c + 8);
        if (rows > 1) {
            lo += load8(r1 + c);
            hi += load8(r1 + c + 8);
        }
        if (rows > 2) {
            lo += load8(r2 + c);
            hi += load8(r2 + c + 8);
        }
        v8f e = EVEN8(lo, hi), o = ODD8(lo, hi), prev = PREV8(carry, o);
        carry = o;
        *(v8f_u*)(dst + ox) = (prev + e + o) * load8(inv_x + ox) * vy;
    }
    if (ox < ow) {  /* the last w - c < 16 columns, summed into a zero-padded block (the padding) */
        float block[16] = {0}, sums[8];
        for (int64_t i = 0; c + i < w; ++i) {
            float v = r0[c + i];
            if (rows > 1) v += r1[c + i];
            if (rows > 2) v += r2[c + i];
            block[i] = v;
        }
        v8f lo = load8(block), hi = load8(block + 8), o = ODD8(lo, hi);
        v8f sum = PREV8(carry, o) + EVEN8(lo, hi) + o;
        memcpy(sums, &sum, sizeof sums);
        for (int64_t i = 0; ox + i < ow; ++i) dst[ox + i] = sums[i] * inv_x[ox + i] * fy;
    }
}
#if defined(__AVX__)
#define STREAM_LANES 8
static inline void stream_lanes(float* dst, const float* src) { _mm256_stream_ps(dst, _mm256_load_ps(src)); }
#elif defined(__SSE2__)
#define STREAM_LANES 4
static inline void stream_lanes(float* dst, const float* src) { _mm_stream_ps(dst, _mm_load_ps(src)); }
#endif
#endif
void pool_row(const float* restrict src, float* restrict dst, float* restrict line, float* restrict sums,
              const float* restrict inv_x, int64_t h, int64_t w, int64_t ow, int64_t k, int64_t stride, int64_t pad,
              int64_t oy) {
    int64_t y0 = oy * stride - pad, y1 = y0 + k < h ? y0 + k : h;
    y0 = y0 > 0 ? y0 : 0;
    float* restrict mid = line + pad;  /* line[0, pad) and line[pad + w, ...) stay zero */
    const float* restrict first = src + y0 * w;
    #pragma omp simd
    for (int64_t x = 0; x < w; ++x) mid[x] = first[x];
    for (int64_t y = y0 + 1; y < y1; ++y) {
        const float* restrict in = src + y * w;
        #pragma omp simd
        for (int64_t x = 0; x < w; ++x) mid[x] += in[x];
    }
    /* window starts that some output uses, in padded coordinates, rounded up to whole vectors (the line's zero
       padding covers the extra starts, whose sums no output reads) */
    int64_t span = ((ow - 1) * stride + 1 + 15) / 16 * 16;
    #pragma omp simd
    for (int64_t j = 0; j < span; ++j) sums[j] = line[j];
    for (int64_t d = 1; d < k; ++d) {
        #pragma omp simd
        for (int64_t j = 0; j < span; ++j) sums[j] += line[j + d];
    }
    float inv_y = 1.0f / (float)(y1 - y0);
    int64_t ox = 0;
#ifdef __AVX512F__
    if (stride == 2) {  /* the even window starts of 32 sums are 16 outputs: one permute, no strided loop */
        const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512 vy = _mm512_set1_ps(inv_y);
        for (; ox + 16 <= ow; ox += 16) {
            __m512 picked = _mm512_permutex2var_ps(_mm512_loadu_ps(sums + 2 * ox), even,
                                                   _mm512_loadu_ps(sums + 2 * ox + 16));
            _mm512_storeu_ps(dst + ox, _mm512_mul_ps(_mm512_mul_ps(picked, _mm512_loadu_ps(inv_x + ox)), vy));
        }
    }
#endif
    for (; ox < ow; ++ox) dst[ox] = sums[ox * stride] * inv_x[ox] * inv_y;
}

int avg_pool2d(const float* restrict x, float* restrict out, int64_t planes, int64_t h, int64_t w, int64_t oh,
               int64_t ow, int64_t k, int64_t stride, int64_t pad) {
    int64_t span = ow > 0 ? ((ow - 1) * stride + 1 + 15) / 16 * 16 + 32 : 16, padded = span + k + w + 2 * pad;
    float* inv_x = malloc(sizeof(float) * (size_t)(ow > 0 ? ow : 1));
    if (inv_x == NULL) return 1;
    for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t x0 = ox * stride - pad, x1 = x0 + k < w ? x0 + k : w;
        x0 = x0 > 0 ? x0 : 0;
        inv_x[ox] = 1.0f / (float)(x1 - x0);
    }
    int failed = 0;
    if (k == 3 && stride == 2 && pad == 1 && ow == (w + 1) / 2) {
        const int64_t plane_out = oh * ow;
#ifdef STREAM_LANES
        if (planes * plane_out * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && plane_out % 16 == 0
            && (uintptr_t)out % 64 == 0) {
            #pragma omp parallel
            {
                float* buf = aligned_alloc(64, (size_t)plane_out * sizeof(float));
                #pragma omp for schedule(static) nowait
                for (int64_t p = 0; p < planes; ++p) {
                    float* dst = buf != NULL ? buf : out + p * plane_out;  /* no buffer: ordinary stores */
                    for (int64_t oy = 0; oy < oh; ++oy) {
                        prefetch_rows(x, p * h + 2 * (oy + PREFETCH_ROWS), planes * h, w);
                        pool_row_3s2(x + p * h * w, dst + oy * ow, inv_x, h, w, ow, oy);
                    }
                    if (buf != NULL)
                        for (int64_t i = 0; i < plane_out; i += STREAM_LANES)
                            stream_lanes(out + p * plane_out + i, buf + i);
                }
                _mm_sfence();
                free(buf);
            }
            free(inv_x);
            return 0;
        }
#endif
        #pragma omp parallel for schedule(static)
        for (int64_t po = 0; po < planes * oh; ++po) {
            int64_t p = po / oh, oy = po % oh;
            float* dst = out + p * plane_out;
            prefetch_rows(x, p * h + 2 * (oy + PREFETCH_ROWS), planes * h, w);
            pool_row_3s2(x + p * h * w, dst + oy * ow, inv_x, h, w, ow, oy);
        }
        free(inv_x);
        return 0;
    }
    #pragma omp parallel reduction(|:failed)
    {
        float* line = calloc((size_t)padded, sizeof(float));
        float* sums = malloc(sizeof(float) * (size_t)span);
        if (line == NULL || sums == NULL) failed = 1;
        else {
            #pragma omp for schedule(static, CHUNK)
            for (int64_t po = 0; po < planes * oh; ++po) {
                int64_t p = po / oh, oy = po % oh;
                pool_row(x + p * h * w, out + p * oh * ow + oy * ow, line, sums, inv_x, h, w, ow, k, stride, pad, oy);
            }
        }
        free(line);
        free(sums);
    }
    free(inv_x);
    return failed;
}
"""
lib = load_c("avg_pool2d", SOURCE, functions=["avg_pool2d"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, channels, h, w = x.shape
        k, s, p = self.kernel_size, self.stride, self.padding
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        out = torch.empty((batch, channels, oh, ow), dtype=x.dtype)
        if lib.avg_pool2d(x, out, batch * channels, h, w, oh, ow, k, s, p) != 0:
            raise MemoryError("avg_pool2d: no memory for the per-thread line buffers")
        return out
