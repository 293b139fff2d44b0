"""The driver's side of timing: reference and candidate timed by one method, in random interleaved blocks.

Each timed call sees fresh inputs drawn from a seed the driver picks only after the previous call has returned. Inside
each call's window the worker copies the call's outputs into a shared-memory file the driver made; after the call
the driver decides with fresh randomness whether to read them (`output_slot.Reservoir`: a uniform sample of all the
candidate's timed calls, no budget to count) and reads them itself with `pread`, while the candidate's worker, which
waits for the driver's next word, is watched for CPU it should not use (`clock_checks.QuietWindow`). The worker is
never told which calls were read. The driver also keeps its own clock on every call and compares it with what the
worker reports.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from evaluator.device.rules import rules
from evaluator.measure.block_sizes import MIN_BLOCK_CALLS, MIN_BLOCKS
from evaluator.wire.commands import Clock, Go, NextCall, Time
from evaluator.config import EvalConfig
from evaluator.driver.connection import WorkerConnection
from evaluator.measure.contention import Contention, Round, choose, wants_more_rounds
from evaluator.measure.other_work import Meter, OtherWork
from evaluator.wire.output_slot import Reservoir
from evaluator.result import Timing
from evaluator.worker.timing import median_standard_error_ms
from evaluator.measure.trusted_inputs import TrustedInputs
from evaluator.wire.replies import Armed, Rep, Timed
from evaluator.measure.clock_checks import (CandidateClock, IdleCandidate, QuietWindow, _cross_check,
                                           _refuse_work_left_running)

STATS_EVERY = 8        # calls between two evaluations of the stopping rule inside a block
DEEP_CHECK_BLOCKS = 2 * MIN_BLOCKS  # one of the candidate's first blocks, drawn in advance, ends with a deep check
DEEP_CHECK_PROBABILITY = 0.17  # and so does each block past those, at random
FLOOR_CAP_FACTOR = 5   # the sample floor (min_reps, MIN_BLOCKS) may stretch a side's time to this many time caps
# Below this, a median's standard error is finer than what the harness can tell apart from one evaluation to the next
# (docs/EVALUATOR.md, "Timing"): a side whose median is known to within it has settled, whatever its relative error.
PRECISION_FLOOR_MS = {"cpu": 1e-3, "cuda": 0.5e-3}
# Where the drift between a side's blocks dominates its median's error (the machine's state moving from one block to
# the next, which more calls inside a block cannot average away), calls are not what the side lacks: its blocks end
# early, after MIN_BLOCK_CALLS, and it is done after DRIFT_BLOCKS of them, as many blocks as a side that runs to its
# time cap has (docs/EVALUATOR.md, "Timing"). Dominates: the calls' own error is below DRIFT_SHARE of the drift's,
# so that more calls could cut the median's error by 8% at most.
DRIFT_SHARE = 0.4
DRIFT_BLOCKS = 2 * MIN_BLOCKS
# Rounds (one block of each side) during which other work kept cores busy are left out where MIN_BLOCKS quiet ones
# remain; up to EXTRA_ROUNDS more rounds are timed to reach that where some were quiet already (contention.py).
EXTRA_ROUNDS = MIN_BLOCKS


def precision_floor_ms(device_kind: str) -> float:
    return PRECISION_FLOOR_MS.get(device_kind, PRECISION_FLOOR_MS["cpu"])


@dataclass
class SideRecord:
    samples_ms: list[float] = field(default_factory=list)
    walls_ms: list[float] = field(default_factory=list)
    block_walls_ms: list[float] = field(default_factory=list)  # per block, the median of its calls' walls
    # Per call, the driver's clock from its `go` to the call's reply (the call and what both roles do alike around
    # it), one for each of `samples_ms`.
    call_walls_ms: list[float] = field(default_factory=list)
    block_medians_ms: list[float] = field(default_factory=list)  # per block of MIN_BLOCK_CALLS or more, its median
    block_spans: list[tuple[int, int]] = field(default_factory=list)  # per block, its calls' range in samples_ms
    spent_s: float = 0.0
    blocks: int = 0
    kernels: dict[str, int] | None = None  # per kernel, the fewest launches of any timed call
    left_running_ms: list[float] = field(default_factory=list)  # per block, the median time work outlived a call
    floor_ms: float = 0.0  # the precision floor of the stopping rule (`settled`); 0: the relative rule alone
    deep_check_block: int | None = None  # the block (0-based) after which the worker compares the dispatch table
    # Its timed calls' outputs named in the worker's memory, not copied inside their windows (`output_slot.py`):
    # the remainders beyond the timer then hold no copy, and the per-call clock check allows less (`call_gap`).
    outputs_named: bool = False

    def saw_kernels(self, fewest: dict[str, int]) -> None:
        self.kernels = fewest if self.kernels is None else {k: min(n, fewest.get(k, 0))
                                                              for k, n in self.kernels.items()}

    def done(self, cfg: EvalConfig) -> bool:
        """The time cap ends a side only once it has its floor of samples and blocks: a median of two or three calls
        (all a 1 s cap gave a 31 MiB task on a loaded machine, where drawing each call's inputs takes most of it)
        made speedups of 3.7x out of noise. Past FLOOR_CAP_FACTOR caps a side ends anyway (very slow calls)."""
        n = len(self.samples_ms)
        if self.exhausted(cfg):
            return True
        if n < cfg.min_reps or self.blocks < MIN_BLOCKS:
            return False
        return self.spent_s >= cfg.max_timing_s or self.settled(cfg) or (
            self.blocks >= DRIFT_BLOCKS and self.drifting(cfg))

    def exhausted(self, cfg: EvalConfig) -> bool:
        """The hard limits: no more blocks for this side, whatever the other side still needs."""
        return len(self.samples_ms) >= cfg.max_reps or self.spent_s >= FLOOR_CAP_FACTOR * cfg.max_timing_s

    def settled(self, cfg: EvalConfig) -> bool:
        """The stopping rule: enough repetitions, and the median known to `target_rse` of itself or to `floor_ms`,
        whichever is coarser. A call of a few microseconds has a spread of tens of percent (the timer's marks, the
        scheduler, the watch around the call): its median took thousands of calls to reach 1%, so every side of such a
        call ran to its time cap, while its figure moved by more than the floor from one evaluation to the next."""
        if len(self.samples_ms) < cfg.min_reps:
            return False
        se_ms, median_ms = median_standard_error_ms(self.samples_ms)
        return se_ms < max(cfg.target_rse * median_ms, self.floor_ms)

    def drifting(self, cfg: EvalConfig) -> bool:
        """Whether the drift between blocks dominates the median's error (DRIFT_SHARE): more calls per block would
        buy precision that the next block does not keep; more blocks are what narrows it. A 256x1024 ReLU on a VM
        whose memory another tenant shares had block medians of 88-143 us within one evaluation, and ran to its
        time cap (700 calls) for a 1% that its next block moved by 30%."""
        if len(self.samples_ms) < cfg.min_reps:
            return False
        se_ms, _ = median_standard_error_ms(self.samples_ms)
        return se_ms < DRIFT_SHARE * self.drift_se_ms()

    def drift_se_ms(self, block_medians_ms: list[float] | None = None) -> float:
        """The median's error that the drift between blocks leaves: the spread (standard deviation) of the blocks'
        medians over the square root of their number, from MIN_BLOCKS blocks of at least MIN_BLOCK_CALLS calls on
        (0 before). It contains the calls' own error too, so it is never below it in expectation: DRIFT_SHARE of it
        is reached only where the drift dominates (without drift, by chance, in about 1% of sides: simulated in
        tests/test_measure_settle.py)."""
        medians = self.block_medians_ms if block_medians_ms is None else block_medians_ms
        k = len(medians)
        return statistics.stdev(medians) / math.sqrt(k) if k >= MIN_BLOCKS else 0.0

    def timing(self, blocks: list[int] | None = None) -> Timing:
        """The side's summary, over every call or over the calls of `blocks` alone (the quiet rounds'); its `se_ms`
        is the larger of the calls' error and the drift's between those blocks (`drift_se_ms`): the precision its
        median really has, which the stored figure and a reader's comparison should see."""
        if blocks is None:
            samples, medians = self.samples_ms, None
        else:
            spans = [self.block_spans[b] for b in blocks]
            samples = [x for a, b in spans for x in self.samples_ms[a:b]]
            medians = [statistics.median(self.samples_ms[a:b]) for a, b in spans if b - a >= MIN_BLOCK_CALLS]
        t = Timing.from_samples(samples)
        if t.se_ms is None:
            return t
        return dataclasses.replace(t, se_ms=max(t.se_ms, self.drift_se_ms(medians)))

    def deep_check_after(self) -> bool:
        """Whether the block now ending compares the whole dispatch table (about 45 ms in the candidate's worker):
        the one block drawn in advance among the first DEEP_CHECK_BLOCKS, and past those a random sixth. One
        comparison is as likely to catch a change present through timing as a random sixth of six blocks, and the
        check after timing compares it once more."""
        if self.deep_check_block is None:
            return False
        if self.blocks < DEEP_CHECK_BLOCKS:
            return self.blocks == self.deep_check_block
        return random.random() < DEEP_CHECK_PROBABILITY


