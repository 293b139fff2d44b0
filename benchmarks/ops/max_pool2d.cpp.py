"""Native seed for ops/max_pool2d. The benchmark's window (3x3, stride 2, padding 1) has an AVX-512 path that keeps
everything in registers: one OpenMP iteration per output row (rows split into one contiguous band per thread, so each
thread streams its part of the input once), and per 32 input columns the max of the window's input rows in two
vectors (masked loads past the width read -inf: padding never wins, as in PyTorch), split into their even and odd
columns by two permutes, and each output's window is the max of even, odd and the odd column before it (one lane
shift that carries across blocks); a large output goes plane by plane through an L1 buffer and out with non-temporal
stores (see STREAM_FROM_BYTES). Without AVX-512 the same window took a plain-C path that gcc vectorised (the rows'
max into a line, then a strided pass for the outputs; built for x86-64-v3 on a 2-CPU Intel Xeon VM, 2026-11-25: 7.8
-> 2.4 ms, eager 21 ms); it now runs the AVX-512 path's scheme, row prefetch and streaming with gcc's generic vectors
of 8 floats, 16 input columns a step (pool_row_3s2's #else; AVX2 built for x86-64-v3, SSE or NEON elsewhere; the
last columns through a block padded with -inf), and streams its output as the AVX-512 path does (2026-11-28, AMD
EPYC Zen 4, x86-64-v3 build as a proxy for an AVX2 CPU, `scripts/bench_seed_ab.py --tasks max_pool2d --march
x86-64-v3 --before HEAD --budget-s 4`: 1.96 -> 0.98 ms, 2.07x paired, roofline 43% -> 86%; the AVX-512 build
unchanged at ~92%). Other windows take the general path: the max of the window's rows column by column into a line
(vectorised), then each window's max along it. On every path a NaN in a window makes its output NaN, as in PyTorch
(see max_nan16, max8, MAXV and MAX)."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define CHUNK 16
/* NaN wins, as in PyTorch's max pooling: a NaN anywhere in a window makes its output NaN. NaN is tested on the bits
   (an exponent of all ones and a mantissa that is not zero). */
static inline int is_nan(float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return (bits & 0x7FFFFFFFu) > 0x7F800000u;
}
#define MAX(a, b) ((b) > (a) || is_nan(b) ? (b) : (a))
/* MAX with the NaN test as a compare (b != b), which vectorises (with -fno-trapping-math) */
#define MAXV(a, b) ((b) > (a) || (b) != (b) ? (b) : (a))
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
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
/* max(a, b) that keeps a NaN of either: vmaxps returns its second operand when either is NaN, so it is asked only
   in the lanes where a is not NaN (an ordered compare of a with itself); the others keep a. Two instructions where
   a plain max takes one. Not for -ffast-math builds: gcc may swap vmaxps' operands there (measured: such a build
   lost 2 of 7 NaN outputs; MAX's bit test kept them). */
static inline __m512 max_nan16(__m512 a, __m512 b) {
    return _mm512_mask_max_ps(a, _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a, b);
}
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
/* The 3x3, stride 2, padding 1 window: output ox covers input columns 2ox - 1 .. 2ox + 1. Per block of 32 input
   columns c .. c + 31 (16 outputs): E = columns c, c + 2, ..., O = columns c + 1, c + 3, ...; output c / 2 + i is
   max(O[i - 1], E[i], O[i]), where O[-1] is the previous block's last odd column (-inf before the first block). */
static void pool_row_3s2(const float* restrict src, float* restrict dst, int64_t h, int64_t w, int64_t ow,
                         int64_t oy) {
    int64_t y0 = 2 * oy - 1, y1 = y0 + 3 < h ? y0 + 3 : h;
    y0 = y0 > 0 ? y0 : 0;
    const int64_t rows = y1 - y0;
    const float* restrict r0 = src + y0 * w;
    const float* restrict r1 = r0 + w;
    const float* restrict r2 = r1 + w;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 carry = ninf;
    for (int64_t ox = 0, c = 0; ox < ow; ox += 16, c += 32) {
        __mmask16 kl = tail16(w - c), kh = tail16(w - c - 16 > 0 ? w - c - 16 : 0);
        __m512 lo = _mm512_mask_loadu_ps(ninf, kl, r0 + c), hi = _mm512_mask_loadu_ps(ninf, kh, r0 + c + 16);
        if (rows > 1) {
            lo = max_nan16(lo, _mm512_mask_loadu_ps(ninf, kl, r1 + c));
            hi = max_nan16(hi, _mm512_mask_loadu_ps(ninf, kh, r1 + c + 16));
        }
        if (rows > 2) {
            lo = max_nan16(lo, _mm512_mask_loadu_ps(ninf, kl, r2 + c));
            hi = max_nan16(hi, _mm512_mask_loadu_ps(ninf, kh, r2 + c + 16));
        }
        __m512 e = _mm512_permutex2var_ps(lo, even, hi), o = _mm512_permutex2var_ps(lo, odd, hi);
        __m512 prev = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(o), _mm512_castps_si512(carry), 15));
        carry = o;
        __m512 m = max_nan16(max_nan16(prev, e), o);
        if (ox + 16 <= ow) _mm512_storeu_ps(dst + ox, m);
        else _mm512_mask_storeu_ps(dst + ox, tail16(ow - ox), m);
    }
}
#define STREAM_LANES 16
static inline void stream_lanes(float* dst, const float* src) { _mm512_stream_ps(dst, _mm512_load_ps(src)); }
#else
/* Without AVX-512 the same window in gcc's generic vectors of 8 floats (one AVX2 register built for x86-64-v3, two
   SSE or NEON registers elsewhere), 16 input columns (8 outputs) a step: the max of the rows in two vectors, split
   into even and odd columns by two shuffles, and the odd column before each output shifted in from the previous
   step. max8 is MAXV lane by lane (NaN wins), as a compare and a blend. */
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
/* a macro, not a function: a function passing 8-float vectors by value draws gcc's ABI note where AVX is off */
#define max8(a, b) ({                                           \
    v8f a_ = (a), b_ = (b);                                     \
    v8i take_b = (b_ > a_) | (b_ != b_);                        \
    (v8f)(((v8i)b_ & take_b) | ((v8i)a_ & ~take_b));            \
})
static void pool_row_3s2(const float* restrict src, float* restrict dst, int64_t h, int64_t w, int64_t ow,
                         int64_t oy) {
    int64_t y0 = 2 * oy - 1, y1 = y0 + 3 < h ? y0 + 3 : h;
    y0 = y0 > 0 ? y0 : 0;
    const int64_t rows = y1 - y0;
    const float* restrict r0 = src + y0 * w;
    const float* restrict r1 = r0 + w;
    const float* restrict r2 = r1 + w;
    const v8f ninf = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    v8f carry = ninf;
    int64_t ox = 0, c = 0;
    for (; c + 16 <= w; c += 16, ox += 8) {
        v8f lo = load8(r0 + c), hi = load8(r0 + c + 8);
        if (rows > 1) {
            lo = max8(lo, load8(r1 + c));
            hi = max8(hi, load8(r1 + c + 8));
        }
        if (rows > 2) {
            lo = max8(lo, load8(r2 + c));
            hi = max8(hi, load8(r2 + c + 8));
        }
        v8f e = EVEN8(lo, hi), o = ODD8(lo, hi), prev = PREV8(carry, o);
        carry = o;
        *(v8f_u*)(dst + ox) = max8(max8(prev, e), o);
    }
    if (ox < ow) {  /* the last w - c < 16 columns, combined into a block padded with -inf (the padding) */
        float block[16], maxes[8];
        for (int64_t i = 0; i < 16; ++i) block[i] = -INFINITY;
        for (int64_t i = 0; c + i < w; ++i) {
            float v = r0[c + i];
            if (rows > 1) v = MAXV(v, r1[c + i]);
            if (rows > 2) v = MAXV(v, r2[c + i]);
            block[i] = v;
        }
        v8f lo = load8(block), hi = load8(block + 8), o = ODD8(lo, hi);
        v8f m = max8(max8(PREV8(carry, o), EVEN8(lo, hi)), o);
        memcpy(maxes, &m, sizeof maxes);
        for (int64_t i = 0; ox + i < ow; ++i) dst[ox + i] = maxes[i];
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
/* The benchmark's window on every CPU: one OpenMP iteration per output row (pool_row_3s2, prefetching input rows
   ahead), through the L1 buffer and non-temporal stores where the output is large. Other windows: one OpenMP
   iteration per output row of one (sample, channel) plane, in two passes: the window's input rows are combined column
   by column into one row (a contiguous, vectorised loop), then each output takes its window of that row. Windows are
   clipped to the real pixels. */
void max_pool2d(const float* restrict x, float* restrict out, int64_t planes, int64_t h, int64_t w, int64_t oh,
          int64_t ow, int64_t k, int64_t stride, int64_t pad) {
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
                        pool_row_3s2(x + p * h * w, dst + oy * ow, h, w, ow, oy);
                    }
                    if (buf != NULL)
                        for (int64_t i = 0; i < plane_out; i += STREAM_LANES)
                            stream_lanes(out + p * plane_out + i, buf + i);
                }
                _mm_sfence();
                free(buf);
            }
            return;
        }
#endif
        #pragma omp parallel for schedule(static)
        for (int64_t po = 0; po < planes * oh; ++po) {
            int64_t p = po / oh, oy = po % oh;
            float* dst = out + p * plane_out;
            prefetch_rows(x, p * h + 2 * (oy + PREFETCH_ROWS), planes * h, w);
            pool_row_3s2(x + p * h * w, dst + oy * ow, h, w, ow, oy);
        }
        return;
    }
    #pragma omp parallel
    {
        float* restrict line = malloc(sizeof(float) * (w + 2));
        #pragma omp for schedule(static, CHUNK)
        for (int64_t po = 0; po < planes * oh; ++po) {
            int64_t p = po / oh, oy = po % oh;
            const float* restrict src = x + p * h * w;
            float* restrict dst = out + p * oh * ow + oy * ow;
            int64_t y0 = oy * stride - pad, y1 = y0 + k < h ? y0 + k : h;
            y0 = y0 > 0 ? y0 : 0;
            #pragma omp simd
            for (int64_t xx = 0; xx < w; ++xx) line[xx] = -INFINITY;
            for (int64_t y = y0; y < y1; ++y) {
                const float* restrict in = src + y * w;
                #pragma omp simd
                for (int64_t xx = 0; xx < w; ++xx) line[xx] = MAX(line[xx], in[xx]);
            }
            for (int64_t ox = 0; ox < ow; ++ox) {
                int64_t x0 = ox * stride - pad, x1 = x0 + k < w ? x0 + k : w;
                x0 = x0 > 0 ? x0 : 0;
                float acc = -INFINITY;
                for (int64_t xx = x0; xx < x1; ++xx) acc = MAX(acc, line[xx]);
                dst[ox] = acc;
            }
        }
        free(line);
    }
}
"""
lib = load_c("max_pool2d", SOURCE, functions=["max_pool2d"],
             flags=["-O3", "-march=native", "-fopenmp", "-fno-trapping-math"])


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
        lib.max_pool2d(x, out, batch * channels, h, w, oh, ow, k, s, p)
        return out
