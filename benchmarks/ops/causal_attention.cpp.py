"""Native seed for ops/causal_attention: causal attention as two GEMMs with a fused masked softmax, per (batch, head,
block of BLOCK_Q query rows): S = Q K^T on the GEMM micro-kernel over the keys up to the block's last row only, a
masked softmax on the block's rows of S in cache (libmvec's vector expf under -ffast-math), then O = P V on the
micro-kernel, each row divided by its sum at the end. Nothing of size seq x seq is stored; every head's K and V are
packed once per call.

The micro-kernel is a GotoBLAS one: A packed into panels of UNROLL_M rows, B into panels of 16 * VEC_N columns
(zero-padded at the edges), UNROLL_M x VEC_N zmm accumulators (broadcast A, FMA, masked stores at the edges; without
AVX-512 but with AVX2 and FMA an intrinsics kernel of 6 x 16 floats in 12 ymm accumulators and packing through 8 x 8
register transposes, see UNROLL_M_AVX2; elsewhere a portable C kernel that works the tile in 4 x 16 blocks held in
registers, see micro_kernel), K read BLOCK_K deep at a time in P V. OpenMP shares out the (head, query block) items
dynamically, the costliest first, in one parallel region per call. Measured 2026-11-25 on an AMD EPYC Zen 3 (AVX2, 2
cores) with scripts/bench_native.py: the portable path took the seed from 0.66x to 1.18x over eager. The AVX2 path,
measured 2026-11-28 on the same machine (AMD EPYC Zen 3, AVX2, 2 cores) with `scripts/bench_seed_ab.py --tasks
causal_attention --before HEAD --budget-s 4` against the portable path: 1.35x faster per round (median), 0.96x ->
1.29x over eager."""

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
/* GEMM pieces for attention, C = A B: A is packed into panels of UNROLL_M rows and B into panels of 16 * VEC_N
   columns (both zero-padded at the edges, all of K each), so the micro-kernel (UNROLL_M x VEC_N accumulators of 16
   floats held in zmm registers: per k one broadcast of A per row, VEC_N loads of B, one FMA per accumulator) always
   runs full width and reads both operands contiguously; edges are stored under a mask. Without AVX-512 an AVX2 and
   FMA kernel of 6 x 16 floats is used where the CPU has them (see UNROLL_M_AVX2), and a plain C micro-kernel of the
   AVX-512 one's shape elsewhere. */
#define UNROLL_M 8    /* rows of the micro-kernel (MR) */
#define VEC_N 2       /* 16-float vectors per row of the micro-kernel: its width NR = 16 * VEC_N */
#define BLOCK_K 256   /* depth of K per pass over a tile (KC) */
/* With AVX2 and FMA but no AVX-512 (Zen 2 and 3, Haswell and later) the micro-kernel holds its accumulators in the
   16 ymm registers of 8 floats: UNROLL_M_AVX2 rows x 16 columns take 2 UNROLL_M_AVX2 of them, plus 2 for the row
   of B and 1 for the broadcast of A, so 6 rows (15 registers) is the most that does not spill; MR is 6 in that
   build, and UNROLL_M stays the AVX-512 kernel's (and the portable kernel's) alone. NR is 16 there (VEC_N_AVX2 1):
   the kernel works 16 columns at a time, and a panel 16 wide keeps the BLOCK_K x NR slice of B that it reads
   contiguous and at 16 KiB, half of Zen 3's L1, where 32 columns filled all of it (10% slower for a 1024^3 linear
   on an AMD EPYC Zen 3, 2026-11-28). */
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

static int64_t panels_a(int64_t M) { return (M + MR - 1) / MR; }
static int64_t panels_b(int64_t N) { return (N + NR - 1) / NR; }
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

#ifdef __AVX512F__
/* dst[c][r] = src[r][c] for a 16 x 16 block (row strides ld_src, ld_dst): 32-bit, then 64-bit interleaves within
   128-bit lanes, then two rounds of lane shuffles. */
