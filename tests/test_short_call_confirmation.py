"""Claims on calls too short for the driver's per-call clock check are confirmed by the driver's clock over batches.

The per-call check (`clock_checks.call_gap`) lets the worker's timer leave out 0.15 ms and the noise of the medians
around each call; on calls of tens of microseconds that is more than the whole claimed call, so a lagging timer could
claim several times its kernel's speed below the suspicious threshold. `clock_confirmation.claim_bound` sends such a
claim (a speedup above 1) to the driver's batch clock, and refuses it where it is more than twice what that clock
confirms. The driver's clock is a seam here (`outer_per_call_ms`); the honest small kernels of `tests/honest/` go
through the real one in `tests/test_cheats.py`.
"""

from __future__ import annotations

import contextlib

import pytest

from evaluator.config import EvalConfig
from evaluator.measure import clock_confirmation
from evaluator.measure.blocks import Measurement
from evaluator.measure.clock_confirmation import (CLAIM_OVER_CONFIRMED, SHORT_CALL_CLAIM_OVER_CONFIRMED, claim_bound,
                                                  confirm_speedup)
from evaluator.result import Timing

CFG = EvalConfig(device="cpu")


def measurement(ref_ms: float, cand_ms: float, allowance_ms: float | None) -> Measurement:
    return Measurement(Timing.from_samples([ref_ms] * 5), Timing.from_samples([cand_ms] * 5), [],
                       per_call_allowance_ms=allowance_ms)


@pytest.mark.parametrize("ref_ms, cand_ms, allowance_ms, bound", [
    (0.06, 0.03, 0.2, SHORT_CALL_CLAIM_OVER_CONFIRMED),  # 2x on a 0.03 ms call the per-call check allows 0.2 ms around
    (6.0, 3.0, 0.3, None),                                # the same claim on 3 ms calls: the per-call check holds it
    (0.03, 0.05, 0.2, None),                              # no speedup claimed: nothing to confirm
    (0.06, 0.03, None, None),                             # a GPU's events: no per-call host clock check applies
    (1.0, 0.05, 0.2, CLAIM_OVER_CONFIRMED),               # above the suspicious threshold: as before
])
def test_which_claims_the_drivers_clock_must_confirm(ref_ms, cand_ms, allowance_ms, bound):
    assert claim_bound(measurement(ref_ms, cand_ms, allowance_ms), CFG) == bound


def test_a_short_call_claim_is_refused_above_twice_what_the_batches_confirm(monkeypatch):
    seen: list[str] = []

    def run(outer_ms: dict[str, float]) -> clock_confirmation.Confirmed:
        monkeypatch.setattr(clock_confirmation, "outer_per_call_ms",
                            lambda conn, median_ms, cfg: (seen.append(conn), outer_ms[conn])[1])
        return confirm_speedup("ref", "cand", CFG, measurement(0.06, 0.015, 0.2),  # type: ignore[arg-type]
                               lambda what: contextlib.nullcontext())

    lying = run({"ref": 0.06, "cand": 0.05})  # a 4x claim, 1.2x by the driver's clock: three rounds, all short
    assert not lying.ok and lying.short_calls and not lying.suspicious
    assert seen.count("cand") == clock_confirmation.OUTER_ROUNDS and lying.outer_speedup == pytest.approx(1.2)
    seen.clear()
    honest = run({"ref": 0.06, "cand": 0.025})  # 2.4x there: the 4x claim is within twice that
    assert honest.ok and honest.short_calls and seen == ["ref", "cand"]
    assert "too short" in honest.note() and "2.40x there" in honest.note()


def test_a_long_call_claim_never_pays_for_the_batches(monkeypatch):
    monkeypatch.setattr(clock_confirmation, "outer_per_call_ms", lambda *a: pytest.fail("batches were timed"))
    confirmed = confirm_speedup("ref", "cand", CFG, measurement(6.0, 3.0, 0.3),  # type: ignore[arg-type]
                                lambda what: contextlib.nullcontext())
    assert confirmed.ok and not confirmed.short_calls and confirmed.speedup == pytest.approx(2.0)
    assert confirmed.note() == ""
