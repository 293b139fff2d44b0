"""The run loop: propose, record, evaluate, record, select — until a budget is spent.

The driver (this loop, one thread) owns every store write. Proposals run on their own thread (`ProposalThread`) and
evaluations on the runner's workers; the loop waits on whichever finishes first, so a slow proposer never delays
recording a result and the workers are kept fed from the store's queue while proposals are pending.

Crash safety (kill -9 at any moment): a candidate and its queue row are written before it is submitted; a result and
the queue item's completion are one transaction afterwards. Resuming puts the run's in-flight items back in the queue
and rebuilds the population from the run's history; there is no other checkpoint.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field

from agents.proposal import Scored
from evaluator.candidate import Candidate
from evaluator.config import EvalConfig
from evaluator.driver.pool import Runner
from evaluator.result import EvalResult, Status
from evaluator.task import Task
from opforge.run.confirm import NO_CONFIRMATION, Confirmation, ConfirmPolicy, reserve_s
from opforge.run.population import Member, member_from_result, member_from_scored
from opforge.run.proposals import Proposal, ProposalThread, Proposing
from opforge.run.start import Budget
from opforge.run.strategy import EvolutionStrategy, StrategyConfig
from store import CandidateRecord, RunStatus, Store

TICK_S = 0.5                    # progress refresh while waiting
MAX_EMPTY_ROUNDS = 5            # proposal rounds with nothing new before waiting for fresh results
MAX_PROPOSER_FAILURES = 3       # consecutive failed proposal rounds before the run stops
MAX_FAULTS_PER_CANDIDATE = 3    # infrastructure faults one candidate's evaluation may meet before the run stops
STALL_S = 60.0                  # no verdict for this long while evaluations run: the live line says why
PROPOSAL_GRACE_S = 60.0         # at a clean stop, how long unfinished proposals (paid LLM calls) may finish


class SearchError(Exception):
    """A run that cannot go on; the message is one readable sentence."""


@dataclass(frozen=True, slots=True)
class Progress:
    run_id: int
    event: str                          # start | result | fault | notice | stalled | tick | confirm | stop
    done: int
    budget: int
    in_flight: int
    queued: int
    best_speedup: float | None
    by_status: Mapping[str, int]
    worker_s: float
    elapsed_s: float
    last: Member | None = None          # the member just measured (event "result"; "confirm": re-measured)
    usd: float | None = None            # LLM spend so far (None: no LLM in this run)
    tokens: int | None = None
    faults: int = 0                     # evaluations lost to the infrastructure this invocation (retried, no verdict)
    left_s: float | None = None         # time left to the budget at this invocation's rate (None: no rate yet)
    note: str = ""                      # events "fault", "notice" (the runner's, e.g. a lost worker retried) and
                                        # "stalled" (no verdict for a minute, and why): one sentence


@dataclass(frozen=True, slots=True)
class RunOutcome:
    run_id: int
    status: RunStatus
    done: int
    stop_reason: str
    best: Member | None                 # once confirmed (settings.confirm), with its confirmed speedup
    by_status: Mapping[str, int] = field(default_factory=dict)
    confirmed: bool = False             # the best's figure is the median of its re-measurements


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How one invocation of a run's search evaluates, stops and chooses parents (see opforge.run.launch, which
    builds them from the run's stored configuration)."""

    eval_cfg: EvalConfig
    budget: Budget
    strategy: StrategyConfig = StrategyConfig()
    archive_inspirations: tuple[Scored, ...] = ()   # earlier runs' kernels shown to the proposer
    confirm: ConfirmPolicy = NO_CONFIRMATION        # the fastest re-measured before the best is reported (confirm.py)