static inline void transpose16(const float* restrict src, int64_t ld_src, float* restrict dst, int64_t ld_dst) {
    __m512 r[16], t[16];
    UNROLLED(16) for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * ld_src);
    UNROLLED(8) for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    UNROLLED(4) for (int i = 0; i < 4; ++i) {  /* r[4i + q], lane l: column 4l + q of rows 4i .. 4i + 3 */
        __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
        __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
        r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    UNROLLED(4) for (int q = 0; q < 4; ++q) {
        __m512 v = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);
        __m512 w = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xDD);
        __m512 v2 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
        __m512 w2 = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xDD);
        _mm512_storeu_ps(dst + q * ld_dst, _mm512_shuffle_f32x4(v, v2, 0x88));
        _mm512_storeu_ps(dst + (8 + q) * ld_dst, _mm512_shuffle_f32x4(v, v2, 0xDD));
        _mm512_storeu_ps(dst + (4 + q) * ld_dst, _mm512_shuffle_f32x4(w, w2, 0x88));
        _mm512_storeu_ps(dst + (12 + q) * ld_dst, _mm512_shuffle_f32x4(w, w2, 0xDD));
    }
}
#endif

/* Panel jp of B: bp[k][j] = B(k, jp * NR + j) for all K, zero past N; B(k, n) = b[k * sk + n * sn]. */
static void pack_b_panel(const float* restrict b, int64_t sk, int64_t sn, int64_t K, int64_t N, int64_t jp,
                         float* restrict bp) {
    float* restrict dst = bp + jp * K * NR;
    int64_t n0 = jp * NR, nn = MIN(NR, N - n0);
    if (sn == 1) {
        for (int64_t k = 0; k < K; ++k) {
            const float* restrict src = b + k * sk + n0;
            for (int64_t j = 0; j < nn; ++j) dst[k * NR + j] = src[j];
            for (int64_t j = nn; j < NR; ++j) dst[k * NR + j] = 0.0f;
        }
    } else {  /* a transposed read: 16 x 16 blocks through registers where they are whole, element by element else */
        int64_t k_whole = 0;
#ifdef __AVX512F__
        if (sk == 1) {
            k_whole = K / 16 * 16;
            for (int64_t j0 = 0; j0 + 16 <= nn; j0 += 16)
                for (int64_t k0 = 0; k0 < k_whole; k0 += 16)
                    transpose16(b + (n0 + j0) * sn + k0, sn, dst + k0 * NR + j0, NR);
            for (int64_t j = nn / 16 * 16; j < NR; ++j)
                for (int64_t k = 0; k < k_whole; ++k) dst[k * NR + j] = j < nn ? b[(n0 + j) * sn + k] : 0.0f;
        }
#elif defined(GEMM_AVX2)
        if (sk == 1) {  /* the same with 8 x 8 blocks */
            k_whole = K / 8 * 8;
            for (int64_t j0 = 0; j0 + 8 <= nn; j0 += 8)
                for (int64_t k0 = 0; k0 < k_whole; k0 += 8) {
                    __m256 v[8];
                    UNROLLED(8) for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(b + (n0 + j0 + i) * sn + k0);
                    transpose8(v);
                    UNROLLED(8) for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + (k0 + i) * NR + j0, v[i]);
                }
            for (int64_t j = nn / 8 * 8; j < NR; ++j)
                for (int64_t k = 0; k < k_whole; ++k) dst[k * NR + j] = j < nn ? b[(n0 + j) * sn + k] : 0.0f;
        }
#endif
        /* the rest in blocks of 64 k: each column's run of k read contiguously where sk is 1, the block's 8 KiB of
           the panel written from L1 (8% faster for a 1024^3 linear than k outermost, AMD EPYC Zen 3, 2026-11-25) */
        for (int64_t k0 = k_whole; k0 < K; k0 += 64) {
            int64_t k1 = MIN(k0 + 64, K);
            for (int64_t j = 0; j < NR; ++j)
                for (int64_t k = k0; k < k1; ++k) dst[k * NR + j] = j < nn ? b[(n0 + j) * sn + k * sk] : 0.0f;
        }
    }
}

