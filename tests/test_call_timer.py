"""The timer through its clock seam (issue 15, finding 2): the order of marks, flushes and synchronisations around a
call, the empty call's calibration, and work left running after a call, with a recording fake clock."""

from __future__ import annotations

import random
import statistics

import pytest
import torch

from evaluator.worker import timing
from evaluator.driver.connection import Refused
from evaluator.measure.clock_checks import _refuse_work_left_running
from evaluator.measure.blocks import SideRecord


class RecordingClock:
    """A device clock whose time only moves when told: `busy_ms` is work the device still has after the call."""

    resolution_ms = 1e-6

    def __init__(self) -> None:
        self.log: list[str] = []
        self.now_ms = 0.0
        self.device_busy_until_ms = 0.0

    def flush(self) -> None:
        self.log.append("flush")

    def mark(self) -> float:
        self.log.append("mark")
        self.now_ms += 0.002  # every mark costs the same 2 us
        return self.now_ms

    def sync(self) -> None:
        self.log.append("sync")
        self.now_ms = max(self.now_ms, self.device_busy_until_ms) + 0.010  # a wake-up after the device is idle

    def elapsed_ms(self, start: float, end: float) -> float:
        return end - start

    def call(self, ms: float, left_ms: float = 0.0):  # noqa: ANN201
        def fn() -> str:
            self.log.append("call")
            self.now_ms += ms
            self.device_busy_until_ms = self.now_ms + left_ms
            return "out"
        return fn


def _timer(clock: RecordingClock) -> timing.CallTimer:
    timer = timing.CallTimer(torch.device("cpu"), clock, cold_from_bytes=0)  # flush before every call, as on a GPU
    timer.calibrate(reps=5)
    clock.log.clear()
    return timer


def test_marks_are_around_the_call_with_no_synchronisation_inside():
    clock = RecordingClock()
    timer = _timer(clock)
    ms, out = timer.time_call(clock.call(1.0), [])
    assert out == "out"
    assert clock.log == ["flush", "mark", "call", "mark", "sync", "mark", "sync"]
    assert ms == pytest.approx(1.0)  # the empty call's two marks are calibrated away; no wake-up is inside


def test_the_empty_call_is_calibrated_once_and_subtracted():
    clock = RecordingClock()
    timer = timing.CallTimer(torch.device("cpu"), clock)
    assert timer.calibrate(reps=5) == pytest.approx(0.002)
    assert timer.settle_overhead_ms == pytest.approx(0.014)
    ms, _ = timer.time_call(clock.call(0.0), [])
    assert ms == clock.resolution_ms  # an empty call reads as the clock's resolution, never zero or negative


def test_work_left_running_after_the_call_is_measured_not_timed():
    clock = RecordingClock()
    timer = _timer(clock)
    ms, _ = timer.time_call(clock.call(0.1, left_ms=0.5), [])
    assert ms == pytest.approx(0.1)
    assert timer.left_running_ms == pytest.approx(0.5, abs=0.005)  # less one mark's cost
    timer.time_call(clock.call(0.1), [])
    assert timer.left_running_ms == pytest.approx(0.0, abs=1e-9)


def test_the_cpu_timer_is_the_same_code_with_the_host_clock():
    timer = timing.CallTimer(torch.device("cpu"))
    assert isinstance(timer.clock, timing.HostClock)
    timer.calibrate()
    ms, out = timer.time_call(lambda x: x + 1, [torch.ones(4)])
    assert ms > 0 and torch.equal(out, torch.full((4,), 2.0))


def test_the_driver_refuses_calls_that_leave_the_device_busy():
    honest = SideRecord(samples_ms=[1.0] * 5, left_running_ms=[0.004, 0.01, 0.003])
    _refuse_work_left_running(honest)
    cheat = SideRecord(samples_ms=[0.01] * 5, left_running_ms=[0.3, 0.2, 0.25])
    with pytest.raises(Refused, match="kept working 0.250 ms after"):
        _refuse_work_left_running(cheat)


def test_the_cuda_runtime_torch_loaded_is_found_first():
    maps = ("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
            "7f02-7f03 r-xp 00000000 08:01 2 /env/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12\n"
            "7f03-7f04 r--p 00001000 08:01 2 /env/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12\n"
            "7f05-7f06 rw-p 00000000 00:00 0 \n")
    assert timing.loaded_libcudart(maps) == ["/env/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"]
    assert timing.loaded_libcudart("7f05-7f06 rw-p 00000000 00:00 0 [heap]\n") == []
    names = timing.libcudart_candidates()
    assert names[-3:] == ["libcudart.so", "libcudart.so.13", "libcudart.so.12"]  # by name, last