@dataclass(frozen=True)
class Measurement:
    reference_ms: Timing
    candidate_ms: Timing
    kept: list[tuple[int, list[torch.Tensor]]]
    candidate_kernels: dict[str, int] = field(default_factory=dict)  # fewest launches per kernel in a timed call
    contention: Contention | None = None
    shared_inputs: bool = False  # both sides' timed inputs came from the shared input file (trusted_inputs.py)
    # On a host clock: how much of each call the driver's per-call clock check lets the worker's timer leave out
    # unnoticed (`clock_checks.CallGap.allowed_ms`); None where it does not apply (a GPU's events, too few calls).
    per_call_allowance_ms: float | None = None


def fresh_seed() -> int:
    return secrets.randbelow(2**31 - 1)


@dataclass
class OutputReads:
    """The candidate's side of reading timed calls' outputs: which calls (`reservoir`), how (`read`: the driver's
    `pread` of the worker's shared output file, given the reply's layout), and the quiet window around each read
    (`quiet`, None where the worker's CPU cannot be read)."""

    reservoir: Reservoir
    read: Callable[[Rep], list[torch.Tensor]]
    quiet: QuietWindow | None = None

    def after_call(self, seed: int, reply: Rep) -> None:
        index = self.reservoir.pick()

        def read() -> None:
            if index is not None:
                self.reservoir.put(index, seed, self.read(reply))
        if self.quiet is not None:
            self.quiet.around(read, reply.ms, reading=index is not None)
        else:
            read()