/* c[r][j] (+)= sum_k a[k][r] * b[k][j] for r < mr, j < nr: a and b are kc deep slices of packed panels. */
static inline void micro_kernel(int64_t kc, const float* restrict a, const float* restrict b, float* restrict c,
                                int64_t ldc, int overwrite, int64_t mr, int64_t nr) {
#ifdef __AVX512F__
    __m512 acc[MR][VEC_N];
    UNROLLED(16) for (int r = 0; r < MR; ++r)
        UNROLLED(4) for (int v = 0; v < VEC_N; ++v) acc[r][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; ++k) {
        __m512 bv[VEC_N];
        UNROLLED(4) for (int v = 0; v < VEC_N; ++v) bv[v] = _mm512_load_ps(b + k * NR + 16 * v);
        UNROLLED(16) for (int r = 0; r < MR; ++r) {
            __m512 av = _mm512_set1_ps(a[k * MR + r]);
            UNROLLED(4) for (int v = 0; v < VEC_N; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
    UNROLLED(4) for (int v = 0; v < VEC_N; ++v) {
        int64_t lanes = nr - 16 * v;
        if (lanes <= 0) break;
        __mmask16 mask = lanes >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << lanes) - 1u);
        UNROLLED(16) for (int r = 0; r < MR; ++r) {
            if (r >= mr) break;
            float* p = c + r * ldc + 16 * v;
            __m512 out = overwrite ? acc[r][v] : _mm512_add_ps(acc[r][v], _mm512_maskz_loadu_ps(mask, p));
            _mm512_mask_storeu_ps(p, mask, out);
        }
    }
#elif defined(GEMM_AVX2)
    /* AVX2 and FMA: the MR x NR tile in blocks of MR rows x 16 columns, each over all of kc: per k two loads of B,
       MR broadcasts of A and 2 MR FMAs, all accumulators in ymm registers (see UNROLL_M_AVX2). The blocks' columns
       are stored whole where they lie inside nr and under a mask at the edge; rows past mr are computed on the zero
       padding of A and not stored. */
    static const int32_t lane_index[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int j0 = 0; j0 < NR && j0 < nr; j0 += 16) {
        __m256 acc[MR][2];
        UNROLLED(16) for (int r = 0; r < MR; ++r) {
            acc[r][0] = _mm256_setzero_ps();
            acc[r][1] = _mm256_setzero_ps();
        }
        const float* restrict bk = b + j0;
        const float* restrict ak = a;
        UNROLLED(2) for (int64_t k = 0; k < kc; ++k) {
            __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
            UNROLLED(16) for (int r = 0; r < MR; ++r) {
                __m256 av = _mm256_broadcast_ss(ak + r);
                acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
            }
            bk += NR;
            ak += MR;
        }
        UNROLLED(2) for (int v = 0; v < 2; ++v) {
            int64_t lanes = nr - j0 - 8 * v;
            if (lanes <= 0) break;
            __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)MIN(lanes, 8)),
                                              _mm256_loadu_si256((const __m256i*)lane_index));
            UNROLLED(16) for (int r = 0; r < MR; ++r) {
                if (r >= mr) break;
                float* p = c + r * ldc + j0 + 8 * v;
                if (lanes >= 8) {
                    _mm256_storeu_ps(p, overwrite ? acc[r][v] : _mm256_add_ps(acc[r][v], _mm256_loadu_ps(p)));
                } else {
                    __m256 out = overwrite ? acc[r][v] : _mm256_add_ps(acc[r][v], _mm256_maskload_ps(p, mask));
                    _mm256_maskstore_ps(p, mask, out);
                }
            }
        }
    }