def test_a_cpu_call_is_flushed_only_when_its_inputs_reach_the_bound():
    clock = RecordingClock()
    timer = timing.CallTimer(torch.device("cpu"), clock, cold_from_bytes=4096)
    call = clock.call(1.0)
    timer.time_call(lambda *args: call(), [torch.zeros(16), 3])  # 64 bytes: stays in cache in a real pipeline too
    assert "flush" not in clock.log
    timer.time_call(lambda *args: call(), [torch.zeros(1024), torch.zeros(2, dtype=torch.float64)])  # 4112 bytes
    assert clock.log.count("flush") == 1 and clock.log[6:8] == ["flush", "mark"]


def test_the_cpu_eviction_reads_four_times_the_last_level_cache_sysfs_reports(tmp_path):
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("2", "Unified", "2048K"), ("3", "Unified", "8M")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(level)
        (d / "type").write_text(kind)
        (d / "size").write_text(size)
    assert timing.cpu_flush_bytes(tmp_path) == 32 * 2**20
    assert timing.cpu_cold_from_bytes(tmp_path) == 4 * 2**20  # half the last-level cache, not the 2 MiB L2
    assert timing.cpu_cold_from_bytes(tmp_path / "missing") == timing.DEFAULT_LLC_BYTES // 2
    assert timing.cpu_flush_bytes(tmp_path / "missing") == 4 * timing.DEFAULT_LLC_BYTES
    (tmp_path / "index2" / "size").write_text("491520K")  # a VM's report of its socket's shared 480 MiB
    assert timing.cpu_cold_from_bytes(tmp_path) == timing.COLD_FROM_MAX_BYTES == 16 * 2**20


