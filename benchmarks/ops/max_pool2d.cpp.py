"""Native seed for ops/max_pool2d. The benchmark's window (3x3, stride 2, padding 1) has an AVX-512 path that keeps
everything in registers: one OpenMP iteration per output row (rows split into one contiguous band per thread, so each
thread streams its part of the input once), and per 32 input columns the max of the window's input rows in two
vectors (masked loads past the width read -inf: padding never wins, as in PyTorch), split into their even and odd
columns by two permutes, and each output's window is the max of even, odd and the odd column before it (one lane
shift that carries across blocks); a large output goes plane by plane through an L1 buffer and out with non-temporal
stores (see STREAM_FROM_BYTES). Without AVX-512 the same window takes a plain-C path that gcc vectorises
(pool_row_3s2_plain; built for x86-64-v3 on a 2-CPU Intel Xeon VM, 2026-11-25: 7.8 -> 2.4 ms, eager 21 ms). Other
windows take the general path: the max of the window's rows column by column into a line (vectorised), then each
window's max along it. On both paths a NaN in a
window makes its output NaN, as in PyTorch (see max_nan16 and MAX)."""

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
#ifdef __AVX512F__
#include <immintrin.h>
/* max(a, b) that keeps a NaN of either: vmaxps returns its second operand when either is NaN, so it is asked only
   in the lanes where a is not NaN (an ordered compare of a with itself); the others keep a. Two instructions where
   a plain max takes one. Not for -ffast-math builds: gcc may swap vmaxps' operands there (measured: such a build
   lost 2 of 7 NaN outputs; MAX's bit test kept them). */
static inline __m512 max_nan16(__m512 a, __m512 b) {
    return _mm512_mask_max_ps(a, _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q), a, b);
}
/* the lanes of a 16-wide step that lie before the end, `left` elements away */
static inline __mmask16 tail16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }
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
        for (int64_t i = 0; i < w; i += 16) _mm_prefetch((const char*)(x + r * w + i), _MM_HINT_T0);
}
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
#endif
/* The benchmark's window (3x3, stride 2, padding 1) without AVX-512, in plain C that gcc vectorises (AVX2, SSE,
   NEON) with -fno-trapping-math: the window's rows combined column by column into `line` one place to the right
   (line[0] and line[w + 1] are the padding, -inf), then output ox is the max of line[2ox .. 2ox + 2]. MAXV is MAX
   with the NaN test as a compare (b != b) instead of a bit test through memory, which kept both loops scalar: on a
   2-CPU Intel Xeon VM (2026-11-25), the benchmark shape built for x86-64-v3 took 7.8 ms before (11% of the copy
   bandwidth's bound on an AVX2 host), 2.6 ms with these loops and 2.4 ms with the rows prefetched ahead (the AVX-512
   path: 1.3 ms). */
#define PREFETCH_PLAIN 8
#define MAXV(a, b) ((b) > (a) || (b) != (b) ? (b) : (a))
static void pool_row_3s2_plain(const float* restrict src, float* restrict dst, float* restrict line, int64_t h,
                               int64_t w, int64_t ow, int64_t oy) {
    int64_t y0 = 2 * oy - 1, y1 = y0 + 3 < h ? y0 + 3 : h;
    y0 = y0 > 0 ? y0 : 0;
    const float* restrict r0 = src + y0 * w;
    const float* restrict r1 = r0 + w;
    const float* restrict r2 = r1 + w;
    if (y1 - y0 == 3) {
        #pragma omp simd
        for (int64_t i = 0; i < w; ++i) line[i + 1] = MAXV(MAXV(r0[i], r1[i]), r2[i]);
    } else if (y1 - y0 == 2) {
        #pragma omp simd
        for (int64_t i = 0; i < w; ++i) line[i + 1] = MAXV(r0[i], r1[i]);
    } else {
        #pragma omp simd
        for (int64_t i = 0; i < w; ++i) line[i + 1] = r0[i];
    }
    line[0] = line[w + 1] = -INFINITY;
    #pragma omp simd
    for (int64_t ox = 0; ox < ow; ++ox) dst[ox] = MAXV(MAXV(line[2 * ox], line[2 * ox + 1]), line[2 * ox + 2]);
}
/* One OpenMP iteration per output row of one (sample, channel) plane, in two passes: the window's input rows are
   combined column by column into one row (a contiguous, vectorised loop), then each output takes its window of that
   row. Windows are clipped to the real pixels. */
void max_pool2d(const float* restrict x, float* restrict out, int64_t planes, int64_t h, int64_t w, int64_t oh,
          int64_t ow, int64_t k, int64_t stride, int64_t pad) {
#ifdef __AVX512F__
    if (k == 3 && stride == 2 && pad == 1 && ow == (w + 1) / 2) {
        const int64_t plane_out = oh * ow;
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
                        for (int64_t i = 0; i < plane_out; i += 16)
                            _mm512_stream_ps(out + p * plane_out + i, _mm512_load_ps(buf + i));
                }
                _mm_sfence();
                free(buf);
            }
        } else {
            #pragma omp parallel for schedule(static)
            for (int64_t po = 0; po < planes * oh; ++po) {
                int64_t p = po / oh, oy = po % oh;
                float* dst = out + p * plane_out;
                prefetch_rows(x, p * h + 2 * (oy + PREFETCH_ROWS), planes * h, w);
                pool_row_3s2(x + p * h * w, dst + oy * ow, h, w, ow, oy);
            }
        }
        return;
    }
#endif
    const int stem = k == 3 && stride == 2 && pad == 1 && ow == (w + 1) / 2;
    #pragma omp parallel
    {
        float* restrict line = malloc(sizeof(float) * (w + 2));
        #pragma omp for schedule(static, CHUNK)
        for (int64_t po = 0; po < planes * oh; ++po) {
            int64_t p = po / oh, oy = po % oh;
            const float* restrict src = x + p * h * w;
            float* restrict dst = out + p * oh * ow + oy * ow;
            if (stem) {
                /* input rows 2 (oy + PREFETCH_PLAIN) and the next, into the cache ahead, as the AVX-512 path does */
                for (int64_t r = 2 * (oy + PREFETCH_PLAIN); r < 2 * (oy + PREFETCH_PLAIN) + 2 && r < h; ++r)
                    for (int64_t i = 0; i < w; i += 16) __builtin_prefetch(src + r * w + i, 0, 3);
                pool_row_3s2_plain(src, dst, line, h, w, ow, oy);
                continue;
            }
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