#else
    /* Neither AVX-512 nor AVX2 and FMA (SSE-only x86, NEON, or AVX without FMA): the MR x NR tile in blocks of 4 rows x
       16 columns, each over all of kc, with gcc's generic vectors (AVX: 8 accumulators, 2 vectors of B and a broadcast
       of A in ymm registers; SSE or NEON: twice as many narrower ones). A whole MR x NR tile would spill. IN_REGISTER
       keeps x86 gcc from re-reading B from L1 for each FMA (memory operands): 6 loads for 8 FMAs instead of 12, 98 ->
       138 GFLOP/s for a 1024^3 linear on an AMD EPYC Zen 3 (2 cores, 2026-11-25). Rows past MR (when 4 does not divide
       it) repeat its last row, unstored. */
    for (int r0 = 0; r0 < MR && r0 < mr; r0 += 4)
        for (int j0 = 0; j0 < NR && j0 < nr; j0 += 16) {
            vec8 acc[4][2] = {{{0}}};
            for (int64_t k = 0; k < kc; ++k) {
                vec8 b0, b1;
                memcpy(&b0, b + k * NR + j0, sizeof b0);
                memcpy(&b1, b + k * NR + j0 + 8, sizeof b1);
                IN_REGISTER(b0);
                IN_REGISTER(b1);
                UNROLLED(4) for (int r = 0; r < 4; ++r) {
                    float av = a[k * MR + MIN(r0 + r, MR - 1)];
                    acc[r][0] += av * b0;
                    acc[r][1] += av * b1;
                }
            }
            for (int r = 0; r < 4 && r0 + r < mr; ++r) {
                float* p = c + (r0 + r) * ldc + j0;
                if (j0 + 16 <= nr) {  /* a whole row of the block: two vector stores */
                    vec8 c0 = acc[r][0], c1 = acc[r][1];
                    if (!overwrite) {
                        vec8 o0, o1;
                        memcpy(&o0, p, sizeof o0);
                        memcpy(&o1, p + 8, sizeof o1);
                        c0 += o0;
                        c1 += o1;
                    }
                    memcpy(p, &c0, sizeof c0);
                    memcpy(p + 8, &c1, sizeof c1);
                } else {
                    float sum[16];
                    memcpy(sum, acc[r], sizeof sum);
                    for (int j = 0; j < 16 && j0 + j < nr; ++j) p[j] = overwrite ? sum[j] : p[j] + sum[j];
                }
            }
        }
#endif
}


#define BLOCK_Q 64    /* query rows per work item of attention (rounded to a multiple of UNROLL_M) */
/* Causal attention for BLOCK_Q query rows [q0, q1) of one head, as two GEMMs on the micro-kernel with a fused masked
   softmax between them. q and o are (seq, d) with row strides ld_q and ld_o (heads are read and written in place);
   kp holds the head's keys packed as B of S = Q K^T (d deep, panels of NR keys) and vp its values packed as B of
   O = P V (seq deep, panels of NR channels). The scores of the block (rows x keys up to q1) stay in s (row stride
   ld_s), the unnormalised probabilities overwrite them, and the rows of O are divided by their sums at the end;
   keys past q1 are never touched. ap: scratch for the packed rows of Q, then of P. */
