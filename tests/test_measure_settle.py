"""The timing protocol's stopping rule and deep checks (issue 18): a side of microsecond calls settles on the precision
floor instead of running to its time cap, slow calls still need the relative rule, and the candidate's worker compares
the whole dispatch table after exactly one of its first blocks, drawn in advance."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from evaluator.measure import blocks as measure
from evaluator.measure.clock_checks import CandidateClock
from evaluator.wire.commands import Clock, Go, NextCall, Time
from evaluator.driver.connection import Refused
from evaluator.config import EvalConfig
from evaluator.measure.blocks import DEEP_CHECK_BLOCKS, SideRecord, precision_floor_ms
from evaluator.result import EvalResult, Status, Timing, median_standard_error_ms
from evaluator.wire.replies import parse


class Quiet:
    """A meter of the machine's other work that never sees any (the real one reads this machine's load)."""

    def start(self) -> None:
        pass

    def cores(self) -> float | None:
        return 0.0


QUIET = Quiet()


class FakeWorker:
    """Answers the driver's timing protocol (`blocks._block`) with calls drawn around `median_ms`, spread by
    `spread` (uniform, relative), without running anything: records which blocks were asked for a deep check."""

    def __init__(self, median_ms: float, spread: float, seed: int) -> None:
        self.median_ms, self.spread = median_ms, spread
        self.rng = random.Random(seed)
        self.pending: list[dict[str, Any]] = []
        self.blocks = 0
        self.deep_checks: list[int] = []

    def send(self, cmd: Any) -> None:
        if isinstance(cmd, Time) or (isinstance(cmd, NextCall) and cmd.next_seed is not None):
            self.pending.append({"status": "armed"})
        if isinstance(cmd, Go):
            self.pending.append({"status": "rep", "ms": self.median_ms * (1 + self.spread * (self.rng.random() - 0.5))})
        if isinstance(cmd, NextCall):
            if cmd.next_seed is None:
                if cmd.check:
                    self.deep_checks.append(self.blocks)
                self.blocks += 1
                self.pending.append({"status": "timed", "kernels": {}, "left_running_ms": 0.0})

    def read_outputs(self, layout: object) -> list[Any]:
        """The driver's read of a call's outputs from the shared file: none here (nothing runs)."""
        return []

    def recv_as(self, kind: type[Any], timeout_s: float, doing: str) -> tuple[Any, list[Any]]:
        reply = parse(self.pending.pop(0))  # as the driver's connection reads a worker's header
        assert isinstance(reply, kind)
        return reply, []


def test_a_side_of_microsecond_calls_settles_on_the_precision_floor_not_on_its_time_cap():
    """10 us calls spread over +-20 %: the median is known to 1 % only after some 800 calls, but to the CPU's floor
    (1 us) after its first blocks. The side used to run to its cap (or `max_reps`) every time."""
    cfg = EvalConfig(max_timing_s=600.0, max_reps=1000)  # no time cap in reach: only the rule can end a side
    ref, cand = FakeWorker(0.010, 0.4, 1), FakeWorker(0.012, 0.4, 2)
    m = measure.measure(ref, cand, cfg, "cpu", QUIET)  # type: ignore[arg-type] # the protocol's fake
    for timing in (m.reference_ms, m.candidate_ms):
        assert timing.reps < 100
        assert timing.se_ms is not None and timing.se_ms < precision_floor_ms("cpu")
        assert timing.se_ms / timing.median_ms > cfg.target_rse  # settled on the floor, not on the relative rule


def test_without_the_floor_the_same_side_runs_to_its_limit():
    cfg = EvalConfig(max_timing_s=600.0, max_reps=400)
    rec = SideRecord(floor_ms=0.0)
    worker = FakeWorker(0.010, 0.8, 3)  # +-40 %: the relative rule needs some 1,400 calls
    while not rec.done(cfg):
        measure._block(worker, rec, cfg, None, first=rec.blocks == 0)  # type: ignore[arg-type]
    assert len(rec.samples_ms) >= cfg.max_reps


def test_slow_noisy_calls_still_settle_on_the_relative_rule_alone():
    """At 5 ms a call the floor (1 us) is far below 1 % of the median: it changes nothing there."""
    cfg = EvalConfig(min_reps=10)
    rng = random.Random(4)
    xs = [5.0 * (1 + 0.4 * (rng.random() - 0.5)) for _ in range(50)]
    se_ms, median_ms = median_standard_error_ms(xs)
    assert se_ms > cfg.target_rse * median_ms  # not settled by the relative rule
    assert not SideRecord(samples_ms=xs, floor_ms=precision_floor_ms("cpu")).settled(cfg)
    tight = [5.0 + 0.001 * i for i in range(50)]
    assert SideRecord(samples_ms=tight, floor_ms=0.0).settled(cfg)


def test_the_floor_needs_the_sample_floor_first():
    cfg = EvalConfig(min_reps=10)
    assert not SideRecord(samples_ms=[0.01] * 9, floor_ms=1e-3).settled(cfg)
    assert SideRecord(samples_ms=[0.01] * 10, floor_ms=1e-3).settled(cfg)


@pytest.mark.parametrize("drawn", range(DEEP_CHECK_BLOCKS))
def test_the_deep_check_falls_on_the_one_block_drawn_in_advance(drawn: int):
    rec = SideRecord(deep_check_block=drawn)
    checks = []
    for block in range(DEEP_CHECK_BLOCKS):
        rec.blocks = block
        checks.append(rec.deep_check_after())
    assert checks == [b == drawn for b in range(DEEP_CHECK_BLOCKS)]
    assert not SideRecord().deep_check_after()  # the reference's worker: never


def test_blocks_past_the_drawn_range_are_still_checked_at_random():
    rec = SideRecord(deep_check_block=0, blocks=DEEP_CHECK_BLOCKS)
    random.seed(5)
    drawn = [rec.deep_check_after() for _ in range(600)]
    assert 0 < sum(drawn) < 600


def test_the_candidates_worker_is_asked_for_one_deep_check_during_timing():
    cfg = EvalConfig(max_timing_s=600.0, max_reps=1000)
    for seed in range(8):
        ref, cand = FakeWorker(0.010, 0.4, seed), FakeWorker(0.010, 0.4, 100 + seed)
        random.seed(seed)
        measure.measure(ref, cand, cfg, "cpu", QUIET)  # type: ignore[arg-type]
        assert ref.deep_checks == []
        assert len(cand.deep_checks) <= 1 and all(b < DEEP_CHECK_BLOCKS for b in cand.deep_checks)
        if cand.blocks >= DEEP_CHECK_BLOCKS:
            assert len(cand.deep_checks) == 1


def test_the_median_standard_error_travels_with_the_timing_record():
    t = Timing.from_samples([1.0, 1.1, 0.9, 1.05, 0.95])
    assert t.se_ms is not None and 0 < t.se_ms < 0.1
    assert Timing.from_samples([1.0]).se_ms is None
    r = EvalResult(Status.OK, "fine", candidate_ms=t, reference_ms=Timing(2.0, 0.1, 50))
    back = EvalResult.from_json(r.to_json())
    assert back.candidate_ms == t
    assert back.reference_ms is not None and back.reference_ms.se_ms is None


def test_a_settled_side_keeping_pace_ends_its_blocks_after_the_fewest_calls_a_block_may_have():
    cfg = EvalConfig(max_timing_s=600.0)
    rec = SideRecord(samples_ms=[0.010] * 60, blocks=3, floor_ms=precision_floor_ms("cpu"))
    assert rec.settled(cfg)
    measure._block(FakeWorker(0.010, 0.1, 6), rec, cfg, None, first=False)  # type: ignore[arg-type]
    assert len(rec.samples_ms) == 60 + measure.MIN_BLOCK_CALLS


def _blocks(rng: random.Random, medians_ms: list[float], calls: int, spread: float) -> SideRecord:
    """A side that has run one block of `calls` calls per median, each spread uniformly by +-spread/2 around it."""
    rec = SideRecord(floor_ms=precision_floor_ms("cpu"))
    for median_ms in medians_ms:
        block = [median_ms * (1 + spread * (rng.random() - 0.5)) for _ in range(calls)]
        rec.samples_ms += block
        rec.block_medians_ms.append(sorted(block)[calls // 2])
        rec.blocks += 1
    return rec


def test_a_side_whose_blocks_drift_apart_is_drifting_and_reports_the_drifts_error():
    """Block medians of 0.10, 0.14 and 0.09 ms (as a 256x1024 ReLU's on a VM whose memory another tenant shares):
    the calls' own error (about 1.5% after 300 calls at +-30%) is far below the drift's, so more calls per block buy
    nothing; the side's reported error is the drift's, not the calls'."""
    cfg = EvalConfig()
    rec = _blocks(random.Random(7), [0.10, 0.14, 0.09], 100, 0.6)
    assert not rec.settled(cfg)  # the 1% rule is not met ...
    assert rec.drifting(cfg)     # ... and cannot be bought with calls
    se_ms, median_ms = median_standard_error_ms(rec.samples_ms)
    timing = rec.timing()
    assert timing.se_ms is not None and timing.se_ms == pytest.approx(rec.drift_se_ms()) and timing.se_ms > 3 * se_ms
    assert timing.se_ms / median_ms > 0.1  # the precision the verdict really has: about 15%, said in the result


def test_the_same_calls_without_drift_are_not_drifting():
    cfg = EvalConfig()
    rec = _blocks(random.Random(7), [0.11, 0.11, 0.11], 100, 0.6)
    assert not rec.settled(cfg) and not rec.drifting(cfg)
    se_ms = median_standard_error_ms(rec.samples_ms)[0]
    reported = rec.timing().se_ms
    assert reported is not None and se_ms <= reported < 2 * se_ms  # the blocks' spread is the calls' own, no more


def test_drift_needs_min_blocks_first():
    cfg = EvalConfig()
    rec = _blocks(random.Random(8), [0.10, 0.14], 100, 0.6)
    assert rec.drift_se_ms() == 0.0 and not rec.drifting(cfg)


def test_without_drift_the_drift_rule_fires_by_chance_in_few_sides():
    """Six blocks of 30-100 calls, no drift: the rule must not end blocks early by chance in more than a few sides
    in a hundred (about 1% simulated), checked as `_block` checks it (every STATS_EVERY calls) and between blocks."""
    cfg = EvalConfig()
    rng = random.Random(9)
    fired = 0
    sides = 300
    for side in range(sides):
        rec = SideRecord(floor_ms=0.0)
        calls_per_block = 30 + side % 71
        for _ in range(measure.DRIFT_BLOCKS):
            calls = 0
            while calls < calls_per_block:
                rec.samples_ms.append(0.2 * rng.lognormvariate(0.0, 0.3))
                calls += 1
                if calls >= measure.MIN_BLOCK_CALLS and (calls - measure.MIN_BLOCK_CALLS) % measure.STATS_EVERY == 0:
                    fired += rec.drifting(cfg)
                    if rec.drifting(cfg):
                        break
            rec.block_medians_ms.append(sorted(rec.samples_ms[-calls:])[calls // 2])
            rec.blocks += 1
            if rec.drifting(cfg):
                break
    assert fired / sides < 0.04


class DriftingWorker(FakeWorker):
    """A FakeWorker whose calls' median moves from block to block (the machine's state drifting)."""

    def __init__(self, medians_ms: list[float], spread: float, seed: int) -> None:
        super().__init__(medians_ms[0], spread, seed)
        self.medians_ms = medians_ms

    def send(self, cmd: Any) -> None:
        self.median_ms = self.medians_ms[self.blocks % len(self.medians_ms)]
        super().send(cmd)


class StepClock:
    """`time` for measure.py: a call's round trip takes `step_s`; the driver reads the clock twice a call (when it
    sends `go` and when the reply comes), so every reading advances half of it."""

    def __init__(self, step_s: float) -> None:
        self.now_s, self.step_s = 0.0, step_s

    def perf_counter(self) -> float:
        self.now_s += self.step_s / 2
        return self.now_s


def test_a_drifting_side_ends_its_later_blocks_early_but_keeps_as_many_blocks_as_a_capped_side(
        monkeypatch: pytest.MonkeyPatch):
    """A 2 s cap and 2 ms a call: the first MIN_BLOCKS blocks run to their share of the cap (about 160 calls, short
    of the 1% rule's 700), and once the drift dominates the side ends its blocks at MIN_BLOCK_CALLS and is done after
    DRIFT_BLOCKS of them, with about half the calls and time the cap would take."""
    monkeypatch.setattr(measure, "time", StepClock(0.002))
    cfg = EvalConfig(max_timing_s=2.0)
    rec = SideRecord(floor_ms=precision_floor_ms("cpu"))
    worker = DriftingWorker([0.10, 0.14, 0.09], 0.6, 10)
    sizes = []
    while not rec.done(cfg):
        before = len(rec.samples_ms)
        measure._block(worker, rec, cfg, None, first=rec.blocks == 0)  # type: ignore[arg-type]
        sizes.append(len(rec.samples_ms) - before)
    assert rec.blocks == measure.DRIFT_BLOCKS
    assert all(n > 100 for n in sizes[:measure.MIN_BLOCKS])
    assert all(n <= measure.MIN_BLOCK_CALLS + measure.STATS_EVERY for n in sizes[measure.MIN_BLOCKS:])
    assert rec.spent_s < 0.6 * cfg.max_timing_s


def test_the_same_side_without_drift_runs_to_its_cap(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(measure, "time", StepClock(0.002))
    cfg = EvalConfig(max_timing_s=2.0)
    rec = SideRecord(floor_ms=precision_floor_ms("cpu"))
    worker = DriftingWorker([0.11], 0.8, 10)  # +-40%: the 1% rule needs some 1,400 calls, the cap gives ~1,000
    while not rec.done(cfg):
        measure._block(worker, rec, cfg, None, first=rec.blocks == 0)  # type: ignore[arg-type]
    assert not rec.drifting(cfg)
    assert rec.spent_s >= cfg.max_timing_s and rec.blocks == 2 * measure.MIN_BLOCKS


def test_a_side_done_by_its_cap_keeps_pace_with_short_blocks(monkeypatch: pytest.MonkeyPatch):
    """Its cap reached, a side only interleaves with the other's remaining blocks: MIN_BLOCK_CALLS calls each, not
    another share of the cap."""
    monkeypatch.setattr(measure, "time", StepClock(0.002))
    cfg = EvalConfig(max_timing_s=2.0, max_reps=5000)
    rec = SideRecord(floor_ms=precision_floor_ms("cpu"))
    worker = DriftingWorker([0.11], 0.8, 11)
    while not rec.done(cfg):
        measure._block(worker, rec, cfg, None, first=rec.blocks == 0)  # type: ignore[arg-type]
    assert rec.spent_s >= cfg.max_timing_s and not rec.settled(cfg)
    before = len(rec.samples_ms)
    measure._block(worker, rec, cfg, None, first=False)  # type: ignore[arg-type]
    assert len(rec.samples_ms) - before == measure.MIN_BLOCK_CALLS


def test_a_settled_side_of_slow_calls_ends_its_block_at_its_share_of_the_sample_floor(monkeypatch: pytest.MonkeyPatch):
    """40 ms a call (a 31 MiB input's draw): MIN_BLOCK_CALLS calls would overrun a block's share of the 2 s cap
    (1/3 s), so the block used to end on its share, 8 calls, though the median was known to 1% already. Settled, it
    now ends at the side's share of the sample floor; unsettled, it still runs to its share."""
    monkeypatch.setattr(measure, "time", StepClock(0.04))
    cfg = EvalConfig(max_timing_s=2.0)
    floor_calls = -(-cfg.min_reps // measure.MIN_BLOCKS)
    settled = SideRecord(samples_ms=[5.0 + 0.001 * i for i in range(12)], blocks=1, floor_ms=precision_floor_ms("cpu"))
    assert settled.settled(cfg)
    measure._block(FakeWorker(5.0, 0.002, 12), settled, cfg, None, first=False)  # type: ignore[arg-type]
    assert len(settled.samples_ms) == 12 + floor_calls
    noisy = SideRecord(samples_ms=[5.0 * (1 + 0.8 * (i % 5 - 2) / 4) for i in range(12)], blocks=1)
    assert not noisy.settled(cfg)
    measure._block(FakeWorker(5.0, 0.8, 13), noisy, cfg, None, first=False)  # type: ignore[arg-type]
    assert len(noisy.samples_ms) - 12 >= 8  # its whole share: 1/3 s at 40 ms a call


def test_the_first_block_of_slow_calls_still_has_the_sample_floor_before_the_rule(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(measure, "time", StepClock(0.04))
    cfg = EvalConfig(max_timing_s=2.0)
    rec = SideRecord(floor_ms=precision_floor_ms("cpu"))
    measure._block(FakeWorker(5.0, 0.002, 14), rec, cfg, None, first=True)  # type: ignore[arg-type]
    assert len(rec.samples_ms) >= 8  # not settled before min_reps: the block runs to its share


def test_blocks_of_faster_calls_end_on_the_rule_only_from_min_block_calls(monkeypatch: pytest.MonkeyPatch):
    """20 ms a call: MIN_BLOCK_CALLS of them fit in a block's share, so a settled side's block still has them (the
    drift rule's block medians need them)."""
    monkeypatch.setattr(measure, "time", StepClock(0.02))
    cfg = EvalConfig(max_timing_s=2.0)
    rec = SideRecord(samples_ms=[5.0 + 0.001 * i for i in range(12)], blocks=1, floor_ms=precision_floor_ms("cpu"))
    measure._block(FakeWorker(5.0, 0.002, 15), rec, cfg, None, first=False)  # type: ignore[arg-type]
    assert len(rec.samples_ms) == 12 + measure.MIN_BLOCK_CALLS
    assert not measure.slow_block_may_end(4, 0.08, 1 / 3, 4)
    assert measure.slow_block_may_end(4, 0.16, 1 / 3, 4)
    assert not measure.slow_block_may_end(3, 0.30, 1 / 3, 4)  # never before the block's share of the floor


class ClockedWorker(FakeWorker):
    """A FakeWorker whose timer clock (`Clock`) advances `rate` ms per ms of real time, counting its reads."""

    def __init__(self, median_ms: float, rate: float, seed: int) -> None:
        super().__init__(median_ms, 0.02, seed)
        self.rate, self.start_ms, self.reads = rate, time.perf_counter() * 1e3, 0

    def request_as(self, cmd: Any, kind: type[Any], timeout_s: float, doing: str) -> tuple[Any, list[Any]]:
        assert isinstance(cmd, Clock)
        self.reads += 1
        reply = parse({"status": "clock", "now_ms": (time.perf_counter() * 1e3 - self.start_ms) * self.rate})
        assert isinstance(reply, kind)
        return reply, []


class SlowWorker(FakeWorker):
    """A FakeWorker whose calls take real time (so that the reference's blocks last long enough to be windows)."""

    def send(self, cmd: Any) -> None:
        if isinstance(cmd, Go):
            time.sleep(self.median_ms / 1e3)
        super().send(cmd)


def test_the_candidates_clock_is_read_around_each_reference_block_and_refused_where_it_stood_still():
    cfg = EvalConfig(max_timing_s=600.0, max_reps=1000)
    for rate, refused in ((1.0, False), (0.01, True)):
        ref, cand = SlowWorker(0.5, 0.02, 1), ClockedWorker(0.4, rate, 2)
        clock = CandidateClock(cand, 10.0)  # type: ignore[arg-type] # the protocol's fake
        if refused:
            with pytest.raises(Refused, match="clock was rewritten"):
                measure.measure(ref, cand, cfg, "cpu", QUIET, candidate_clock=clock)  # type: ignore[arg-type]
        else:
            measure.measure(ref, cand, cfg, "cpu", QUIET, candidate_clock=clock)  # type: ignore[arg-type]
        assert cand.reads == 2 * ref.blocks and ref.blocks >= measure.MIN_BLOCKS  # around each reference block
        assert clock.driver_ms > 0 and (clock.worker_ms >= clock.driver_ms) != refused