class Search:
    def __init__(self, store: Store, run_id: int, task: Task, proposing: Proposing, runner: Runner,
                 settings: SearchSettings, on_progress: Callable[[Progress], None] | None = None,
                 should_stop: Callable[[], str | None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`should_stop`: asked at every turn of the loop (keep it cheap), a reason to stop cleanly (no new work, the
        evaluations in flight recorded) and mark the run interrupted, e.g. its job was cancelled. `clock`: seconds,
        for the time limit and the evaluations' walls (a test drives it)."""
        self.store, self.run_id, self.task, self.runner = store, run_id, task, runner
        self.proposer, self.oversample = proposing.proposer, proposing.oversample
        self.spend, self.extra_per_request = proposing.spend, proposing.extra_per_request
        self.eval_cfg, self.budget, self.strategy_config = settings.eval_cfg, settings.budget, settings.strategy
        self.archive_inspirations = settings.archive_inspirations
        self.confirm_policy = settings.confirm
        self._confirmed: tuple[Member | None] | None = None  # the confirmed best, once confirmation is over
        self.on_progress = on_progress
        self.should_stop = should_stop
        self.by_status: Counter[str] = Counter()
        self.done = self.queued = 0
        self.worker_s = 0.0
        self.inflight: dict[Future[EvalResult], tuple[CandidateRecord, int, float]] = {}
        self._clock = clock
        self._walls_s: list[float] = []  # this invocation's evaluations, submit to verdict
        self.faults = 0                  # evaluations lost to the infrastructure this invocation (none is a verdict)
        self._fault_stop: str | None = None
        self._moved_at = self._stall_said_at = clock()  # the last verdict or fault; the last "stalled" report
        self._started = self._wall_mark = clock()

    # -- set-up from the store ------------------------------------------------------------------------------------
    def _rebuild(self) -> EvolutionStrategy:
        run = self.store.get_run(self.run_id)
        self.store.requeue_in_flight(self.run_id)
        history = self.store.history(self.run_id)
        if not history and not getattr(self.proposer, "generates", False):
            raise SearchError(f"Run {self.run_id} has no candidates recorded (it was stopped while starting); "
                              "start a new run.")
        unmeasured = [sc.candidate.id for sc in history if sc.evaluation is None]
        if unmeasured:  # a kill between recording a candidate and queueing it must not lose it
            self.store.enqueue(self.run_id, unmeasured)
        members = [member_from_scored(sc) for sc in history]
        self.by_status.update(str(m.status) for m in members if not m.pending)
        totals = self.store.run_totals(self.run_id)
        self.done, self.queued = totals.evaluated, totals.queue.get("queued", 0)
        self.worker_s = run.worker_s
        self.task_id = run.task_id
        return EvolutionStrategy.from_members(members, self.strategy_config)

    # -- the loop -------------------------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        self._started = self._wall_mark = self._clock()
        strategy = self._rebuild()
        self.store.set_run_status(self.run_id, RunStatus.RUNNING)
        proposals = ProposalThread(self.proposer, self.task, self.oversample, self.archive_inspirations)
        pending: Future[list[Proposal]] | None = None
        stop: str | None = None
        status = RunStatus.DONE
        empty_rounds = failures = 0
        self._report("start", strategy)
        try:
            while True:
                stop = stop or self._budget_spent()
                if stop is None and self.should_stop is not None and (asked := self.should_stop()):
                    stop, status = asked, RunStatus.INTERRUPTED
                if stop is None:
                    self._submit_queued()
                    room = self.budget.max_candidates - self.done - len(self.inflight) - self.queued
                    want = min(room, 2 * self.runner.capacity - len(self.inflight) - self.queued)
                    if pending is None and want > 0 and empty_rounds < MAX_EMPTY_ROUNDS:
                        requests = strategy.ask(want)
                        if requests:
                            pending = proposals.submit(requests)
                    if pending is None and not self.inflight and not self.queued:
                        stop = ("the proposer has nothing new to offer" if room > 0
                                else f"reached the budget of {self.budget.max_candidates} candidates")
                if stop is not None and not self.inflight:
                    break
                waiting = set(self.inflight) | ({pending} if pending is not None and stop is None else set())
                wait(waiting, timeout=TICK_S, return_when=FIRST_COMPLETED)
                for future in [f for f in self.inflight if f.done()]:
                    self._record_result(future, strategy)
                    empty_rounds = 0
                if self._fault_stop is not None and stop is None:
                    stop, status = self._fault_stop, RunStatus.FAILED
                self._watch_runner(strategy)
                if pending is not None and pending.done() and stop is None:
                    batch, pending = pending.result(), None
                    added = self._record_proposals(batch, strategy)
                    empty_rounds = 0 if added else empty_rounds + 1
                    failed = [p.error for p in batch if p.error]
                    failures = failures + 1 if failed and len(failed) == len(batch) else 0
                    if failures >= MAX_PROPOSER_FAILURES:
                        stop, status = f"the proposer failed {failures} times in a row: {failed[0]}", RunStatus.FAILED
                self._report("tick", strategy)
            if pending is not None and not pending.done():
                # Calls already sent are paid for: let them finish so the store records them (not their children).
                wait({pending}, timeout=PROPOSAL_GRACE_S)
            if status == RunStatus.DONE and self.confirm_policy.enabled:
                asked = self._confirm(strategy)
                if asked is not None:
                    stop, status = asked, RunStatus.INTERRUPTED
        except KeyboardInterrupt:
            self.store.set_run_status(self.run_id, RunStatus.INTERRUPTED)
            raise
        except BaseException:
            self.store.set_run_status(self.run_id, RunStatus.FAILED)
            raise
        finally:
            proposals.close()
            try:
                self._note_wall_time()
            except Exception:  # noqa: BLE001 - bookkeeping must not mask why the loop ended
                pass
        self.store.set_run_status(self.run_id, status)
        self._report("stop", strategy)
        best = self._confirmed[0] if self._confirmed is not None else strategy.population.best()
        return RunOutcome(self.run_id, status, self.done, stop or "", best, dict(self.by_status),
                          confirmed=self._confirmed is not None)

    def _confirm(self, strategy: EvolutionStrategy) -> str | None:
        """Re-measure the fastest candidates (opforge.run.confirm) before the run reports its best; the re-measurements
        the store already holds (a resumed run) are not taken again. Returns a reason when asked to stop first."""
        confirmation = Confirmation(strategy.population.members.values(), self.store.confirmations(self.run_id),
                                    self.confirm_policy)
        owed = confirmation.ask()
        inflight: dict[Future[EvalResult], tuple[Member, float]] = {}
        faults: dict[int, int] = {}
        stop: str | None = None
        while owed or inflight:
            if stop is None and self.should_stop is not None and (asked := self.should_stop()):
                stop, owed = asked, []
            while owed and len(inflight) < self.runner.capacity:
                member = owed.pop(0)
                future = self.runner.submit(self.task, member.candidate, self.eval_cfg)
                inflight[future] = (member, self._clock())
            wait(set(inflight), timeout=TICK_S, return_when=FIRST_COMPLETED)
            for future in [f for f in inflight if f.done()]:
                member, started = inflight.pop(future)
                elapsed_s = self._clock() - started
                assert member.candidate_id is not None
                result = future.result()
                if not result.is_verdict:  # lost to the infrastructure: measured again, never recorded
                    self.faults += 1
                    faults[member.candidate_id] = faults.get(member.candidate_id, 0) + 1
                    if faults[member.candidate_id] >= MAX_FAULTS_PER_CANDIDATE:
                        raise SearchError(f"The re-measurement of candidate {member.candidate_id} was lost to the "
                                          f"infrastructure {faults[member.candidate_id]} times ({result.reason}); "
                                          "fix the workers, then resume the run.")
                    owed.insert(0, member)
                    self._report("fault", strategy, note=result.reason)
                    continue
                record = self.store.add_confirmation(self.run_id, member.candidate_id, result, worker_s=elapsed_s)
                self.worker_s += elapsed_s
                confirmation.tell(record)
                figure = record.speedup if record.status == Status.OK else None
                self._report("confirm", strategy, dataclasses.replace(member, status=record.status, speedup=figure))
        if stop is not None:
            return stop
        self._confirmed = (confirmation.best(),)
        return None

    def _budget_spent(self) -> str | None:
        b = self.budget
        if self.done >= b.max_candidates:
            return f"reached the budget of {b.max_candidates} candidates"
        if b.time_limit_s is not None:
            # The limit covers the confirmation that follows the search: the search stops that much earlier.
            keep_s = reserve_s(self.confirm_policy, self.runner.capacity, self._walls_s, b.time_limit_s)
            if self._clock() - self._started >= b.time_limit_s - keep_s:
                kept = f" (keeping {keep_s:.0f} s of it to confirm the best)" if keep_s else ""
                return f"reached the time limit of {b.time_limit_s:g} s{kept}"
        if b.worker_s is not None and self.worker_s >= b.worker_s:
            return f"reached the evaluation-time budget of {b.worker_s:g} s"
        if self.spend is not None:
            if b.usd is not None and self.spend.usd >= b.usd:
                return f"spent the LLM budget of ${b.usd:g}"
            if b.tokens is not None and self.spend.tokens >= b.tokens:
                return f"spent the LLM budget of {b.tokens} tokens"
        return None

    def _submit_queued(self) -> None:
        # Never past the budget, whatever the queue holds (generation 0 of an older run, a resumed run's queue).
        room = self.budget.max_candidates - self.done - len(self.inflight)
        free = min(self.runner.capacity - len(self.inflight), room)
        if free <= 0 or self.queued <= 0:
            return
        claimed = self.store.claim_pending(self.run_id, free)
        self.queued = max(0, self.queued - len(claimed)) if len(claimed) == free else 0
        for record in claimed:
            future = self.runner.submit(self.task, record.candidate, self.eval_cfg)
            self.inflight[future] = (record, record.island, self._clock())

    def _record_result(self, future: Future[EvalResult], strategy: EvolutionStrategy) -> None:
        record, island, started = self.inflight.pop(future)
        result = future.result()  # a TaskError (the task is unusable) stops the run
        elapsed_s = self._clock() - started
        self._moved_at = self._clock()
        if not result.is_verdict:
            self._requeue_after_fault(record, result, elapsed_s, strategy)
            return
        self._walls_s.append(elapsed_s)
        evaluation = self.store.add_result(record.id, self.run_id, result, worker_s=elapsed_s)
        self.done += 1
        self.worker_s += elapsed_s
        self._note_wall_time()
        known = strategy.population.members.get(record.digest)
        member = member_from_result(record.candidate, record.id, known.generation if known else record.generation,
                                    known.island if known else island, evaluation.result)
        strategy.tell(member)
        self.by_status[str(member.status)] += 1
        self._report("result", strategy, member)

    def _watch_runner(self, strategy: EvolutionStrategy) -> None:
        """Pass the runner's notices on (a lost worker retried elsewhere), and once a minute without a verdict while
        evaluations run, say why: the runner's reason where it has one (Ray cannot place a worker), else how long
        the oldest evaluation has run."""
        for notice in getattr(self.runner, "notices", lambda: [])():
            self._report("notice", strategy, note=notice)
        now = self._clock()
        if not self.inflight:
            self._moved_at = now
            return
        if now - self._moved_at < STALL_S or now - self._stall_said_at < STALL_S:
            return
        self._stall_said_at = now
        reason = getattr(self.runner, "waiting_reason", lambda: None)()
        if reason is None:
            oldest_s = now - min(started for _, _, started in self.inflight.values())
            reason = (f"{len(self.inflight)} evaluation{'s' if len(self.inflight) != 1 else ''} running, the oldest "
                      f"for {oldest_s:.0f} s (each stops at its timeout)")
        self._report("stalled", strategy, note=f"no verdict for {now - self._moved_at:.0f} s: {reason}")

    def _requeue_after_fault(self, record: CandidateRecord, result: EvalResult, elapsed_s: float,
                             strategy: EvolutionStrategy) -> None:
        """An evaluation lost to the infrastructure: no verdict is stored, nothing counts against the candidate; it
        goes back to the queue (claimed next) unless it has met `MAX_FAULTS_PER_CANDIDATE` faults, which stops the
        run as failed with the candidate still queued for a resume."""
        self.worker_s += elapsed_s
        self.faults += 1
        faults = self.store.requeue_after_fault(self.run_id, record.id, result.reason)
        self.queued += 1
        if faults >= MAX_FAULTS_PER_CANDIDATE and self._fault_stop is None:
            self._fault_stop = (f"the evaluation of candidate {record.id} was lost to the infrastructure {faults} "
                                f"times ({result.reason}); it stays queued: fix the workers, then resume the run")
        self._report("fault", strategy, note=result.reason)

    def _note_wall_time(self) -> None:
        now = self._clock()
        self.store.add_wall_time(self.run_id, now - self._wall_mark)
        self._wall_mark = now

    def _record_proposals(self, batch: list[Proposal], strategy: EvolutionStrategy) -> int:
        room = self.budget.max_candidates - self.done - len(self.inflight) - self.queued
        chosen: dict[str, tuple[Candidate, int, int]] = {}
        for proposal in batch:
            taken = 0
            for candidate in proposal.candidates:
                if len(chosen) >= room or taken >= proposal.request.n + self.extra_per_request:
                    break
                if strategy.population.knows(candidate.digest) or candidate.digest in chosen:
                    continue
                chosen[candidate.digest] = (candidate, proposal.request.generation, proposal.request.island)
                taken += 1
        groups: dict[tuple[int, int], list[Candidate]] = {}
        for candidate, generation, island in chosen.values():
            groups.setdefault((generation, island), []).append(candidate)
        ids: list[int] = []
        for (generation, island), candidates in groups.items():
            for record, _ in self.store.add_candidates(self.run_id, self.task_id, candidates, generation, island):
                ids.append(record.id)
                strategy.note_pending(Member(candidate=record.candidate, candidate_id=record.id,
                                             generation=generation, island=island))
        if ids:
            self.queued += self.store.enqueue(self.run_id, ids)
        return len(ids)

    def _report(self, event: str, strategy: EvolutionStrategy, last: Member | None = None, note: str = "") -> None:
        if self.on_progress is None:
            return
        best = self._confirmed[0] if self._confirmed is not None else strategy.population.best()
        self.on_progress(Progress(
            run_id=self.run_id, event=event, done=self.done, budget=self.budget.max_candidates,
            in_flight=len(self.inflight), queued=self.queued, best_speedup=best.speedup if best else None,
            by_status=dict(self.by_status), worker_s=self.worker_s, elapsed_s=self._clock() - self._started, last=last,
            usd=None if self.spend is None else self.spend.usd, tokens=None if self.spend is None else self.spend.tokens,
            faults=self.faults, note=note, left_s=self._left_s()))

    def _left_s(self) -> float | None:
        """Seconds to the candidate budget at the rate of this invocation's verdicts (two at least), capped by the
        time limit; None before a rate is known."""
        if len(self._walls_s) < 2:
            return None
        elapsed_s = self._clock() - self._started
        left_s = max(0, self.budget.max_candidates - self.done) * elapsed_s / len(self._walls_s)
        if self.budget.time_limit_s is not None:
            left_s = min(left_s, max(0.0, self.budget.time_limit_s - elapsed_s))
        return left_s
