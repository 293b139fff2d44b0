"""SQLAlchemy rows (`*Row`). They never leave the `store` package: `Store` turns them into records.

The schema is created by the Alembic migrations in `store/migrations`; `tests/test_store_schema.py` checks that the
migrations and these rows agree.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


def _created() -> Mapped[datetime]:
    return mapped_column(DateTime(timezone=True), default=utcnow, nullable=False)


class TaskRow(Base):
    __tablename__ = "tasks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    source: Mapped[str] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str | None] = mapped_column(Text)
    flops: Mapped[float | None] = mapped_column(Float)        # least work of one reference call (None: not counted)
    min_bytes: Mapped[int | None] = mapped_column(BigInteger)  # inputs, outputs and weights: bytes moved at least
    ops: Mapped[list[Any] | None]                               # the reference's compute ops, sorted
    created_at: Mapped[datetime] = _created()


class BenchRow(Base):
    """One agent configuration over a suite of tasks: a leaderboard entry, made of one run per task."""

    __tablename__ = "benches"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'done', 'failed', 'interrupted')", name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    suite: Mapped[str] = mapped_column(Text, index=True)        # a built-in suite's name or a folder's path
    agent: Mapped[str] = mapped_column(String(255))             # e.g. "tune", "llm:gpt-4.1+judge:o4-mini"
    config: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="running")
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _created()


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'done', 'failed', 'interrupted')", name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), index=True)
    bench_id: Mapped[int | None] = mapped_column(ForeignKey("benches.id"), index=True)
    config: Mapped[dict[str, Any]]
    budget: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16), default="running")
    evaluated: Mapped[int] = mapped_column(Integer, default=0)  # finished queue items (store/writes.py)
    worker_s: Mapped[float] = mapped_column(Float, default=0.0)  # worker slot held, submit to verdict, summed
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    tokens_in: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    tokens_out: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    wall_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")  # summed over invocations
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _created()


class CandidateRow(Base):
    __tablename__ = "candidates"
    # Digest first: a batch lookup `digest IN (...)` then uses the index even before the planner has statistics.
    __table_args__ = (UniqueConstraint("digest", "task_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"), index=True)
    source: Mapped[str] = mapped_column(Text)
    digest: Mapped[str] = mapped_column(String(64))
    parents: Mapped[list[Any]]  # digests of the parents, as in evaluator.Candidate
    generation: Mapped[int] = mapped_column(Integer, default=0)
    island: Mapped[int] = mapped_column(Integer, default=0)
    origin: Mapped[str] = mapped_column(String(128))  # seed | tune | llm:<model> | human | import
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = _created()


class EvaluationRow(Base):
    """One verdict per candidate and device; `task_id` is copied from the candidate so top-k reads one index."""

    __tablename__ = "evaluations"
    __table_args__ = (
        UniqueConstraint("candidate_id", "device_name"),
        # top_k reads this index backwards (speedup, then id, descending): no sort, even before ANALYZE.
        Index("ix_evaluations_top", "task_id", "status", "speedup", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"), index=True)
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    candidate_median_ms: Mapped[float | None] = mapped_column(Float)
    candidate_iqr_ms: Mapped[float | None] = mapped_column(Float)
    candidate_reps: Mapped[int | None] = mapped_column(Integer)
    reference_median_ms: Mapped[float | None] = mapped_column(Float)
    reference_iqr_ms: Mapped[float | None] = mapped_column(Float)
    reference_reps: Mapped[int | None] = mapped_column(Integer)
    compiled_reference_median_ms: Mapped[float | None] = mapped_column(Float)  # torch.compile(Model), when asked for
    compiled_reference_iqr_ms: Mapped[float | None] = mapped_column(Float)
    compiled_reference_reps: Mapped[int | None] = mapped_column(Integer)
    # Each timing's standard error of the median: the precision its stopping rule reached (None: not kept then).
    candidate_se_ms: Mapped[float | None] = mapped_column(Float)
    reference_se_ms: Mapped[float | None] = mapped_column(Float)
    compiled_reference_se_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    max_abs_error: Mapped[float | None] = mapped_column(Float)
    max_rel_error: Mapped[float | None] = mapped_column(Float)
    peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    reference_peak_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    energy_j: Mapped[float | None] = mapped_column(Float)
    reference_energy_j: Mapped[float | None] = mapped_column(Float)
    power_w: Mapped[float | None] = mapped_column(Float)
    suspicious: Mapped[bool] = mapped_column(Boolean, default=False)
    device_kind: Mapped[str] = mapped_column(String(32))
    device_name: Mapped[str] = mapped_column(String(255))
    device: Mapped[dict[str, Any]]  # the whole DeviceInfo: driver and library versions
    backend: Mapped[str | None] = mapped_column(String(32))  # triton | cuda | cpp | torch (None: not reported)
    torch_rule: Mapped[str | None] = mapped_column(String(32))  # the rule for PyTorch it ran under (None: older)
    torch_share: Mapped[float | None] = mapped_column(Float)  # PyTorch's compute as a share of the reference's
    profile: Mapped[dict[str, Any]]
    trials: Mapped[list[Any]]
    log: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = _created()


class QueueItemRow(Base):
    """A run's in-flight work: queued -> running (claimed) -> done. A killed run's `running` items go back to queued."""

    __tablename__ = "queue_items"
    __table_args__ = (
        UniqueConstraint("run_id", "candidate_id"),
        Index("ix_queue_items_claim", "run_id", "state", "id"),
        CheckConstraint("state IN ('queued', 'running', 'done')", name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), index=True)
    state: Mapped[str] = mapped_column(String(16), default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Evaluations lost to the infrastructure (not verdicts: see Status.INFRA_FAILED) and the last one's reason.
    faults: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    last_fault: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = _created()
    updated_at: Mapped[datetime] = _created()


class LLMCallRow(Base):
    __tablename__ = "llm_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"), index=True)
    candidate_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"), index=True)
    # The candidate the call produced (coder) or judged (judge): known by digest before the candidate is stored;
    # `candidate_id` is filled in when the candidate is recorded.
    candidate_digest: Mapped[str | None] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(64))  # coder | judge | ...
    model: Mapped[str] = mapped_column(String(255))
    prompt: Mapped[str] = mapped_column(Text)
    reply: Mapped[str] = mapped_column(Text)
    tokens_in: Mapped[int] = mapped_column(Integer, default=0)
    tokens_out: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    outcome: Mapped[str] = mapped_column(String(32), default="ok", server_default="ok")  # ok | no_code | error ...
    problem: Mapped[str] = mapped_column(Text, default="", server_default="")
    attempts: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime] = _created()


class JobRow(Base):
    """A run waiting for, or driven by, one of a pool of workers: queued -> running -> done | failed | cancelled.

    A worker holds a running job while `lease_expires_at` is in the future and renews it by heartbeats; a job whose
    lease expired is claimed again (take-over) and its run resumes from the store. See store/jobs.py.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_claim", "state", "priority", "id"),
        CheckConstraint("state IN ('queued', 'running', 'done', 'failed', 'cancelled')", name="state"),
        CheckConstraint("requires IN ('any', 'cpu', 'gpu')", name="requires"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"))
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), unique=True)  # the run the job drives
    config: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16), default="queued")
    priority: Mapped[int] = mapped_column(Integer, default=0)
    requires: Mapped[str] = mapped_column(String(8), default="any", server_default="any")  # any | cpu | gpu
    worker: Mapped[str | None] = mapped_column(String(255))   # the holder (running), or the last one
    lease_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # claims, take-overs included
    error: Mapped[str] = mapped_column(Text, default="", server_default="")      # why it failed, one sentence
    created_at: Mapped[datetime] = _created()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))   # first claimed
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))  # done, failed or cancelled
    updated_at: Mapped[datetime] = _created()


class ConfirmationRow(Base):
    """One re-measurement of a finished run's fastest candidate, beside the reference, before the run reports its best
    (opforge/run/confirm.py). Kept apart from the candidate's verdict (one per candidate and device), so neither the
    search's figure nor any re-measurement is lost, and a resumed run re-measures only what is missing."""

    __tablename__ = "confirmations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"))
    device_name: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    reference_median_ms: Mapped[float | None] = mapped_column(Float)
    candidate_median_ms: Mapped[float | None] = mapped_column(Float)
    speedup: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = _created()


class DevicePeakRow(Base):
    """A device's measured speed of light (`evaluator/device/cpu_peaks.py`): one row per device name, as verdicts name it."""

    __tablename__ = "device_peaks"

    device: Mapped[str] = mapped_column(String(255), primary_key=True)
    copy_gbps: Mapped[float] = mapped_column(Float)     # large-array copy bandwidth, read + write bytes per second
    peak_gflops: Mapped[float] = mapped_column(Float)   # fp32 FMA throughput with the machine's SIMD width
    threads: Mapped[int] = mapped_column(Integer)
    measured_at: Mapped[datetime] = _created()
    method: Mapped[str | None] = mapped_column(String(64))  # how they were measured (None: before the store said)
