"""What the store hands out: frozen dataclasses, never ORM rows."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Mapping

from evaluator.candidate import Candidate
from evaluator.result import EvalResult, Status
from evaluator.task import Task

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class RunStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class QueueState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


JOB_REQUIREMENTS = ("any", "cpu", "gpu")  # a job's need: any machine, a CPU for native kernels, a GPU


class JobState(StrEnum):
    """queued -> running -> done | failed; queued or running -> cancelled; running -> queued when released."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True, slots=True)
class TaskRecord:
    id: int
    name: str
    source: str
    digest: str
    path: str | None
    created_at: datetime
    flops: float | None = None
    min_bytes: int | None = None
    ops: tuple[str, ...] | None = None  # None: not counted yet

    @property
    def task(self) -> Task:
        return Task(name=self.name, source=self.source, digest=self.digest, path=self.path)


@dataclass(frozen=True, slots=True)
class RunRecord:
    id: int
    task_id: int
    bench_id: int | None
    status: RunStatus
    config: Mapping[str, Any]
    budget: Mapping[str, Any]
    evaluated: int    # the run's finished queue items: candidates it submitted and got a verdict for (new or stored)
    worker_s: float   # seconds a worker slot was held, submit to verdict (builds included), summed over evaluations
    cost_usd: float
    tokens_in: int
    tokens_out: int
    wall_s: float  # the run loop's wall time, summed over its invocations (resumes)
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class CandidateRecord:
    id: int
    task_id: int
    run_id: int | None  # the run that first added it
    source: str
    digest: str
    parents: tuple[str, ...]  # digests of the parents
    generation: int
    island: int
    origin: str
    note: str
    created_at: datetime

    @property
    def candidate(self) -> Candidate:
        return Candidate(self.source, self.digest, origin=self.origin, parents=self.parents, note=self.note)


@dataclass(frozen=True, slots=True)
class EvaluationRecord:
    id: int
    candidate_id: int
    task_id: int
    run_id: int | None  # the run that measured it
    result: EvalResult
    created_at: datetime

    @property
    def speedup(self) -> float | None:
        return self.result.speedup


@dataclass(frozen=True, slots=True)
class ScoredCandidate:
    candidate: CandidateRecord
    evaluation: EvaluationRecord | None  # None: not evaluated yet (on that device)

    @property
    def result(self) -> EvalResult | None:
        return None if self.evaluation is None else self.evaluation.result

    @property
    def speedup(self) -> float | None:
        return None if self.evaluation is None else self.evaluation.speedup


@dataclass(frozen=True, slots=True)
class RunTotals:
    run_id: int
    evaluated: int  # the run's finished queue items (RunRecord.evaluated)
    by_status: Mapping[str, int]  # Status value -> count, over the run's verdicts (one per candidate, as history)
    best_speedup: float | None
    worker_s: float
    cost_usd: float
    tokens_in: int = 0
    tokens_out: int = 0
    queue: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # QueueState value -> count
    faults: int = 0  # evaluations lost to the infrastructure and retried (never verdicts)


@dataclass(frozen=True, slots=True)
class LLMCallRecord:
    id: int
    run_id: int | None
    candidate_id: int | None
    role: str
    model: str
    prompt: str
    reply: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost_usd: float
    created_at: datetime
    candidate_digest: str | None = None
    outcome: str = "ok"     # ok | no_code | empty | truncated | error
    problem: str = ""       # why no candidate came back, in one sentence ("" when outcome is ok)
    attempts: int = 1


@dataclass(frozen=True, slots=True)
class LLMUsage:
    """LLM calls of one run and role (coder, judge-repair, ...): how many, how they ended, what they cost."""

    role: str
    calls: int
    by_outcome: Mapping[str, int]
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class BenchRecord:
    id: int
    suite: str
    agent: str
    config: Mapping[str, Any]
    status: RunStatus
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ArchiveEntry:
    """A task's fastest correct kernel in the store (on one device name, if asked): the archive's unit."""

    task: TaskRecord
    candidate: CandidateRecord
    evaluation: EvaluationRecord

    @property
    def speedup(self) -> float | None:
        return self.evaluation.speedup


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job of the work queue: the run it drives, who holds it and until when (see store/jobs.py)."""

    id: int
    task_id: int
    run_id: int
    state: JobState
    priority: int
    config: Mapping[str, Any]
    worker: str | None            # the worker holding it (running), else the last one that did
    lease_expires_at: datetime | None
    heartbeat_at: datetime | None
    attempts: int                 # times claimed, take-overs included
    error: str                    # why it failed ("" otherwise)
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    requires: str = "any"         # what its machine must have: any | cpu | gpu (see JOB_REQUIREMENTS)

    def held_by(self, worker: str) -> bool:
        """Whether `worker` still holds the job (as of this record; the lease may have run out since)."""
        return self.state is JobState.RUNNING and self.worker == worker


@dataclass(frozen=True, slots=True)
class DevicePeaks:
    """A device's measured copy bandwidth and peak fp32 throughput: the roofline of kernels timed on it."""
    device: str
    copy_gbps: float
    peak_gflops: float
    threads: int
    measured_at: datetime
    method: str | None = None  # `evaluator.device.cpu_peaks.METHOD` when measured; None: by a method before it was kept


@dataclass(frozen=True, slots=True)
class ConfirmationRecord:
    """One re-measurement of a finished run's candidate beside the reference (see store/confirmations.py)."""

    id: int
    run_id: int
    candidate_id: int
    device_name: str
    status: Status
    reason: str
    reference_ms: float | None  # medians of the re-measurement's timed calls
    candidate_ms: float | None
    speedup: float | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ConfirmedSpeedup:
    """What a run reports for a candidate it re-measured: the median speedup of the re-measurements alone (the
    search's own figure is left out: it is the one that was picked for being high). None when any re-measurement did
    not come back correct: such a kernel is not reported as the run's best."""

    candidate_id: int
    speedups: tuple[float, ...]   # of the re-measurements that came back OK, in the order they were taken
    failures: tuple[str, ...]     # "status: reason" of those that did not
    reference_ms: tuple[float, ...] = ()  # the reference's median beside each OK one: the yardstick of the machine

    @property
    def speedup(self) -> float | None:
        if self.failures or not self.speedups:
            return None
        return statistics.median(self.speedups)
