"""Native seed for tiny/relu: OpenMP over blocks of BLOCK elements (static: one contiguous band per thread),
AVX-512 max(0, x) two vectors a step (max with 0 as the first operand passes a NaN through, as torch.relu does),
unmasked except for the tail (masked stores are slow on AMD Zen 4), non-temporal stores for a large output (see
STREAM_FROM_BYTES); a portable loop where AVX-512 is missing."""

import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
#define BLOCK 8192
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
#ifdef __AVX512F__
static inline __m512 op16(__m512 v) { return _mm512_max_ps(_mm512_setzero_ps(), v); }
#endif

/* An output of STREAM_FROM_BYTES or more (with its input of the same size, more than a 32 MiB last-level cache: it
   cannot stay cached for the next operator anyway) is written with non-temporal stores where it starts on a cache
   line: streaming it to memory saves the read of each output line that an ordinary store makes first (a third of
   the traffic). Each thread fences its streamed stores before the region ends. */
#define STREAM_FROM_BYTES (16 << 20)
void relu(const float* restrict x, float* restrict out, int64_t n) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    int stream = n * (int64_t)sizeof(float) >= STREAM_FROM_BYTES && ((uintptr_t)out & 63) == 0;
    (void)stream;
    #pragma omp parallel
    {
    #pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t i = b * BLOCK, end = i + BLOCK < n ? i + BLOCK : n;
#ifdef __AVX512F__
        if (stream)  /* blocks start on cache lines: BLOCK floats are whole lines */
            for (; i + 32 <= end; i += 32) {
                _mm512_stream_ps(out + i, op16(_mm512_loadu_ps(x + i)));
                _mm512_stream_ps(out + i + 16, op16(_mm512_loadu_ps(x + i + 16)));
            }
        for (; i + 32 <= end; i += 32) {
            _mm512_storeu_ps(out + i, op16(_mm512_loadu_ps(x + i)));
            _mm512_storeu_ps(out + i + 16, op16(_mm512_loadu_ps(x + i + 16)));
        }
        for (; i + 16 <= end; i += 16) _mm512_storeu_ps(out + i, op16(_mm512_loadu_ps(x + i)));
        if (i < end) {  /* masked stores are slow on some CPUs (AMD Zen 4): only the tail uses one */
            __mmask16 k = tail16(end - i);
            _mm512_mask_storeu_ps(out + i, k, op16(_mm512_maskz_loadu_ps(k, x + i)));
        }
#else
        for (; i < end; ++i) out[i] = x[i] > 0.0f ? x[i] : (x[i] != x[i] ? x[i] : 0.0f);
#endif
    }
#ifdef __AVX512F__
    _mm_sfence();
#endif
    }
}
"""
lib = load_c("relu", SOURCE, functions=["relu"], flags=["-O3", "-march=native", "-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