def test_a_cpu_timer_evicts_large_inputs_only_and_only_once_when_the_caller_did(monkeypatch):
    timer = timing.CallTimer(torch.device("cpu"))
    reads: list[int] = []
    monkeypatch.setattr(timer, "_read", lambda buf: reads.append(buf.numel()))
    small, large = [torch.zeros(16)], [torch.zeros(timer.cold_from_bytes // 4)]
    assert not timer.evicts(small) and timer.evicts(large)  # what the worker asks before its `armed` word
    assert not timer.evict(small) and timer.evict(large) and reads == [timing.cpu_flush_bytes() // 4]
    timer.time_call(lambda x: x, large)  # evicts itself
    timer.time_call(lambda x: x, large, evicted=True)  # the worker evicted before the profiler's watch opened
    assert len(reads) == 2
    assert timing.CallTimer(torch.device("cpu"), RecordingClock())._evict_buf is None  # a test clock: nothing real


def test_a_cpu_timer_wakes_the_thread_pool_right_before_every_call(monkeypatch):
    timer = timing.CallTimer(torch.device("cpu"))
    wakes: list[int] = []
    reads: list[int] = []
    monkeypatch.setattr(timer, "_wake", lambda buf: wakes.append(buf.numel()))
    monkeypatch.setattr(timer, "_read", lambda buf: reads.append(buf.numel()))
    timer.time_call(lambda x: x, [torch.zeros(16)])
    assert reads == [] and wakes == [timing.GRAIN_ELEMENTS * max(2, torch.get_num_threads())]
    timer.time_call(lambda x: x, [torch.zeros(timer.cold_from_bytes // 4)])  # evicted first, then woken
    assert len(reads) == 1 and len(wakes) == 2
    waker = timer._pool_waker
    assert waker is not None and waker.stride() == (0,)  # one value read over and over: no cache line displaced


class RecordingFlush:
    """A line flush that records what it was given (`line_flush.LineFlush`'s seam)."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.flushed: list[list[object]] = []

    def __call__(self, values: list[object]) -> int:
        self.log.append("lines")
        self.flushed.append(list(values))
        return 0


def test_with_a_line_flush_a_cold_call_flushes_its_inputs_before_and_its_outputs_after_and_reads_no_buffer(
        monkeypatch):
    log: list[str] = []
    flush = RecordingFlush(log)
    timer = timing.CallTimer(torch.device("cpu"), cold_from_bytes=4096, flush=flush)
    assert timer.flushes_lines and timer._evict_buf is None  # no buffer written or kept
    monkeypatch.setattr(timer, "_read", lambda buf: log.append("read"))
    monkeypatch.setattr(timer, "_wake", lambda buf: log.append("wake"))
    small, large = [torch.zeros(16), 3], [torch.zeros(1024), 3]
    timer.time_call(lambda x, n: (x + 1, x), small)
    assert log == ["wake"] and flush.flushed == []
    log.clear()
    out, other = timer.time_call(lambda x, n: (x + 1, "not a tensor"), large)[1]
    assert log == ["lines", "wake", "lines"]  # inputs before the wake, outputs after the call
    assert flush.flushed[0] == large and flush.flushed[1][0] is out and flush.flushed[1][1] == other
    assert flush.flushed[1][2] is large[0]  # and the inputs, which the call read back into the caches
    log.clear()
    temporary = torch.ones(8)
    assert timer.evict(large, [temporary]) and log == ["lines"]  # the worker's way: it evicts, wakes and forgets
    assert flush.flushed[-1][0] is large[0] and flush.flushed[-1][-1] is temporary  # with the draw's leftovers
    assert not timer.evict(small, [torch.ones(4096)])  # whether a call is cold is the inputs' size alone
    timer.time_call(lambda x, n: x, large, evicted=True)
    assert log == ["lines"]
    timer.forget([out])
    assert flush.flushed[-1] == [out]


def test_a_timer_on_another_clock_takes_no_line_flush():
    timer = timing.CallTimer(torch.device("cpu"), RecordingClock(), flush=RecordingFlush([]))
    assert not timer.flushes_lines  # a device clock (a GPU's, a test's) flushes its own way


def test_without_a_prepared_eviction_buffer_a_cpu_timer_writes_one_at_its_first_large_call_only(monkeypatch):
    """A one-shot evaluation's zygotes prepare none (zygote.py): a worker whose inputs stay below the eviction's bound
    never writes four last-level caches' worth of pages; one whose inputs reach it writes them once."""
    monkeypatch.setattr(timing, "_prepared", None)
    monkeypatch.setattr(timing, "cpu_flush_bytes", lambda *_: 2**20)  # a small stand-in for 4 caches
    timer = timing.CallTimer(torch.device("cpu"), cold_from_bytes=2**16)
    assert timer._evict_buf is None
    assert not timer.evict([torch.zeros(16)]) and timer._evict_buf is None  # small: the pool woken, nothing written
    assert timer.evict([torch.zeros(2**14)])
    buf = timer._evict_buf
    assert buf is not None and buf.numel() * 4 == 2**20 and bool((buf == buf[0]).all()) and bool(buf[0] != 0)
    assert timer.evict([torch.zeros(2**14)]) and timer._evict_buf is buf  # written once


def test_a_prepared_eviction_buffer_is_shared_by_every_cpu_timer(monkeypatch):
    monkeypatch.setattr(timing, "_prepared", None)
    monkeypatch.setattr(timing, "cpu_flush_bytes", lambda *_: 8 * 2**20)
    timing.prepare_cpu_flush()
    prepared = timing._prepared
    assert prepared is not None and prepared.numel() * 4 == timing.cpu_flush_bytes()
    assert timing.CallTimer(torch.device("cpu"))._evict_buf is prepared
    assert timing._evict_buffer(4096) is not prepared  # another size: its own


def test_the_time_cap_ends_a_side_only_past_its_floor_of_samples_and_blocks():
    from evaluator.config import EvalConfig
    from evaluator.measure.block_sizes import MIN_BLOCKS
    from evaluator.measure.blocks import FLOOR_CAP_FACTOR
    cfg = EvalConfig(max_timing_s=1.0, min_reps=10)
    rec = SideRecord(samples_ms=[50.0, 200.0, 51.0], spent_s=1.5, blocks=MIN_BLOCKS)
    assert not rec.done(cfg)  # three noisy samples: a median of them is no figure, whatever the cap says
    rec.samples_ms *= 4
    rec.blocks = MIN_BLOCKS - 1
    assert not rec.done(cfg)  # enough samples, but from too few blocks to have alternated with the other side
    rec.blocks = MIN_BLOCKS
    assert rec.done(cfg)
    slow = SideRecord(samples_ms=[900.0, 910.0], spent_s=FLOOR_CAP_FACTOR * cfg.max_timing_s, blocks=2)
    assert slow.done(cfg)  # very slow calls: the floor stretches the cap so far and no further


class _ClockConn:
    """A worker connection whose clock advances `rate` ms per ms of real time (1: honest; ~0: a CPU-time clock)."""

    def __init__(self, rate: float) -> None:
        self.rate, self.start = rate, timing.now_ms()

    def request_as(self, cmd, kind, timeout_s, what):  # noqa: ANN001, ANN201
        from evaluator.wire.replies import parse
        return parse({"status": "clock", "now_ms": (timing.now_ms() - self.start) * self.rate}), []


def test_a_worker_clock_that_stands_still_while_the_reference_is_timed_is_refused():
    import time
    from evaluator.measure.clock_checks import CandidateClock
    for rate, refused in ((1.0, False), (0.004, True)):
        clock = CandidateClock(_ClockConn(rate), 10.0)  # type: ignore[arg-type]
        for _ in range(3):
            clock.around(lambda: time.sleep(0.01))  # the reference's block, which the candidate waits through
        assert clock.driver_ms >= 30
        if refused:
            with pytest.raises(Refused, match="clock was rewritten"):
                clock.refuse_stopped()
        else:
            clock.refuse_stopped()  # keeps time: nothing to say
            assert clock.worker_ms >= clock.driver_ms  # its reads fall outside the driver's marks


def _blocks(*blocks: tuple[int, float]) -> SideRecord:
    """A side timed in blocks of (calls, wall per call in ms)."""
    rec = SideRecord()
    for calls, wall_ms in blocks:
        rec.walls_ms += [wall_ms] * calls
        rec.block_walls_ms.append(wall_ms)
    return rec


def test_the_clock_cross_check_compares_blocks_that_ran_side_by_side():
    """Load came and went (+2 ms a call in the second and fourth pair of blocks). The reference's quiet blocks ran
    long and its loaded ones short, the candidate's the other way round: pooled, the two sides' walls come from
    different moments and an honest 10x reads as a candidate slower than its own timer says. Pair by pair it is not."""
    from evaluator.measure.clock_checks import ClockDisagreement, _cross_check
    windows = [(300, 16, 0.0), (16, 300, 2.0), (300, 16, 0.0), (16, 300, 2.0)]  # ref calls, cand calls, load
    ref = _blocks(*[(r, 5.5 + load) for r, _, load in windows])
    ref.samples_ms = [5.0] * 20
    honest = _blocks(*[(c, 1.0 + load) for _, c, load in windows])
    honest.samples_ms = [0.5] * 20
    _cross_check(ref, honest, "cpu")  # nothing to say
    # The same shape from a candidate that runs as long as the reference but reports 100x less: refused.
    cheat = _blocks(*[(c, 5.5 + load) for _, c, load in windows])
    cheat.samples_ms = [0.05] * 20
    with pytest.raises(ClockDisagreement, match="timer tampering"):
        _cross_check(ref, cheat, "cpu")


def _calls(timed_ms: list[float], rest_ms: float, load_ms: list[float]) -> SideRecord:
    """A side whose calls took `timed_ms` by its timer and `rest_ms` more by the driver's clock around each, each
    stretched by the machine's load of the moment (its timer and the driver's clock alike)."""
    rec = SideRecord(samples_ms=[t + load for t, load in zip(timed_ms, load_ms)])
    rec.call_walls_ms = [t + load + rest_ms for t, load in zip(timed_ms, load_ms)]
    rec.walls_ms = [w + 4.0 for w in rec.call_walls_ms]  # a drawn input's cost and noise dwarf the calls there
    rec.block_walls_ms = [statistics.median(rec.walls_ms)] * 3
    return rec


def test_a_timer_that_claims_part_of_each_call_is_refused_by_the_driver_clock_around_the_calls():
    """A timer clock rewritten from C that lags inside calls alone: the candidate runs 3.5 ms a call and reports 55%
    of it (2x, against a 4 ms reference), under twice what the whole cycles' walls implied, which let it through.
    Around each call, the driver's clock saw 1.6 ms more than the timer claimed, where the reference's calls show
    0.3 ms; the machine's load, different for every call, stretches both figures of a call alike."""
    from evaluator.measure.clock_checks import ClockDisagreement, _cross_check
    rng = random.Random(5)
    load = [rng.choice([0.0, 0.0, 1.5]) for _ in range(60)]
    ref = _calls([4.0] * 60, 0.3, load)
    honest = _calls([3.5 * 0.55] * 60, 0.35, load[::-1])  # a real 2x: its rest as small as the reference's
    gap = _cross_check(ref, honest, "cpu")  # the gap it judged, which the measurement keeps (`claim_bound`)
    assert gap is not None and not gap.refused and gap.short_ms == pytest.approx(0.05, abs=0.01)
    cheat = _calls([3.5 * 0.55] * 60, 0.3 + 3.5 * 0.45, load[::-1])
    with pytest.raises(ClockDisagreement, match="around each call"):
        _cross_check(ref, cheat, "cpu")
    # device events: a launch's host cost is outside them by design, and no per-call gap is judged
    assert _cross_check(ref, cheat, "cuda") is None


def test_where_outputs_are_named_in_memory_the_call_check_allows_half_the_share():
    """With no output copy inside the window (`output_slot.py`), a lag of 8% of each 5 ms call (0.4 ms beyond the
    reference's remainder) is refused; the same lag with the copy's larger honest spread (10% allowed) is not, and an
    honest candidate is not refused either way."""
    from evaluator.measure.clock_checks import CALL_GAP_SHARE, CALL_GAP_SHARE_NAMED, ClockDisagreement, _cross_check
    from evaluator.measure.clock_checks import call_gap
    ref = _calls([10.0] * 60, 0.3, [0.0] * 60)
    honest = _calls([5.0] * 60, 0.35, [0.0] * 60)
    cheat = _calls([5.0 * 0.92] * 60, 0.3 + 5.0 * 0.08, [0.0] * 60)
    _cross_check(ref, cheat, "cpu")  # the copy's share: within it
    for rec in (ref, honest, cheat):
        rec.outputs_named = True
    _cross_check(ref, honest, "cpu")
    gap = call_gap(ref, cheat, 5.0 * 0.92)
    assert gap is not None and gap.share == CALL_GAP_SHARE_NAMED < CALL_GAP_SHARE
    with pytest.raises(ClockDisagreement, match="around each call"):
        _cross_check(ref, cheat, "cpu")
    cheat.outputs_named = False  # one side copied: the wider share for both
    _cross_check(ref, cheat, "cpu")


def test_blocks_alternate_until_both_sides_are_done(monkeypatch):
    """The reference settles after its third block, the candidate needs six: the reference keeps pace with blocks of
    its own, so no two candidate blocks run back to back inside one burst of the machine's other work."""
    from evaluator.measure import blocks as measure
    from evaluator.config import EvalConfig
    order: list[str] = []

    candidate_records: list[SideRecord] = []

    def block(conn, rec, cfg, reads, first, after_call=None, inputs=None):  # noqa: ANN001, ANN202
        order.append(conn)
        rec.blocks += 1
        rec.samples_ms += [1.0] * 10
        rec.walls_ms += [1.5] * 10
        rec.block_walls_ms.append(1.5)
        rec.spent_s += 0.01
        if conn == "cand":
            candidate_records.append(rec)
            reads.reservoir.kept.append((0, []))  # the driver read one of its calls' outputs

    monkeypatch.setattr(measure, "_block", block)
    monkeypatch.setattr(SideRecord, "done", lambda self, cfg: self.blocks >= (6 if any(self is r for r in candidate_records) else 3))
    class Quiet:  # the machine's other work, as the real meter would read it on an idle machine
        def start(self) -> None:
            pass

        def cores(self) -> float:
            return 0.0

    measure.measure("ref", "cand", EvalConfig(), "cpu", Quiet())  # type: ignore[arg-type]
    assert order.count("cand") == 6
    assert all(a != b for a, b in zip(order, order[1:])), order


def test_an_eviction_buffer_past_the_cap_is_left_to_the_worker_that_needs_it(monkeypatch):
    """A VM that reports a 480 MiB cache would have each zygote write 1.9 GB ahead (2 s of CPU) for calls no
    built-in task makes: past the cap, nothing is written before a call needs it, and that call's timer writes it."""
    monkeypatch.setattr(timing, "_prepared", None)
    monkeypatch.setattr(timing, "PREPARE_AHEAD_MAX_BYTES", 2**20)
    monkeypatch.setattr(timing, "cpu_flush_bytes", lambda *_: 2 * 2**20)
    timing.prepare_cpu_flush()
    assert timing._prepared is None
    timer = timing.CallTimer(torch.device("cpu"), cold_from_bytes=2**16)
    assert timer._evict_buf is None and timer.evict([torch.zeros(2**14)])
    assert timer._evict_buf is not None and timer._evict_buf.numel() * 4 == 2 * 2**20
