"""Rounds during which other work shared the cores (CPU): the driver meters the machine's other work per round from the
kernel's accounting, leaves contended rounds out of both sides' figures where enough quiet ones remain, times a few
rounds more where some were quiet, and says so in the verdict. Scripted meters and fake workers: no timing here."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from evaluator.measure import blocks as measure
from evaluator.wire.commands import Go, NextCall, Time
from evaluator.config import EvalConfig
from evaluator.measure.contention import CONTENDED_CORES, Round, choose, wants_more_rounds
from evaluator.measure.other_work import OtherWork, machine_busy_s, own_cpu_s
from evaluator.wire.replies import parse

Q, C = 0.0, 1.0  # a quiet round, a round in which another process held a core


class Machine:
    """The meter's script, round by round (quiet past its end), and the state the fake workers time under."""

    def __init__(self, script: list[float]) -> None:
        self.script, self.round, self.cores_now = script, -1, 0.0
        self.now_s = 0.0  # the driver's clock (`blocks.time`): a call takes its time, plus the harness's 0.2 ms

    def perf_counter(self) -> float:
        return self.now_s

    def start(self) -> None:
        self.round += 1
        self.cores_now = self.script[self.round] if self.round < len(self.script) else 0.0

    def cores(self) -> float | None:
        return self.cores_now


class Worker:
    """Answers the timing protocol with calls of `quiet_ms`, or `contended_ms` while the machine's round is
    contended (a statically scheduled reference slows more than a dynamically scheduled candidate), +-1 %."""

    def __init__(self, machine: Machine, quiet_ms: float, contended_ms: float, seed: int) -> None:
        self.machine, self.quiet_ms, self.contended_ms = machine, quiet_ms, contended_ms
        self.rng = random.Random(seed)
        self.pending: list[dict[str, Any]] = []

    def send(self, cmd: Any) -> None:
        if isinstance(cmd, Time) or (isinstance(cmd, NextCall) and cmd.next_seed is not None):
            self.pending.append({"status": "armed"})
        if isinstance(cmd, Go):
            ms = self.contended_ms if self.machine.cores_now >= CONTENDED_CORES else self.quiet_ms
            ms *= 1 + 0.02 * (self.rng.random() - 0.5)
            self.machine.now_s += (ms + 0.2) / 1e3
            self.pending.append({"status": "rep", "ms": ms})
        if isinstance(cmd, NextCall):
            if cmd.next_seed is None:
                self.pending.append({"status": "timed", "kernels": {}, "left_running_ms": 0.0})

    def read_outputs(self, layout: object) -> list[Any]:
        """The driver's read of a call's outputs from the shared file: none here (nothing runs)."""
        return []

    def recv_as(self, kind: type[Any], timeout_s: float, doing: str) -> tuple[Any, list[Any]]:
        reply = parse(self.pending.pop(0))  # as the driver's connection reads a worker's header
        assert isinstance(reply, kind)
        return reply, []


def _measure(script: list[float], seed: int = 0) -> tuple[measure.Measurement, Machine]:
    machine = Machine(script)
    ref, cand = Worker(machine, 2.0, 3.8, seed), Worker(machine, 1.5, 2.3, 100 + seed)
    random.seed(seed)
    cfg = EvalConfig(max_timing_s=600.0, max_reps=1000)  # no time cap in reach: the stopping rule ends each side
    driver_time, measure.time = measure.time, machine  # type: ignore[assignment] # the driver's clock: the fakes'
    try:
        return measure.measure(ref, cand, cfg, "cpu", machine), machine  # type: ignore[arg-type] # the fakes
    finally:
        measure.time = driver_time


def test_a_quiet_machine_keeps_every_call_and_says_nothing():
    m, machine = _measure([Q, Q, Q])
    assert machine.round + 1 == measure.MIN_BLOCKS  # settled in the first rounds, none added
    assert m.contention is not None and m.contention.contended == 0 and m.contention.note() == ""
    assert m.reference_ms.median_ms == pytest.approx(2.0, rel=0.02)
    assert m.candidate_ms.median_ms == pytest.approx(1.5, rel=0.02)


def test_contended_rounds_are_left_out_of_both_sides_where_enough_quiet_ones_remain():
    """Another process holds a core during the second round: its slow blocks keep both sides from settling, and once
    they have, the figures come from the quiet rounds alone (pooled, a third of each side's calls were slow)."""
    m, machine = _measure([Q, C] + [Q] * 20)
    assert machine.round + 1 > measure.MIN_BLOCKS
    assert m.contention is not None and m.contention.contended == 1 and m.contention.quiet_only
    assert m.reference_ms.median_ms == pytest.approx(2.0, rel=0.02)
    assert m.candidate_ms.median_ms == pytest.approx(1.5, rel=0.02)
    assert "left out" in m.contention.note()


