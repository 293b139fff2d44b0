"""Tolerances from the exact answer (`evaluator/worker/exact_reference.py`): a kernel more exact than PyTorch passes, a
precision downgrade does not, and the plain verdict stands where the exact answer cannot help."""

from __future__ import annotations

import torch

from evaluator.correctness import compare
from evaluator.worker.exact_reference import judge, no_exact, retriable


def _deep_matmul(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(fp32 reference, float64 exact, the exact product rounded once to fp32) for a 192x1024 @ 1024x192 on N(0,1)*4
    inputs, the shape where float32 BLAS is off by more than the default tolerance."""
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(192, 1024, generator=g) * 4, torch.randn(1024, 192, generator=g) * 4
    exact = a.double() @ b.double()
    return a @ b, exact, exact.float()


def test_a_kernel_more_exact_than_pytorch_is_refused_by_the_plain_rule_and_accepted_against_the_exact_answer():
    expected, exact, double_accumulated = _deep_matmul()
    plain = compare([expected], [double_accumulated])
    assert not plain.ok and retriable(plain)  # the false refusal this module exists for
    verdict = judge([expected], [double_accumulated], [exact], None, False, plain)
    assert verdict.ok, verdict.reason
    assert verdict.max_abs_error < 1e-3


def test_a_kernel_rounding_in_another_float32_order_is_accepted():
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(192, 1024, generator=g) * 4, torch.randn(1024, 192, generator=g) * 4
    expected, exact = a @ b, a.double() @ b.double()
    chunked = sum(a[:, k:k + 128] @ b[k:k + 128] for k in range(0, 1024, 128))  # another summation order
    assert isinstance(chunked, torch.Tensor)
    plain = compare([expected], [chunked])
    verdict = plain if plain.ok else judge([expected], [chunked], [exact], None, False, plain)
    assert verdict.ok, verdict.reason


def test_float16_inside_a_float32_operator_stays_refused():
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(192, 1024, generator=g) * 4, torch.randn(1024, 192, generator=g) * 4
    expected, exact = a @ b, a.double() @ b.double()
    downgraded = (a.half().float() @ b.half().float())  # inputs rounded to fp16, as the fp16-inside cheats do
    plain = compare([expected], [downgraded])
    assert retriable(plain)
    verdict = judge([expected], [downgraded], [exact], None, False, plain)
    assert not verdict.ok
    assert "exact (float64) answer" in verdict.reason and "reference's own worst error" in verdict.reason


def test_bfloat16_on_the_large_magnitude_trial_stays_refused():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4096, generator=g) * 1e5
    expected, exact = x * 3.0, x.double() * 3.0
    downgraded = (x.bfloat16() * 3.0).float()
    plain = compare([expected], [downgraded], scaled_atol=True)
    assert retriable(plain)
    assert not judge([expected], [downgraded], [exact], None, True, plain).ok


def test_an_exact_reference_does_not_widen_an_elementwise_operator_that_pytorch_rounds_once():
    # relu is exact in float32: the reference's own error is 0, so the tolerance is the task's alone
    x = torch.randn(1000, generator=torch.Generator().manual_seed(5))
    expected, exact = torch.relu(x), torch.relu(x.double())
    wrong = expected.clone()
    wrong[7] += 1e-3
    plain = compare([expected], [wrong])
    verdict = judge([expected], [wrong], [exact], None, False, plain)
    assert not verdict.ok and "1 of 1000" in verdict.reason


def test_nan_shapes_and_counts_are_not_retried():
    e = torch.ones(4)
    a = e.clone()
    a[0] = float("nan")
    assert not retriable(compare([e], [a]))
    assert not retriable(compare([e], [torch.ones(5)]))
    assert not retriable(compare([e], [e, e]))
    assert not retriable(compare([e], [e]))  # a pass is never retried


def test_nan_where_the_reference_has_none_keeps_the_plain_verdict():
    e, x = torch.ones(4), torch.ones(4, dtype=torch.float64)
    a = e.clone()
    a[1] = float("nan")
    plain = compare([e], [a])
    assert judge([e], [a], [x], None, False, plain) is plain


def test_without_a_float64_path_the_plain_verdict_stands_and_says_why():
    expected, _, double_accumulated = _deep_matmul()
    plain = compare([expected], [double_accumulated])
    verdict = no_exact(plain, "RuntimeError: \"addmm\" not implemented for 'Double'")
    assert not verdict.ok
    assert verdict.reason.startswith(plain.reason) and "no float64 path" in verdict.reason


def test_a_float64_reference_of_other_shapes_keeps_the_plain_verdict():
    expected, exact, double_accumulated = _deep_matmul()
    plain = compare([expected], [double_accumulated])
    verdict = judge([expected], [double_accumulated], [exact[:10]], None, False, plain)
    assert not verdict.ok and "other shapes" in verdict.reason
