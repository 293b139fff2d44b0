"""Native seed for ops/mlp_gelu: fc2(gelu(fc1(x))) as two GEMMs, fc1's bias and the GELU (exact, erf) fused into
its epilogue, fc2's bias into the second's.

The GEMM packs B into panels of BLOCK_N columns (zero-padded past N) so that its micro-kernel (UNROLL_M rows x
BLOCK_N columns of accumulators held in vector registers, one FMA per row per vector of B) always runs full width;
OpenMP shares out (TILE_M rows x one panel) tiles; the epilogue is applied as each output is stored."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#define EPILOGUE (mode ? 0.5f * (v + bias[n]) * (1.0f + erff((v + bias[n]) * 0.70710678118654752f)) : v + bias[n])
/* Packed GEMM: B is packed once per call into panels of BLOCK_N columns (zero-padded past N), so the micro-kernel
   (UNROLL_M rows x BLOCK_N columns of accumulators, one FMA per row per vector of B) always runs full width; the
   tail rows of A repeat the last row and are not stored. */
#define TILE_M 64      /* rows of A per OpenMP work item */
#define BLOCK_N 64     /* columns per packed panel of B: the micro-kernel's width */
#define UNROLL_M 4     /* rows per micro-kernel */

/* bp[p][k][j] = B[k][p * BLOCK_N + j]; B is given as (N, K) rows (a Linear weight) when trans_b, else as (K, N). */
static void pack_b(const float* restrict b, float* restrict bp, int64_t K, int64_t N, int trans_b) {
    int64_t panels = (N + BLOCK_N - 1) / BLOCK_N;
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t j = 0; j < BLOCK_N; ++j) {
                int64_t n = p * BLOCK_N + j;
                bp[(p * K + k) * BLOCK_N + j] = n < N ? (trans_b ? b[n * K + k] : b[k * N + n]) : 0.0f;
            }
}

static void gemm_packed(const float* restrict a, int64_t lda, const float* restrict bp, float* restrict c,
                        int64_t ldc, int64_t M, int64_t K, int64_t N, const float* restrict bias,
                        const float* restrict extra, int mode) {
    int64_t panels = (N + BLOCK_N - 1) / BLOCK_N, mtiles = (M + TILE_M - 1) / TILE_M;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t mt = 0; mt < mtiles; ++mt)
        for (int64_t p = 0; p < panels; ++p) {
            const float* restrict panel = bp + p * K * BLOCK_N;
            int64_t n0 = p * BLOCK_N, nn = N - n0 < BLOCK_N ? N - n0 : BLOCK_N;
            int64_t mend = (mt + 1) * TILE_M < M ? (mt + 1) * TILE_M : M;
            for (int64_t m0 = mt * TILE_M; m0 < mend; m0 += UNROLL_M) {
                float acc[UNROLL_M][BLOCK_N];
                const float* rows[UNROLL_M];
                for (int r = 0; r < UNROLL_M; ++r) {
                    rows[r] = a + (m0 + r < mend ? m0 + r : mend - 1) * lda;
                    for (int j = 0; j < BLOCK_N; ++j) acc[r][j] = 0.0f;
                }
                for (int64_t k = 0; k < K; ++k) {
                    const float* restrict bk = panel + k * BLOCK_N;
                    #pragma GCC unroll 16
                    for (int r = 0; r < UNROLL_M; ++r) {
                        float av = rows[r][k];
                        #pragma omp simd
                        for (int j = 0; j < BLOCK_N; ++j) acc[r][j] += av * bk[j];
                    }
                }
                for (int r = 0; r < UNROLL_M && m0 + r < mend; ++r)
                    for (int64_t j = 0; j < nn; ++j) {
                        int64_t m = m0 + r, n = n0 + j;
                        float v = acc[r][j];
                        c[m * ldc + n] = EPILOGUE;
                    }
            }
        }
}

void mlp_gelu(const float* restrict x, const float* restrict w1, const float* restrict b1, const float* restrict w2,
              const float* restrict b2, float* restrict out, int64_t T, int64_t D, int64_t H) {
    int64_t pad_h = (H + BLOCK_N - 1) / BLOCK_N * BLOCK_N, pad_d = (D + BLOCK_N - 1) / BLOCK_N * BLOCK_N;
    float* bp = malloc(sizeof(float) * (D * pad_h > H * pad_d ? D * pad_h : H * pad_d));
    float* hidden = malloc(sizeof(float) * T * H);
    pack_b(w1, bp, D, H, 1);
    gemm_packed(x, D, bp, hidden, H, T, D, H, b1, 0, 1);
    pack_b(w2, bp, H, D, 1);
    gemm_packed(hidden, H, bp, out, D, T, H, D, b2, 0, 0);
    free(hidden);
    free(bp);
}
"""
lib = load_c("mlp_gelu", SOURCE, functions=["mlp_gelu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim, hidden = self.fc1.in_features, self.fc1.out_features
        out = torch.empty((x.numel() // dim, dim), dtype=x.dtype)
        lib.mlp_gelu(x, self.fc1.weight.contiguous(), self.fc1.bias.contiguous(), self.fc2.weight.contiguous(),
                     self.fc2.bias.contiguous(), out, x.numel() // dim, dim, hidden)
        return out.view(x.shape)
