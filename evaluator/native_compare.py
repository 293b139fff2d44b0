"""The driver's comparison of float32 outputs in one native pass: the harness library's `compare_f32` and `finite_f32`.

Every trial, every recheck of a timed call and every probe's domain check compares or scans whole outputs in the
driver. PyTorch did it in chunks of 32,767 values (`correctness._single_precision_errors`): 30 ms for an 8-million
value output, and 20 ms for `isfinite(...).all()`, about 0.5 s of a cold evaluation of a 31 MiB softmax on 2 cores,
while the candidate's worker waited for the verdict to be asked its next trial. Here one vectorised pass (`omp simd`)
reads both outputs once and judges every value in double precision, operation for operation as the float64 path does
(`|a - e| > atol + rtol * |e|`, the library built with `-ffp-contract=off`, so no fused multiply-add rounds
differently): the count of values off is the float64 path's. 12 ms and 4 ms for 8 million values. It runs on the
driver's own thread, as the chunks did: a parallel region's passive second thread, woken on a machine whose cores
the workers keep busy, cost more than the work. Where a value of either output is not finite, the caller takes
PyTorch's float64 path, which says where.

The library is the driver's own copy of the harness's (`harness_library.native_compare`, built once per machine);
where no compiler built it, PyTorch compares as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evaluator.native import NativeLibrary

SOURCE = r"""
#include <stdint.h>
#include <math.h>
/* a's errors against e, n float32 values each, in double: out[0] the largest |a - e|, out[1] the largest
   |a - e| / max(|e|, 1e-12), out[2] how many values have |a - e| > atol + rtol |e|, out[3] the atol used (with
   scaled != 0, atol + rtol max |e|). Returns 1, or 0 where a value of either is not finite (out is then unset).
   The loops are `omp simd`, on the calling thread: their max reductions vectorise (GCC keeps a plain
   `x > m ? x : m` scalar for NaN's sake, and a NaN here is refused before any figure is used). */
int compare_f32(const float* e, const float* a, int64_t n, double atol, double rtol, int32_t scaled, double* out) {
    if (scaled) {
        double largest = 0.0;
        #pragma omp simd reduction(max:largest)
        for (int64_t i = 0; i < n; ++i) {
            double ref = fabs((double)e[i]);
            largest = ref > largest ? ref : largest;
        }
        atol += rtol * largest;
    }
    double max_abs = 0.0, max_rel = 0.0;
    int64_t off = 0, nonfinite = 0;
    #pragma omp simd reduction(max:max_abs, max_rel) reduction(+:off, nonfinite)
    for (int64_t i = 0; i < n; ++i) {
        double ev = (double)e[i], av = (double)a[i];
        nonfinite += !(isfinite(ev) && isfinite(av));
        double diff = fabs(av - ev), ref = fabs(ev);
        double rel = diff / (ref > 1e-12 ? ref : 1e-12);
        max_abs = diff > max_abs ? diff : max_abs;
        max_rel = rel > max_rel ? rel : max_rel;
        double bound = rtol * ref;
        bound = atol + bound;
        off += diff > bound;
    }
    if (nonfinite) return 0;
    out[0] = max_abs; out[1] = max_rel; out[2] = (double)off; out[3] = atol;
    return 1;
}
/* 1 where every one of n float32 values is finite, else 0 */
int finite_f32(const float* x, int64_t n) {
    int64_t nonfinite = 0;
    #pragma omp simd reduction(+:nonfinite)
    for (int64_t i = 0; i < n; ++i) nonfinite += !isfinite(x[i]);
    return nonfinite == 0;
}
"""
FUNCTIONS = ("compare_f32", "finite_f32")
MIN_VALUES = 1 << 16  # below, PyTorch's own path costs microseconds: not worth a native call's conversions


@dataclass(frozen=True, slots=True)
class Errors:
    max_abs: float
    max_rel: float
    off: int  # values outside atol + rtol |e|
    atol: float  # the absolute tolerance used (scaled by the largest |e| where asked)


class NativeCompare:
    """The harness library's comparison functions, for contiguous float32 CPU tensors of at least MIN_VALUES."""

    def __init__(self, library: NativeLibrary) -> None:
        self._compare, self._finite = library.compare_f32, library.finite_f32

    @staticmethod
    def takes(*tensors: torch.Tensor) -> bool:
        return all(t.dtype == torch.float32 and t.is_cpu and t.is_contiguous() and t.numel() >= MIN_VALUES
                   for t in tensors)

    def errors(self, expected: torch.Tensor, actual: torch.Tensor, atol: float, rtol: float,
               scaled_atol: bool) -> Errors | None:
        """`actual`'s errors against `expected` (same shape, both `takes`), or None where a value is not finite."""
        out = torch.zeros(4, dtype=torch.float64)
        if not self._compare(expected, actual, expected.numel(), float(atol), float(rtol), int(scaled_atol), out):
            return None
        max_abs, max_rel, off, used = out.tolist()
        return Errors(max_abs, max_rel, int(off), used)

    def finite(self, tensor: torch.Tensor) -> bool:
        return bool(self._finite(tensor, tensor.numel()))

