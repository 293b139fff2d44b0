"""Native seed for ops/conv1d (kernel 5, padding 2).

The convolution ("same" padding, stride 1) is a GEMM per sample: weight (Cout, Cin * taps) times a matrix whose
column n holds the input pixels output n reads; that matrix is never materialised, the im2col is done while packing
B's panels.
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
#define EPILOGUE (v + bias[m])
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

/* bp[p][k][j] for k = (ci, taps) and n = p * BLOCK_N + j an output position: the input pixel that tap reads (zero in
   the padding or past N), so the convolution is the GEMM weight (Cout, Cin * taps) @ this packed matrix. */
static void pack_conv(const float* restrict x, float* restrict bp, int64_t cin, int64_t h, int64_t w, int64_t kh,
                      int64_t kw, int64_t pad_h, int64_t pad_w) {
    int64_t N = h * w, K = cin * kh * kw, panels = (N + BLOCK_N - 1) / BLOCK_N;
    #pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < panels; ++p)
        for (int64_t k = 0; k < K; ++k) {
            int64_t ci = k / (kh * kw), ty = k / kw % kh, tx = k % kw;
            float* restrict dst = bp + (p * K + k) * BLOCK_N;
            for (int64_t j = 0; j < BLOCK_N; ++j) {
                int64_t n = p * BLOCK_N + j, y = n / w + ty - pad_h, xx = n % w + tx - pad_w;
                dst[j] = n < N && y >= 0 && y < h && xx >= 0 && xx < w ? x[(ci * h + y) * w + xx] : 0.0f;
            }
        }
}
void conv(const float* restrict x, const float* restrict weight, const float* restrict bias, float* restrict out,
          int64_t batch, int64_t cin, int64_t cout, int64_t h, int64_t w, int64_t kh, int64_t kw) {
    int64_t N = h * w, K = cin * kh * kw;
    float* bp = malloc(sizeof(float) * K * ((N + BLOCK_N - 1) / BLOCK_N) * BLOCK_N);
    for (int64_t b = 0; b < batch; ++b) {
        pack_conv(x + b * cin * N, bp, cin, h, w, kh, kw, kh / 2, kw / 2);
        gemm_packed(weight, K, bp, out + b * cout * N, N, cout, K, N, bias, 0, 0);
    }
    free(bp);
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