def _block(conn: WorkerConnection, rec: SideRecord, cfg: EvalConfig, reads: OutputReads | None, first: bool,
           after_call: Callable[[], None] | None = None, inputs: TrustedInputs | None = None) -> None:
    """One block of timed calls of one side; `reads` (the candidate's) reads the outputs of the calls it picks before
    the driver's word on each call; `after_call` (the candidate's, `measure`'s `candidate_threads`) runs after that
    word, while the worker makes its checks. `inputs`: each call's inputs from the shared input file, drawn by the
    reference's worker and flushed by the driver before the call's `go` (`trusted_inputs.py`); else drawn and
    evicted by the worker itself."""
    budget_s = cfg.max_timing_s / (2 * MIN_BLOCKS)
    floor_calls = -(-cfg.min_reps // MIN_BLOCKS)  # a block's share of the side's sample floor
    # A side that is done already (its cap reached, or settled) only keeps pace with the other's blocks, so that load
    # falls on both alike: MIN_BLOCK_CALLS calls do that. (A side done by its cap used to run full blocks while the
    # other drifted on: 11 blocks and twice its cap, 4 s, in one evaluation of a 256x1024 ReLU.)
    pacing = rec.done(cfg)
    seed = fresh_seed()
    direct = bool(getattr(conn, "direct_outputs", False))
    rec.outputs_named = direct
    conn.send(Time(variant=0, seed=seed, warmup_ms=cfg.warmup_ms if first else 0.0, shared_inputs=inputs is not None,
                   direct_outputs=direct))
    role = "candidate" if reads is not None else "reference"
    last_ms = 0.0
    start = time.perf_counter()
    previous = None
    calls = 0
    walls_ms: list[float] = []
    call_walls_ms: list[float] = []
    while True:
        armed, _ = conn.recv_as(Armed, cfg.run_timeout_s, "drawing a timed call's inputs")
        go = Go() if inputs is None else Go(inputs=tuple(inputs.armed(role, armed, 0, seed, last_ms)))
        go_at = time.perf_counter()
        conn.send(go)
        reply, _ = conn.recv_as(Rep, cfg.run_timeout_s, "a timed call")
        now = time.perf_counter()
        call_walls_ms.append((now - go_at) * 1e3)
        if previous is not None:
            walls_ms.append((now - previous) * 1e3)
        previous = now
        last_ms = reply.ms
        rec.samples_ms.append(last_ms)
        calls += 1
        if reads is not None:  # before the driver's word: the worker waits for it, and must not run meanwhile
            reads.after_call(seed, reply)
            previous = time.perf_counter()  # a read's time is the driver's, not the call cycle's
        # A block ends on its share of the time cap, or as soon as the side's samples settle: the time cap is for
        # slow, noisy kernels, and a fast kernel should not pay it (it was most of the harness's overhead).
        # (First at MIN_BLOCK_CALLS itself: a settled side keeping pace with the other ends its blocks there.)
        # Where the drift between blocks dominates (`drifting`), a block's further calls are not needed either.
        settled = calls >= MIN_BLOCK_CALLS and (pacing or (calls - MIN_BLOCK_CALLS) % STATS_EVERY == 0 and (
            rec.settled(cfg) or rec.drifting(cfg)))
        # Calls too slow for MIN_BLOCK_CALLS of them to fit in the block's share (drawing a 31 MiB input takes most
        # of 30-40 ms a call): such a block ends on its share short of MIN_BLOCK_CALLS anyway, so the rule is
        # checked after each of its calls from its share of the sample floor on, and a side that is done or settled
        # stops paying the rest of the share (`slow_block_may_end`).
        settled = settled or (slow_block_may_end(calls, now - start, budget_s, floor_calls) and (
            pacing or rec.settled(cfg) or rec.drifting(cfg)))
        stop = len(rec.samples_ms) >= cfg.max_reps or settled or (
            (now - start) >= budget_s and calls >= floor_calls)
        next_seed = None if stop else fresh_seed()
        check = next_seed is None and rec.deep_check_after()
        conn.send(NextCall(next_seed=next_seed, check=check))
        if after_call is not None:
            after_call()
        if next_seed is None:
            final, _ = conn.recv_as(Timed, cfg.run_timeout_s, "finishing its timed calls")
            rec.saw_kernels(dict(final.kernels))
            rec.left_running_ms.append(final.left_running_ms)
            break
        seed = next_seed
    elapsed = time.perf_counter() - start
    rec.spent_s += elapsed
    rec.blocks += 1
    rec.block_spans.append((len(rec.samples_ms) - calls, len(rec.samples_ms)))
    rec.walls_ms += walls_ms
    if walls_ms:
        rec.block_walls_ms.append(statistics.median(walls_ms))
    rec.call_walls_ms += call_walls_ms
    if calls >= MIN_BLOCK_CALLS:
        rec.block_medians_ms.append(statistics.median(rec.samples_ms[-calls:]))


def slow_block_may_end(calls: int, elapsed_s: float, budget_s: float, floor_calls: int) -> bool:
    """Whether a block of `calls` calls in `elapsed_s` may end on the stopping rule before MIN_BLOCK_CALLS calls:
    it has its share of the side's sample floor, and its calls are so slow that MIN_BLOCK_CALLS of them would not
    fit in the block's time share (`budget_s`), where it would end anyway. Blocks of faster calls keep ending on the
    rule only from MIN_BLOCK_CALLS calls on, so they still give the drift rule its block medians."""
    return calls >= floor_calls and elapsed_s * MIN_BLOCK_CALLS >= budget_s * calls


def measure(reference: WorkerConnection, candidate: WorkerConnection, cfg: EvalConfig,
            device_kind: str, other_work: Meter | None = None,
            candidate_cpu: Callable[[], float | None] | None = None,
            candidate_clock: CandidateClock | None = None,
            candidate_threads: Callable[[], None] | None = None,
            candidate_outputs: OutputReads | None = None,
            trusted_inputs: TrustedInputs | None = None) -> Measurement:
    """Both sides timed; energy is metered separately (energy.py). `other_work`: the meter of the machine's other
    work per round (on a CPU, the kernel's accounting by default; tests pass a scripted one). `candidate_cpu`: the
    candidate's worker's CPU seconds by the kernel's accounting (`worker_cpu.WorkerCpu`), refused when it grew while
    the reference's blocks ran. `candidate_clock`: the candidate's timer clock, read around the reference's blocks
    and refused when it stood still there. `candidate_threads`: the driver's count of the candidate's threads
    (`worker_cpu.WorkerThreads.refuse_more`), run around the reference's blocks and after each of the candidate's
    calls. `candidate_outputs`: how the driver reads the candidate's timed outputs (`OutputReads`); by default from
    the candidate connection's shared output file, without a quiet window. `trusted_inputs`: both sides' timed
    inputs from the shared input file (`trusted_inputs.py`), where the task's inputs fit in it; else each worker
    draws its own."""
    if trusted_inputs is not None and not trusted_inputs.available(0, fresh_seed()):
        trusted_inputs = None
    idle = IdleCandidate(candidate_cpu) if candidate_cpu is not None else None
    meter = other_work if other_work is not None else (OtherWork() if rules(device_kind).machine_load_read else None)
    floor_ms = precision_floor_ms(device_kind)
    ref = SideRecord(floor_ms=floor_ms)
    cand = SideRecord(floor_ms=floor_ms, deep_check_block=random.randrange(DEEP_CHECK_BLOCKS))
    reads = candidate_outputs if candidate_outputs is not None else OutputReads(
        Reservoir(cfg.timing_recheck_reps), lambda reply: candidate.read_outputs(reply))
    sides: list[tuple[WorkerConnection, SideRecord, OutputReads | None]] = [(reference, ref, None),
                                                                             (candidate, cand, reads)]
    # Strictly alternating blocks from a random first side, until both sides are done: load that comes and goes
    # falls on both sides alike (a fresh shuffle every round let one side's blocks bunch up inside a burst of the
    # machine's other work, and so did a side that had settled leaving the other's last blocks back to back). A side
    # that is done but not exhausted keeps pace with short blocks (a settled block ends after MIN_BLOCK_CALLS).
    random.shuffle(sides)
    rounds: list[Round] = []
    for _ in range(64):
        if ref.done(cfg) and cand.done(cfg):
            break
        rounds.append(_round(sides, ref, cand, cfg, meter, idle, candidate_clock, candidate_threads, trusted_inputs))
    # Other work came and went: a few rounds more to replace the contended ones, where some rounds were quiet (a
    # machine busy throughout has none to offer, and its evaluations should not pay for rounds that cannot help).
    for _ in range(EXTRA_ROUNDS):
        if not wants_more_rounds(rounds, MIN_BLOCKS) or ref.exhausted(cfg) or cand.exhausted(cfg):
            break
        rounds.append(_round(sides, ref, cand, cfg, meter, idle, candidate_clock, candidate_threads, trusted_inputs))
    if not reads.reservoir.kept:  # every evaluation checks at least one timed call
        _block(candidate, cand, cfg, reads, first=False, after_call=candidate_threads, inputs=trusted_inputs)
    if trusted_inputs is not None:  # the earlier phase of a call's cycle first: work ahead of the call
        trusted_inputs.refuse_busy()
    if reads.quiet is not None:
        reads.quiet.refuse_busy()
    gap = _cross_check(ref, cand, device_kind)
    _refuse_work_left_running(cand)
    if idle is not None:
        idle.refuse_busy()
    if candidate_clock is not None:
        candidate_clock.refuse_stopped()
    chosen = choose(rounds, [b - a for a, b in ref.block_spans], [b - a for a, b in cand.block_spans], MIN_BLOCKS,
                    cfg.min_reps)
    return Measurement(ref.timing(chosen.reference_blocks), cand.timing(chosen.candidate_blocks), reads.reservoir.kept,
                       cand.kernels or {}, chosen.contention, shared_inputs=trusted_inputs is not None,
                       per_call_allowance_ms=None if gap is None else gap.allowed_ms)


def _round(sides: list[tuple[WorkerConnection, SideRecord, OutputReads | None]], ref: SideRecord, cand: SideRecord,
           cfg: EvalConfig, meter: Meter | None, idle: IdleCandidate | None = None,
           clock: CandidateClock | None = None, threads: Callable[[], None] | None = None,
           inputs: TrustedInputs | None = None) -> Round:
    """One block of each side that is not exhausted, in the evaluation's order, metered for other work; with `idle`,
    the candidate's CPU during the reference's blocks, and with `clock`, its timer clock around them; with `threads`,
    the driver's count of the candidate's threads before and after each reference block (the candidate waits then)
    and after each of its own calls."""
    if meter is not None:
        meter.start()
    ran: dict[int, int] = {}
    for conn, rec, reads in sides:
        if not rec.exhausted(cfg):
            def block(conn: WorkerConnection = conn, rec: SideRecord = rec, reads: OutputReads | None = reads) -> None:
                _block(conn, rec, cfg, reads, first=rec.blocks == 0, after_call=threads if rec is cand else None,
                       inputs=inputs)
            if rec is ref and idle is not None:
                block = functools.partial(idle.around, block)
            if rec is ref and clock is not None:  # its reads outside the CPU's: a reply costs the worker CPU
                block = functools.partial(clock.around, block)
            if rec is ref and threads is not None:
                threads()
            block()
            if rec is ref and threads is not None:
                threads()
            ran[id(rec)] = rec.blocks - 1
    return Round(ran.get(id(ref)), ran.get(id(cand)), meter.cores() if meter is not None else None)


def time_alone(conn: WorkerConnection, cfg: EvalConfig, device_kind: str) -> Timing:
    """One more side timed by the same protocol (the torch.compile baseline)."""
    rec = SideRecord(floor_ms=precision_floor_ms(device_kind))
    while not rec.done(cfg):
        _block(conn, rec, cfg, None, first=rec.blocks == 0)
    return rec.timing()
