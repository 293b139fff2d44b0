"""evaluator/native_compare.py: the driver's one-pass comparison of float32 outputs judges every value as PyTorch's
float64 path does (the same count of values off, the same largest errors), and hands anything not finite back."""

from __future__ import annotations

import pytest
import torch

from evaluator.correctness import compare
from evaluator.harness_library import native_compare
from evaluator.native_compare import MIN_VALUES, NativeCompare
from evaluator.build.native_build import compiler
from evaluator.verify.probes import all_finite

pytestmark = pytest.mark.skipif(compiler("c") is None, reason="no C compiler builds the harness's library here")


def _native() -> NativeCompare:
    native = native_compare()
    assert native is not None, "a C compiler is here, so the harness's library must build"
    return native


def _float64(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float, scaled: bool) -> tuple[float, float, int]:
    e64, a64 = e.double(), a.double()
    diff, ref = (a64 - e64).abs(), e64.abs()
    if scaled:
        atol += rtol * float(ref.max())
    return float(diff.max()), float((diff / ref.clamp_min(1e-12)).max()), int((diff > atol + rtol * ref).sum())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("scaled", [False, True])
def test_errors_straddling_the_tolerance_are_counted_as_float64_counts_them(seed: int, scaled: bool):
    """Errors drawn around the tolerance's edge, at magnitudes from 1e-30 to 1e30: the count of values off, the
    largest absolute and relative errors are float64's, to the last bit."""
    gen = torch.Generator().manual_seed(seed)
    n = MIN_VALUES + 12_345
    e = torch.randn(n, generator=gen) * torch.pow(10.0, torch.randint(-30, 31, (n,), generator=gen).float())
    atol, rtol = 1e-5 * (seed + 1), 10.0 ** -(seed % 4 + 2)
    edge = atol + rtol * e.double().abs()
    a = (e.double() + edge * (torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1) * 1.5).float()
    errors = _native().errors(e, a, atol, rtol, scaled)
    assert errors is not None
    max_abs, max_rel, off = _float64(e, a, atol, rtol, scaled)
    assert (errors.max_abs, errors.max_rel, errors.off) == (max_abs, max_rel, off)
    assert 0 < off < n or scaled


def test_a_difference_equal_to_the_tolerance_passes_and_one_step_above_fails_in_the_native_pass():
    e = torch.zeros(MIN_VALUES)
    at, above = e.clone(), e.clone()
    at[-1], above[-1] = 2.0**-12, 2.0**-12 + 2.0**-35
    native = _native()
    assert native.errors(e, at, 2.0**-12, 0.0, False).off == 0
    assert native.errors(e, above, 2.0**-12, 0.0, False).off == 1
    assert compare([e], [at], {"atol": 2.0**-12, "rtol": 0.0}).ok
    assert "off in 1 of" in compare([e], [above], {"atol": 2.0**-12, "rtol": 0.0}).reason


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("side", ["expected", "actual"])
def test_a_value_that_is_not_finite_goes_back_to_the_float64_path(bad: float, side: str):
    """Wherever it lies (the last value here), the native pass says nothing about it: the float64 path judges, and
    says where a NaN or an infinity differs."""
    e = torch.ones(MIN_VALUES)
    a = e.clone()
    (e if side == "expected" else a)[-1] = bad
    assert _native().errors(e, a, 1e-4, 1e-4, False) is None
    verdict = compare([e], [a])
    assert not verdict.ok and ("NaN" in verdict.reason or "infinities" in verdict.reason)
    assert not all_finite([e if side == "expected" else a])
    assert all_finite([torch.ones(MIN_VALUES)])


def test_the_large_magnitude_trial_scales_the_absolute_tolerance_by_the_largest_reference_value():
    e = torch.ones(MIN_VALUES)
    e[-1] = 1e6
    a = e.clone()
    a[0] += 50.0  # beyond atol + rtol * 1, inside rtol * 1e6
    native = _native()
    plain, scaled = native.errors(e, a, 1e-4, 1e-4, False), native.errors(e, a, 1e-4, 1e-4, True)
    assert plain is not None and scaled is not None
    assert plain.off == 1 and scaled.off == 0 and scaled.atol == pytest.approx(1e-4 + 1e-4 * 1e6)


def test_only_contiguous_float32_cpu_outputs_large_enough_take_the_native_pass():
    big = torch.zeros(MIN_VALUES)
    assert NativeCompare.takes(big, big)
    assert not NativeCompare.takes(torch.zeros(MIN_VALUES - 1))
    assert not NativeCompare.takes(big.half())
    assert not NativeCompare.takes(torch.zeros(2, MIN_VALUES).t())
    # The others still compare, by PyTorch: an error in a strided float32 view is found.
    e = torch.zeros(2, MIN_VALUES).t()
    a = e.clone()
    a[5, 1] = 1.0
    assert "off in 1 of" in compare([e], [a]).reason
