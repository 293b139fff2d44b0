"""Native seed for ops/conv1d (kernel 5, padding 2).

The convolution ("same" padding, stride 1) is an implicit GEMM, no im2col: C's rows are output channels, A the
weights (Cout x Cin * taps, packed once into panels of UNROLL_M channels), and B's row for tap (ci, ty, tx) over 16 *
VEC_N consecutive output positions of one output row is the input row they read. Each work item (sample, output row,
BLOCK_N columns, shared out dynamically by OpenMP, one parallel region per call) first copies the input rows it
reads, zero-padded, into a contiguous buffer (the input's own channel rows lie a multiple of 4 KiB apart and evict
each other from L1), then the AVX-512 micro-kernel (UNROLL_M x VEC_N zmm accumulators, broadcast A, FMA) reads B from
it with plain loads; the bias is added as C is stored. Without AVX-512 but with AVX2 and FMA an intrinsics kernel
works the tile in blocks of 6 x 16 floats in 12 ymm accumulators, and the weights are packed through 8 x 8 register
transposes (see UNROLL_M_AVX2); elsewhere a portable C kernel works the tile in 4 x 16 blocks held in registers (see
conv_tile). Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2 cores) with scripts/bench_native.py: the portable path
took the seed from 0.42x to 0.92x over eager. The AVX2 path, measured 2026-11-28 on the same machine (AMD EPYC Zen 3,
AVX2, 2 cores) with `scripts/bench_seed_ab.py --tasks conv1d --before HEAD --budget-s 4` against the portable path:
1.35x faster per round (median), 0.72x -> 0.98x over eager."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <sys/mman.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
/* An implicit GEMM for a "same" convolution (stride 1): the weights are packed into panels of UNROLL_M output
   channels (A); the micro-kernel (UNROLL_M x VEC_N accumulators of 16 floats held in zmm registers: per tap one
   broadcast of A per row, VEC_N loads of the input row, one FMA per accumulator) reads B from a copy of the input
   rows a work item needs, so nothing else is packed. Without AVX-512 an AVX2 and FMA kernel of 6 x 16 floats is
   used where the CPU has them (see UNROLL_M_AVX2), and a plain C kernel of the AVX-512 one's shape elsewhere. */
#define UNROLL_M 8    /* rows of the micro-kernel (MR) */
#define VEC_N 2       /* 16-float vectors per row of the micro-kernel: its width NR = 16 * VEC_N */
#define BLOCK_N 256   /* columns of C per tile (NC, rounded to a multiple of NR) */
/* With AVX2 and FMA but no AVX-512 (Zen 2 and 3, Haswell and later) the micro-kernel holds its accumulators in the
   16 ymm registers of 8 floats: UNROLL_M_AVX2 rows x 16 columns take 2 UNROLL_M_AVX2 of them, plus 2 for the row
   of B and 1 for the broadcast of A, so 6 rows (15 registers) is the most that does not spill; MR is 6 in that
   build, and UNROLL_M stays the AVX-512 kernel's (and the portable kernel's) alone. NR is 16 there (VEC_N_AVX2 1):
   the kernel works 16 columns at a time, as the GEMM seeds' AVX2 kernel does (see tiny/matmul_bias). */
#define UNROLL_M_AVX2 6
#define VEC_N_AVX2 1
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define GEMM_AVX2 1
#define MR UNROLL_M_AVX2
#define NR (16 * VEC_N_AVX2)
#else
#define MR UNROLL_M
#define NR (16 * VEC_N)
#endif
#define PRAGMA(x) _Pragma(#x)
#define UNROLLED(n) PRAGMA(GCC unroll n)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#ifndef __AVX512F__
/* The portable micro-kernel's vectors: gcc's generic vectors of 8 floats (one ymm with AVX2, two xmm or NEON
   registers elsewhere), and a no-op asm that makes a reused one live in a register on x86 with AVX. */
typedef float vec8 __attribute__((vector_size(32)));
#ifdef __AVX__
#define IN_REGISTER(v) __asm__("" : "+x"(v))
#else
#define IN_REGISTER(v) ((void)0)
#endif
#endif

static int64_t tile_n(void) { return MAX(BLOCK_N / NR, 1) * NR; }
static int64_t panels_a(int64_t M) { return (M + MR - 1) / MR; }
/* Scratch for n floats. Large buffers are 2 MiB aligned and asked to be backed by huge pages: each call's fresh
   scratch then costs a few page faults instead of one per 4 KiB page, which for a 1024^2 GEMM's packed operands
   took longer than packing them. */
static float* alloc_floats(int64_t n) {
    size_t bytes = (size_t)n * 4, huge = (size_t)1 << 21;
    if (bytes < huge) return aligned_alloc(64, (bytes + 63) / 64 * 64);
    bytes = (bytes + huge - 1) / huge * huge;
    float* p = aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

#ifdef GEMM_AVX2
/* r[i][j] becomes r[j][i] for an 8 x 8 block of floats held in registers: 32-bit interleaves of row pairs, then
   64-bit shuffles within 128-bit lanes (4 x 4 blocks), then an exchange of lanes between rows 4 apart. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    UNROLLED(4) for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    UNROLLED(2) for (int h = 0; h < 2; ++h) {  /* u[4h + q], lane l: column 4l + q of rows 4h .. 4h + 3 */
        u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
        u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
        u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
        u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
    }
    UNROLLED(4) for (int q = 0; q < 4; ++q) {
        r[q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x20);
        r[4 + q] = _mm256_permute2f128_ps(u[q], u[4 + q], 0x31);
    }
}
#endif

/* Panel ip of A: ap[k][r] = A(ip * MR + r, k) for all K, zero past M; A(m, k) = a[m * sm + k * sk]. */
static void pack_a_panel(const float* restrict a, int64_t sm, int64_t sk, int64_t M, int64_t K, int64_t ip,
                         float* restrict ap) {
    float* restrict dst = ap + ip * K * MR;
    int64_t k_whole = 0;
#ifdef GEMM_AVX2
    /* Rows read contiguously (sk 1) and MR at most 8: 8 k at a time, the panel's rows (zeros past M) transposed in
       registers and each k's MR values written at once, instead of one scalar store per element (packing took a
       fifth of a 1024^3 linear's time with the scalar loops, and this took 2-3% off the whole on an AMD EPYC Zen 3,
       2026-11-28). */
    if (sk == 1 && MR <= 8) {
        k_whole = K / 8 * 8;
        for (int64_t k0 = 0; k0 < k_whole; k0 += 8) {
            __m256 v[8];
            UNROLLED(8) for (int r = 0; r < 8; ++r)
                v[r] = r < MR && ip * MR + r < M ? _mm256_loadu_ps(a + (ip * MR + r) * sm + k0) : _mm256_setzero_ps();
            transpose8(v);
            UNROLLED(8) for (int i = 0; i < 8; ++i) {
                float* p = dst + (k0 + i) * MR;
                if (MR == 8) {
                    _mm256_storeu_ps(p, v[i]);
                } else if (MR == 6) {
                    _mm_storeu_ps(p, _mm256_castps256_ps128(v[i]));
                    _mm_storel_pi((__m64*)(p + 4), _mm256_extractf128_ps(v[i], 1));
                } else {
                    float lanes[8];
                    _mm256_storeu_ps(lanes, v[i]);
                    for (int r = 0; r < MR; ++r) p[r] = lanes[r];
                }
            }
        }
    }
#endif
    for (int r = 0; r < MR; ++r) {
        int64_t m = ip * MR + r;
        if (m < M) {
            const float* restrict src = a + m * sm;
            for (int64_t k = k_whole; k < K; ++k) dst[k * MR + r] = src[k * sk];
        } else {
            for (int64_t k = k_whole; k < K; ++k) dst[k * MR + r] = 0.0f;
        }
    }
}


/* One micro-tile of a "same" convolution (stride 1), an implicit GEMM: C's rows are mr output channels (A: their
   weights, a packed panel of MR rows, K = taps_y * kw deep, taps_y = cin * kh), its columns nr <= NR consecutive
   output positions of one output row. B's row for tap (t, tx) is row t of xp (the input row that tap reads,
   already zero-padded, see `conv`) from column tx on, read with plain vector loads. The bias is added on the store;
   out: the output at (first channel, first column), channel stride ld. */
static void conv_tile(const float* restrict xp, int64_t ldp, const float* restrict ap, const float* restrict bias,
                      float* restrict out, int64_t ld, int64_t mr, int64_t nr, int64_t taps_y, int64_t kw) {
#ifdef __AVX512F__
    __m512 acc[MR][VEC_N];
    UNROLLED(16) for (int r = 0; r < MR; ++r)
        UNROLLED(4) for (int v = 0; v < VEC_N; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int64_t t = 0; t < taps_y; ++t) {
        const float* restrict row = xp + t * ldp;
        const float* restrict a = ap + t * kw * MR;
        for (int64_t tx = 0; tx < kw; ++tx) {
            __m512 bv[VEC_N];
            UNROLLED(4) for (int v = 0; v < VEC_N; ++v) bv[v] = _mm512_loadu_ps(row + tx + 16 * v);
            UNROLLED(16) for (int r = 0; r < MR; ++r) {
                __m512 av = _mm512_set1_ps(a[tx * MR + r]);
                UNROLLED(4) for (int v = 0; v < VEC_N; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
            }
        }
    }
    UNROLLED(4) for (int v = 0; v < VEC_N; ++v) {
        int64_t lanes = nr - 16 * v;
        if (lanes <= 0) break;
        __mmask16 mask = lanes >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << lanes) - 1u);
        UNROLLED(16) for (int r = 0; r < MR; ++r) {
            if (r >= mr) break;
            _mm512_mask_storeu_ps(out + r * ld + 16 * v, mask, _mm512_add_ps(acc[r][v], _mm512_set1_ps(bias[r])));
        }
    }
#elif defined(GEMM_AVX2)
    /* AVX2 and FMA: blocks of MR rows x 16 columns over all taps, per tap two loads of the input row, MR broadcasts
       of A and 2 MR FMAs, all accumulators in ymm registers (see UNROLL_M_AVX2); columns past nr are stored under a
       mask, rows past mr (the zero padding of A) not at all. */
    static const int32_t lane_index[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int j0 = 0; j0 < NR && j0 < nr; j0 += 16) {
        __m256 acc[MR][2];
        UNROLLED(16) for (int r = 0; r < MR; ++r) {
            acc[r][0] = _mm256_setzero_ps();
            acc[r][1] = _mm256_setzero_ps();
        }
        for (int64_t t = 0; t < taps_y; ++t) {
            const float* restrict row = xp + t * ldp + j0;
            const float* restrict a = ap + t * kw * MR;
            for (int64_t tx = 0; tx < kw; ++tx) {
                __m256 b0 = _mm256_loadu_ps(row + tx), b1 = _mm256_loadu_ps(row + tx + 8);
                UNROLLED(16) for (int r = 0; r < MR; ++r) {
                    __m256 av = _mm256_broadcast_ss(a + tx * MR + r);
                    acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
                }
            }
        }
        UNROLLED(2) for (int v = 0; v < 2; ++v) {
            int64_t lanes = nr - j0 - 8 * v;
            if (lanes <= 0) break;
            __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)MIN(lanes, 8)),
                                              _mm256_loadu_si256((const __m256i*)lane_index));
            UNROLLED(16) for (int r = 0; r < MR; ++r) {
                if (r >= mr) break;
                float* p = out + r * ld + j0 + 8 * v;
                __m256 sum = _mm256_add_ps(acc[r][v], _mm256_set1_ps(bias[r]));
                if (lanes >= 8)
                    _mm256_storeu_ps(p, sum);
                else
                    _mm256_maskstore_ps(p, mask, sum);
            }
        }
    }
#else
    /* Neither AVX-512 nor AVX2 and FMA (SSE-only x86, NEON, or AVX without FMA): blocks of 4 rows x 16 columns over all
       taps with gcc's generic vectors (AVX: 8 accumulators, 2 vectors of the input row and a broadcast weight in ymm
       registers; a whole MR x NR tile would spill), the row's vectors pinned in registers (IN_REGISTER: see the GEMM
       seeds). Rows past MR (when 4 does not divide it) repeat its last row and are not stored. */
    for (int r0 = 0; r0 < MR && r0 < mr; r0 += 4)
        for (int j0 = 0; j0 < NR && j0 < nr; j0 += 16) {
            vec8 acc[4][2] = {{{0}}};
            for (int64_t t = 0; t < taps_y; ++t)
                for (int64_t tx = 0; tx < kw; ++tx) {
                    const float* restrict row = xp + t * ldp + tx + j0;
                    const float* restrict a = ap + (t * kw + tx) * MR;
                    vec8 x0, x1;
                    memcpy(&x0, row, sizeof x0);
                    memcpy(&x1, row + 8, sizeof x1);
                    IN_REGISTER(x0);
                    IN_REGISTER(x1);
                    UNROLLED(4) for (int r = 0; r < 4; ++r) {
                        float av = a[MIN(r0 + r, MR - 1)];
                        acc[r][0] += av * x0;
                        acc[r][1] += av * x1;
                    }
                }
            for (int r = 0; r < 4 && r0 + r < mr; ++r) {
                float sum[16];
                memcpy(sum, acc[r], sizeof sum);
                for (int j = 0; j < 16 && j0 + j < nr; ++j) out[(r0 + r) * ld + j0 + j] = sum[j] + bias[r0 + r];
            }
        }
#endif
}

/* "Same" convolution, stride 1: the weights (Cout x Cin * kh * kw) are packed once into panels of MR output
   channels; the items, shared out dynamically, are (sample, output row, BLOCK_N output columns). An item first
   copies the input rows its outputs read (every channel and tap row, the padding as zeros) into its thread's
   buffer, rows of ldp floats: contiguous, where the input's own rows lie a multiple of 4 KiB apart and fight over
   the same L1 sets; then it runs every panel of output channels over each NR columns of its block. */
void conv(const float* restrict x, const float* restrict weight, const float* restrict bias, float* restrict out,
          int64_t batch, int64_t cin, int64_t cout, int64_t h, int64_t w, int64_t kh, int64_t kw) {
    int64_t N = h * w, K = cin * kh * kw, pa = panels_a(cout), tn = tile_n(), nt = (w + tn - 1) / tn;
    int64_t pad_h = kh / 2, pad_w = kw / 2, ldp = (MIN(tn, w) + kw - 1 + 15) / 16 * 16 + 16;
    float* ap = alloc_floats(pa * MR * K);
    #pragma omp parallel
    {
        float* xp = alloc_floats(cin * kh * ldp);
        #pragma omp for schedule(static)
        for (int64_t ip = 0; ip < pa; ++ip) pack_a_panel(weight, K, 1, cout, K, ip, ap);
        #pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < batch * h * nt; ++item) {
            int64_t b = item / (h * nt), oy = item / nt % h, x0 = item % nt * tn, x1 = MIN(w, x0 + tn);
            for (int64_t t = 0; t < cin * kh; ++t) {  /* xp row t: input row oy + ty - pad_h of channel ci */
                int64_t ci = t / kh, y = oy + t % kh - pad_h;
                float* restrict dst = xp + t * ldp;
                const float* restrict src = x + (b * cin + ci) * N + y * w;
                /* dst[i] = input column x0 - pad_w + i where that lies in the row and i < x1 - x0 + kw - 1 */
                int64_t lo = MAX(pad_w - x0, 0), hi = MIN(MIN(w - x0 + pad_w, x1 - x0 + kw - 1), ldp);
                if (y < 0 || y >= h || hi < lo) lo = hi = 0;
                for (int64_t i = 0; i < lo; ++i) dst[i] = 0.0f;
                if (hi > lo) memcpy(dst + lo, src + x0 - pad_w + lo, (size_t)(hi - lo) * sizeof(float));
                for (int64_t i = MAX(hi, lo); i < ldp; ++i) dst[i] = 0.0f;
            }
            for (int64_t ox0 = x0; ox0 < x1; ox0 += NR)
                for (int64_t ip = 0; ip < pa; ++ip)
                    conv_tile(xp + (ox0 - x0), ldp, ap + ip * K * MR, bias + ip * MR,
                              out + (b * cout + ip * MR) * N + oy * w + ox0, N, MIN(MR, cout - ip * MR),
                              MIN(NR, x1 - ox0), cin * kh, kw);
        }
        free(xp);
    }
    free(ap);
}
"""
lib = load_c("conv1d", SOURCE, functions=["conv"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=5, stride=1, padding=2, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        batch, cin, length = x.shape
        cout = self.conv.out_channels
        out = torch.empty((batch, cout, length), dtype=x.dtype)
        lib.conv(x, self.conv.weight.contiguous(), self.conv.bias.contiguous(), out, batch, cin, cout, 1, length, 1, 5)
        return out
