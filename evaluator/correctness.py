"""Comparing a candidate's outputs with the reference's, in the trusted driver."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from evaluator.harness_library import native_compare
from evaluator.native_compare import NativeCompare
from evaluator.worker.task_runtime import DEFAULT_TOLERANCE


@dataclass(frozen=True, slots=True)
class Comparison:
    ok: bool
    reason: str
    max_abs_error: float
    max_rel_error: float


def tolerance_for(dtype: torch.dtype, override: dict[str, float] | None) -> tuple[float, float]:
    if override:
        return float(override.get("atol", 1e-4)), float(override.get("rtol", 1e-4))
    t = DEFAULT_TOLERANCE.get(dtype, 0.0)
    return t, t


def compare(expected: list[torch.Tensor], actual: list[torch.Tensor],
            override: dict[str, float] | None = None, scaled_atol: bool = False) -> Comparison:
    """With `scaled_atol` (the large-magnitude trial), each output's absolute tolerance grows by rtol times its
    largest value: rounding in a sum of large terms that nearly cancel stays inside it, while overflow, saturation
    or a narrower format (errors of the order of the values themselves) do not."""
    if len(expected) != len(actual):
        return Comparison(False, f"returned {len(actual)} output(s), the reference returns {len(expected)}", 0.0, 0.0)
    worst_abs = worst_rel = 0.0
    for i, (e, a) in enumerate(zip(expected, actual)):
        if a.shape != e.shape:
            return Comparison(False, f"output {i} has shape {tuple(a.shape)}, expected {tuple(e.shape)}", 0.0, 0.0)
        if a.dtype != e.dtype:
            return Comparison(False, f"output {i} has dtype {a.dtype}, expected {e.dtype}", 0.0, 0.0)
        if e.numel() == 0:
            continue
        if e.dtype == torch.bool or not (e.is_floating_point() or e.is_complex()):
            mismatched = int((a != e).sum())
            if mismatched:
                return Comparison(False, f"output {i} differs in {mismatched} of {e.numel()} exact values", 0.0, 0.0)
            continue
        atol, rtol = tolerance_for(e.dtype, override)
        fast = _fast_errors(e, a, atol, rtol, scaled_atol)
        if fast is not None:
            max_abs, max_rel, n, atol = fast
            worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
            if n:
                return Comparison(False, f"output {i} is off in {n} of {e.numel()} values (max abs error "
                                         f"{max_abs:.3g}, tolerance atol={atol:g}, rtol={rtol:g})", worst_abs, worst_rel)
            continue
        e64, a64 = e.to(torch.float64), a.to(torch.float64)
        e_nan, a_nan = torch.isnan(e64), torch.isnan(a64)
        if not torch.equal(e_nan, a_nan):
            return Comparison(False, f"output {i} has NaN where the reference has none, or the reverse", 0.0, 0.0)
        e_inf, a_inf = torch.isinf(e64), torch.isinf(a64)
        if not torch.equal(e_inf, a_inf) or not torch.equal(e64[e_inf], a64[a_inf]):
            return Comparison(False, f"output {i} has infinities where the reference has none, or the reverse",
                              0.0, 0.0)
        finite = ~(e_nan | e_inf)
        diff = (a64 - e64).abs()[finite]
        ref = e64.abs()[finite]
        if diff.numel() == 0:
            continue
        max_abs = float(diff.max())
        max_rel = float((diff / ref.clamp_min(1e-12)).max())
        worst_abs, worst_rel = max(worst_abs, max_abs), max(worst_rel, max_rel)
        if scaled_atol and ref.numel():
            atol += rtol * float(ref.max())
        bad = diff > atol + rtol * ref
        if bool(bad.any()):
            n = int(bad.sum())
            return Comparison(False, f"output {i} is off in {n} of {e.numel()} values (max abs error {max_abs:.3g}, "
                                     f"tolerance atol={atol:g}, rtol={rtol:g})", worst_abs, worst_rel)
    return Comparison(True, "matches the reference", worst_abs, worst_rel)


def _fast_errors(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float,
                 scaled_atol: bool) -> tuple[float, float, int, float] | None:
    """(max abs error, max rel error, values off, the absolute tolerance used) by the harness library's one native
    pass where it takes the outputs (`native_compare.py`), else by PyTorch in chunks; None (a value not finite, an
    overflow, another dtype) for the float64 path, which says where."""
    native = native_compare() if NativeCompare.takes(e, a) else None
    if native is None:
        return _single_precision_errors(e, a, atol, rtol, scaled_atol)
    errors = native.errors(e, a, atol, rtol, scaled_atol)
    return None if errors is None else (errors.max_abs, errors.max_rel, errors.off, errors.atol)


SINGLE_PRECISION = (torch.float32, torch.float16, torch.bfloat16)
SUSPECT_MARGIN = 1e-5  # far above single precision's rounding of a difference and of a threshold (2**-22)
# Below ATen's grain size (32768), so each step of a chunk runs on the calling thread: a dozen short steps would
# otherwise each open an OpenMP parallel region whose sleeping thread (the passive waiting that
# `zygote_env.openmp_environment` sets) must be woken and scheduled, which on a busy machine cost more than the work
# (an 8-million-value output on 2 cores at load 8: 0.27 s a comparison before, 0.04 s in these chunks). A chunk's
# operands and temporaries (about 0.6 MiB) stay in a core's L2 cache.
CHUNK_VALUES = (1 << 15) - 1


def _single_precision_errors(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float,
                             scaled_atol: bool) -> tuple[float, float, int, float] | None:
    """The common case at a fraction of the float64 path's cost (an 8-million-value output: 2 s there): outputs of at
    most single precision, every difference finite. Differences and thresholds in float32 are within 2**-22 of the
    float64 ones, so every value the float64 test would fail is among the suspects (difference above the threshold
    less `SUSPECT_MARGIN`), and the suspects alone are then judged in float64: the count of values off is the float64
    path's. The outputs are walked in chunks (`CHUNK_VALUES`): on one thread, from cache. Returns (max abs error,
    max rel error, values off, the absolute tolerance used), or None (a NaN, an infinity, an overflow, another dtype)
    for the float64 path."""
    if e.dtype not in SINGLE_PRECISION:
        return None
    e_flat, a_flat = e.reshape(-1), a.reshape(-1)
    if scaled_atol:
        low_e, high_e = torch.aminmax(e_flat)
        atol += rtol * max(abs(float(low_e)), abs(float(high_e)))  # NaN here fails the finiteness check below
    if atol < 1e-30:
        return None  # a threshold that float32 rounds badly
    low = 1 - SUSPECT_MARGIN
    max_abs = max_rel = 0.0
    off = 0
    for start in range(0, e_flat.numel(), CHUNK_VALUES):
        e32 = e_flat[start:start + CHUNK_VALUES].to(torch.float32)
        a32 = a_flat[start:start + CHUNK_VALUES].to(torch.float32)
        diff = torch.sub(a32, e32).abs_()
        chunk_abs = float(diff.max())
        if not math.isfinite(chunk_abs):
            return None
        max_abs = max(max_abs, chunk_abs)
        ref = e32.abs()
        suspects = torch.gt(diff, torch.mul(ref, rtol * low).add_(atol * low))
        max_rel = max(max_rel, float(diff.div_(ref.clamp_min_(1e-12)).max()))
        if bool(suspects.any()):
            e64, a64 = e32[suspects].to(torch.float64), a32[suspects].to(torch.float64)
            off += int(((a64 - e64).abs() > atol + rtol * e64.abs()).sum())
    return max_abs, max_rel, off, atol
