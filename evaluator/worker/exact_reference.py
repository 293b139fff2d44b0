"""Tolerances from the exact answer: a candidate that missed the reference's tolerance is judged again against a
float64 run of the reference, where the task's operators have one.

Why: the reference is PyTorch in the task's own precision, and its own rounding is an error too. A float32 matmul at
K=1024 on inputs of N(0, 1) * 4 is further than atol 1e-4 from the exact product in hundreds of values, so a kernel
that accumulates in double -- closer to the exact answer than PyTorch -- differed from PyTorch by more than the
tolerance and was refused as incorrect, as was any kernel that rounds in another order than the same BLAS.

The rule (`judge`), for each floating output whose plain comparison failed, with x the float64 reference, e the
reference's own output, a the candidate's, and (atol, rtol) the task's tolerance (atol scaled as in the plain
comparison on the large-magnitude trial):

    |a - x| <= atol + rtol |x| + K * max |e - x|      (every finite value; NaN and infinities as the plain rule)

`max |e - x|` is the reference's own rounding, its worst value over the output: the noise floor that PyTorch in
this precision reaches on these inputs. A kernel as exact as PyTorch, rounding in another order, has errors of the
same size at other places: K = 4 leaves it room (the worst of two such error fields differs by far less). A kernel
more exact than PyTorch (double accumulation) has |a - x| near 0 and always passes. A precision downgrade does not:
float16 or bfloat16 inside a float32 operator has errors 2**13 to 2**16 times float32's rounding, thousands of times
beyond K, so the fp16-inside-fp32 cheats stay refused. The floor is the worst value rather than each value's own
error because one value's rounding error is a chance quantity (it can be exactly 0 where the candidate's is not);
the worst over the output measures how far float32 can be from exact on these inputs at all.

Ops with no float64 path (an operator without a double kernel, a task that casts to its own dtype inside the
forward, integer or boolean outputs): the reference worker says so (`NO_EXACT`), and the plain comparison's verdict
stands, its reason saying that no float64 reference was available.

The float64 run is asked only when the plain comparison fails, so correct candidates cost nothing more.
"""

from __future__ import annotations

import torch

from evaluator.correctness import Comparison, tolerance_for

K_REFERENCE_ERROR = 4.0  # how many times the reference's worst rounding error a candidate may be off by
NO_EXACT = "no-exact"  # the reference worker's status when the forward has no float64 path


def as_float64(value: object) -> object:
    """A floating tensor in float64 (other values unchanged): the exact reference's inputs."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(torch.float64)
    return value


def float64_model(model: torch.nn.Module) -> torch.nn.Module:
    """The reference model with every floating parameter and buffer in float64 (a float32 weight converts exactly)."""
    return model.to(torch.float64)


def judge(expected: list[torch.Tensor], actual: list[torch.Tensor], exact: list[torch.Tensor],
          override: dict[str, float] | None, scaled_atol: bool, plain: Comparison) -> Comparison:
    """The verdict against the exact answer of outputs whose plain comparison (`plain`) failed on values off."""
    if len(exact) != len(expected) or any(x.shape != e.shape for x, e in zip(exact, expected)):
        return _fallback(plain, "the float64 reference returned other shapes")
    worst_abs = worst_rel = 0.0
    for i, (e, a, x) in enumerate(zip(expected, actual, exact)):
        if e.numel() == 0 or not e.is_floating_point():
            continue
        if not x.is_floating_point():
            return _fallback(plain, f"output {i} of the float64 reference is not floating")
        x64, e64, a64 = x.to(torch.float64), e.to(torch.float64), a.to(torch.float64)
        if not torch.equal(torch.isnan(e64), torch.isnan(a64)) or not torch.equal(torch.isinf(e64), torch.isinf(a64)):
            return plain  # NaN or infinities: the plain rule's verdict (it said where)
        finite = torch.isfinite(x64) & torch.isfinite(e64) & torch.isfinite(a64)
        if not bool(finite.any()):
            continue
        x64, e64, a64 = x64[finite], e64[finite], a64[finite]
        atol, rtol = tolerance_for(e.dtype, override)
        if scaled_atol:
            atol += rtol * float(x64.abs().max())
        floor = K_REFERENCE_ERROR * float((e64 - x64).abs().max())
        err = (a64 - x64).abs()
        worst_abs = max(worst_abs, float(err.max()))
        worst_rel = max(worst_rel, float((err / x64.abs().clamp_min(1e-12)).max()))
        bad = err > atol + rtol * x64.abs() + floor
        if bool(bad.any()):
            return Comparison(False, f"output {i} is off in {int(bad.sum())} of {e.numel()} values against the exact "
                                     f"(float64) answer (max abs error {float(err.max()):.3g}, tolerance atol="
                                     f"{atol:g}, rtol={rtol:g}, plus {K_REFERENCE_ERROR:g} times the reference's own "
                                     f"worst error {floor / K_REFERENCE_ERROR:.3g})", worst_abs, worst_rel)
    return Comparison(True, "matches the exact (float64) answer at least as well as the reference, within its "
                            "tolerance", worst_abs, worst_rel)


def _fallback(plain: Comparison, why: str) -> Comparison:
    return Comparison(False, f"{plain.reason}; {why}, so the comparison is with the reference alone",
                      plain.max_abs_error, plain.max_rel_error)


def no_exact(plain: Comparison, why: str) -> Comparison:
    """The plain verdict where the reference has no float64 path, saying so."""
    return _fallback(plain, f"the reference has no float64 path ({why})")


def retriable(plain: Comparison) -> bool:
    """Whether a failed plain comparison is one the exact answer can overturn: values off, not shapes, dtypes,
    counts, NaN or infinities."""
    return not plain.ok and " is off in " in plain.reason
