"""Comparing a candidate's outputs with the reference's, in the trusted driver."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evaluator.task_runtime import DEFAULT_TOLERANCE


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
        atol, rtol = tolerance_for(e.dtype, override)
        if scaled_atol and ref.numel():
            atol += rtol * float(ref.max())
        bad = diff > atol + rtol * ref
        if bool(bad.any()):
            n = int(bad.sum())
            return Comparison(False, f"output {i} is off in {n} of {e.numel()} values (max abs error {max_abs:.3g}, "
                                     f"tolerance atol={atol:g}, rtol={rtol:g})", worst_abs, worst_rel)
    return Comparison(True, "matches the reference", worst_abs, worst_rel)