def test_a_few_rounds_more_replace_contended_ones_where_some_were_quiet():
    m, machine = _measure([C, C, Q, Q, Q, C, C, C])
    assert m.contention is not None and m.contention.quiet_only
    assert machine.round + 1 == 5  # two rounds more, and no further once three were quiet
    assert m.reference_ms.median_ms / m.candidate_ms.median_ms == pytest.approx(2.0 / 1.5, rel=0.03)


def test_a_machine_busy_throughout_pays_for_no_extra_round_and_its_figures_say_so():
    m, machine = _measure([C] * 64)
    assert machine.round + 1 == measure.MIN_BLOCKS
    assert m.contention is not None and not m.contention.quiet_only
    assert m.contention.contended == measure.MIN_BLOCKS and "kept in the figures" in m.contention.note()
    assert m.reference_ms.median_ms == pytest.approx(3.8, rel=0.02)  # what it measured, not hidden


def test_the_extra_rounds_are_bounded():
    m, machine = _measure([C, C, Q] + [C] * 60)
    assert machine.round + 1 == measure.MIN_BLOCKS + measure.EXTRA_ROUNDS
    assert m.contention is not None and not m.contention.quiet_only


def test_choose_needs_min_rounds_quiet_rounds_and_the_sample_floor():
    rounds = [Round(0, 0, C), Round(1, 1, Q), Round(2, 2, Q), Round(3, 3, Q)]
    chosen = choose(rounds, [10] * 4, [10] * 4, min_rounds=3, min_calls=10)
    assert chosen.reference_blocks == [1, 2, 3] and chosen.candidate_blocks == [1, 2, 3]
    too_few_calls = choose(rounds, [10, 3, 3, 3], [10] * 4, min_rounds=3, min_calls=10)
    assert too_few_calls.reference_blocks is None and too_few_calls.contention is not None
    assert not too_few_calls.contention.quiet_only
    one_sided = [Round(0, 0, C), Round(1, None, Q), Round(2, 1, Q), Round(3, 2, Q)]  # a side exhausted: not a pair
    assert choose(one_sided, [10] * 4, [10] * 3, min_rounds=3, min_calls=10).reference_blocks is None
    unknown = [Round(0, 0, None), Round(1, 1, None), Round(2, 2, None)]  # a GPU: no meter
    assert choose(unknown, [10] * 3, [10] * 3, min_rounds=3, min_calls=10).contention is None


def test_more_rounds_only_where_some_were_quiet_and_some_contended():
    assert not wants_more_rounds([Round(0, 0, Q)] * 2, 3)
    assert not wants_more_rounds([Round(0, 0, C)] * 3, 3)
    assert wants_more_rounds([Round(0, 0, C), Round(1, 1, Q)], 3)
    assert not wants_more_rounds([Round(0, 0, C)] + [Round(1, 1, Q)] * 3, 3)


def test_the_meter_subtracts_the_evaluations_own_cpu_time():
    busy, own, clock = iter([10.0, 11.5]), iter([4.0, 5.0]), iter([100.0, 101.0])
    meter = OtherWork(busy=lambda: next(busy), own=lambda: next(own), clock=lambda: next(clock))
    meter.start()
    assert meter.cores() == pytest.approx(0.5)  # 1.5 s busy, 1 s of it the evaluation's, over 1 s
    unreadable = OtherWork(busy=lambda: None, own=lambda: 0.0)
    unreadable.start()
    assert unreadable.cores() is None


def test_busy_time_reads_proc_stat_without_idle_and_iowait():
    line = b"cpu  100 0 50 1000 10 0 5 7 0 0\n"
    tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
    assert machine_busy_s(lambda: line) == pytest.approx(162 * tick_s)  # user+system+softirq+steal
    assert machine_busy_s(lambda: b"garbage") is None


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux's /proc")
def test_a_childs_cpu_time_counts_as_the_evaluations_own():
    """A worker's threads, whatever they do, are the evaluation's CPU time, never other work: a candidate cannot make
    its own rounds look contended by spinning."""
    spin = "import time\nwhile time.process_time() < 0.3: pass\nprint('done', flush=True)\ntime.sleep(30)"
    # Counted from a shell whose child spins (a driver and its worker): rooted at this test process, the count also
    # held the zygotes of earlier tests in the session, and one of them exiting meanwhile took its CPU out of it.
    parent = subprocess.Popen(["sh", "-c", f'"$0" -c "$1"; true', sys.executable, spin], stdout=subprocess.PIPE,
                              start_new_session=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == b"done"
        time.sleep(0.05)
        assert own_cpu_s(parent.pid) >= 0.25
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
