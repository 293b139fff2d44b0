"""An unconfirmed speedup is measured again before it is refused (`clock_confirmation.MEASUREMENTS_BEFORE_REFUSING`).

On the first GPU run an honest Triton ReLU on a launch-bound shape was once timed at 36x its reference by the worker's
timer and refused as timer tampering, while the driver's clock said 0.9x. The driver's confirmation is the seam here:
a scripted one answers "not confirmed" for the first measurement (or for every one), around a real evaluation of an
honest native kernel. The forged clocks themselves stay in tests/cheats/ (native_clock_swap, timer_patch_obfuscated).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator.measure.clock_confirmation import MEASUREMENTS_BEFORE_REFUSING, Confirmed

evaluate_module = importlib.import_module("evaluator.driver.evaluate")  # the package exports a function of that name
TESTS = Path(__file__).resolve().parent
# Every claim counts as suspicious (as a 36x one does), so the reference stays open for the driver's clock.
CONFIG = EvalConfig(device="cpu", profile=False, max_timing_s=0.3, suspicious_speedup=0.0)


def _scripted(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> list[int]:
    """Replace the driver's confirmation with `answers` (one per measurement); returns the list of calls made."""
    calls: list[int] = []
    measures: list[int] = []
    real_measure = evaluate_module.measure

    def counted_measure(*args, **kwargs):
        measures.append(1)
        return real_measure(*args, **kwargs)

    def confirm(ref, cand, cfg, m, timed_phase):
        calls.append(len(measures))
        ok = answers[min(len(calls), len(answers)) - 1]
        return Confirmed(40.0, suspicious=True, outer_speedup=40.0 if ok else 0.9, ok=ok)

    monkeypatch.setattr(evaluate_module, "measure", counted_measure)
    monkeypatch.setattr(evaluate_module, "confirm_speedup", confirm)
    return calls


def _evaluate():
    task = load_task(TESTS / "tasks" / "relu.py")
    return evaluate_module.LocalEvaluator().evaluate(task, load_candidate(TESTS / "honest" / "relu_openmp_c.py"),
                                                     CONFIG)


def test_a_first_unconfirmed_claim_is_measured_again_and_the_confirmed_one_is_kept(monkeypatch):
    calls = _scripted(monkeypatch, [False, True])
    result = _evaluate()
    assert result.status == Status.OK, result.reason
    assert calls == [1, 2]  # a second whole measurement, then its confirmation
    assert "a first measurement's 40.0x was not confirmed by the driver's clock (0.9x there)" in result.reason


def test_a_claim_the_driver_never_confirms_is_refused_after_every_measurement(monkeypatch):
    calls = _scripted(monkeypatch, [False])
    result = _evaluate()
    assert result.status == Status.REJECTED
    assert len(calls) == MEASUREMENTS_BEFORE_REFUSING == 2
    assert "by the driver's own clock, in 2 measurements (timer tampering?)" in result.reason