static void attend_block(const float* restrict q, int64_t ld_q, const float* restrict kp, const float* restrict vp,
                         float* restrict o, int64_t ld_o, int64_t seq, int64_t d, int64_t q0, int64_t q1,
                         float* restrict s, int64_t ld_s, float* restrict ap, float* restrict inv) {
    int64_t rows = q1 - q0, keys = q1, pa = panels_a(rows), pk = panels_b(keys), pv = panels_b(d);
    float scale = 1.0f / sqrtf((float)d);
    for (int64_t ip = 0; ip < pa; ++ip) pack_a_panel(q + q0 * ld_q, ld_q, 1, rows, d, ip, ap);
    for (int64_t jp = 0; jp < pk; ++jp)
        for (int64_t ip = 0; ip < pa; ++ip) {
            if (jp * NR > q0 + ip * MR + MR - 1) continue;  /* every key of this panel is masked for these rows */
            micro_kernel(d, ap + ip * d * MR, kp + jp * d * NR, s + ip * MR * ld_s + jp * NR, ld_s, 1,
                         MIN(MR, rows - ip * MR), NR);
        }
    for (int64_t r = 0; r < rows; ++r) {
        float* restrict row = s + r * ld_s;
        int64_t n = q0 + r + 1;  /* keys 0 .. q0 + r are visible to query q0 + r */
        float mx = -INFINITY, sum = 0.0f;
        #pragma omp simd reduction(max:mx)
        for (int64_t j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
        #pragma omp simd reduction(+:sum)
        for (int64_t j = 0; j < n; ++j) {
            float p = expf((row[j] - mx) * scale);
            row[j] = p;
            sum += p;
        }
        for (int64_t j = n; j < keys; ++j) row[j] = 0.0f;
        inv[r] = 1.0f / sum;
    }
    for (int64_t ip = 0; ip < pa; ++ip) pack_a_panel(s, ld_s, 1, rows, keys, ip, ap);
    for (int64_t pc = 0; pc < keys; pc += BLOCK_K) {
        int64_t kc = MIN(BLOCK_K, keys - pc);
        for (int64_t jp = 0; jp < pv; ++jp)
            for (int64_t ip = 0; ip < pa; ++ip)
                micro_kernel(kc, ap + ip * keys * MR + pc * MR, vp + jp * seq * NR + pc * NR,
                             o + (q0 + ip * MR) * ld_o + jp * NR, ld_o, pc == 0, MIN(MR, rows - ip * MR),
                             MIN(NR, d - jp * NR));
    }
    for (int64_t r = 0; r < rows; ++r) {
        float* restrict row = o + (q0 + r) * ld_o;
        #pragma omp simd
        for (int64_t c = 0; c < d; ++c) row[c] *= inv[r];
    }
}

/* Causal attention over `heads` heads, inside an OpenMP parallel region: the team packs every head's keys and values
   (kp: heads * panels_b(seq) * NR * d floats, vp: heads * panels_b(d) * NR * seq), then shares out (head, query
   block) items, the costliest (last) blocks first. Head h's q, k, v start at h_stride * h (batch entries of a fused
   qkv: see the callers) with row stride ld_in; its output at o + o_stride * h, row stride ld_o. */
static void attention(const float* restrict q, const float* restrict k, const float* restrict v, int64_t ld_in,
                      float* restrict o, int64_t ld_o, int64_t heads, int64_t heads_per_batch, int64_t batch_in,
                      int64_t head_in, int64_t batch_out, int64_t head_out, int64_t seq, int64_t d,
                      float* restrict kp, float* restrict vp) {
    int64_t pk = panels_b(seq), pv = panels_b(d), size_k = pk * NR * d, size_v = pv * NR * seq;
    int64_t qb = MAX(BLOCK_Q / MR, 1) * MR, nq = (seq + qb - 1) / qb, ld_s = pk * NR;
    #pragma omp for schedule(static) nowait
    for (int64_t i = 0; i < heads * pk; ++i) {
        int64_t h = i / pk, off = h / heads_per_batch * batch_in + h % heads_per_batch * head_in;
        pack_b_panel(k + off, 1, ld_in, d, seq, i % pk, kp + h * size_k);
    }
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < heads * pv; ++i) {
        int64_t h = i / pv, off = h / heads_per_batch * batch_in + h % heads_per_batch * head_in;
        pack_b_panel(v + off, ld_in, 1, seq, d, i % pv, vp + h * size_v);
    }
    float* s = alloc_floats(qb * ld_s);
    float* ap = alloc_floats(panels_a(qb) * MR * MAX(ld_s, d));
    float* inv = alloc_floats(qb);
    #pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < heads * nq; ++item) {
        int64_t blk = nq - 1 - item / heads, h = item % heads;
        int64_t in = h / heads_per_batch * batch_in + h % heads_per_batch * head_in;
        int64_t out = h / heads_per_batch * batch_out + h % heads_per_batch * head_out;
        attend_block(q + in, ld_in, kp + h * size_k, vp + h * size_v, o + out, ld_o, seq, d, blk * qb,
                     MIN(seq, (blk + 1) * qb), s, ld_s, ap, inv);
    }
    free(s);
    free(ap);
    free(inv);
}

/* q, k, v, o: (batch, heads, seq, d), contiguous. */
void causal_attention(const float* restrict q, const float* restrict k, const float* restrict v, float* restrict o,
                      int64_t batch, int64_t heads, int64_t seq, int64_t d) {
    int64_t all = batch * heads;
    float* kp = alloc_floats(all * panels_b(seq) * NR * d);
    float* vp = alloc_floats(all * panels_b(d) * NR * seq);
    #pragma omp parallel
    attention(q, k, v, d, o, d, all, heads, heads * seq * d, seq * d, heads * seq * d, seq * d, seq, d, kp, vp);
    free(kp);
    free(vp);
}
"""
lib = load_c(
    "causal_attention", SOURCE, functions=["causal_attention"],
    flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, heads, seq, d = q.shape
        out = torch.empty_like(q)
        lib.causal_attention(q, k, v, out, batch, heads, seq, d)
        return out
