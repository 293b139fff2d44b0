"""The work queue of `opforge worker`: jobs claimed under a lease, kept by heartbeats, taken over when it runs out.

    queued ──claim──► running ──finish──► done | failed
      │                 │  ▲ └─release (worker stopping)──► queued
      │                 │  └── claim again once the lease has expired (take-over; attempts + 1)
      └──cancel──► cancelled ◄──cancel──┘   (the holder notices at its next heartbeat and stops)

Claiming is one transaction. On PostgreSQL the pick is `SELECT ... FOR UPDATE SKIP LOCKED` (highest priority, then
oldest), so concurrent claimers never wait on each other's row and never get the same job; on SQLite the writer holds
the database lock (BEGIN IMMEDIATE, see store/engine.py), so claimers take turns. Every conditional write (heartbeat,
finish, release) names the holder and `state = 'running'`: a worker that lost its job changes nothing.

Lease times use the database's clock (PostgreSQL `now()`), so workers on machines with skewed clocks agree on when
a lease has expired; on SQLite (one machine) the local clock is the database's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Mapping, Sequence

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.orm import Session

from store.dialect import is_postgres
from store.records import JobState, RunStatus
from store.rows import JobRow, RunRow, utcnow

J = JobRow.__table__
R = RunRow.__table__

QUEUED, RUNNING = JobState.QUEUED.value, JobState.RUNNING.value


def db_now(session: Session) -> datetime:
    """The database's time (PostgreSQL: the transaction's start), timezone-aware UTC."""
    if is_postgres(session):
        return session.execute(select(func.now())).scalar_one()
    return utcnow()


def row(session: Session, job_id: int) -> JobRow | None:
    """The job as it is now in this transaction (re-read: a Core update may have changed it)."""
    stmt = select(JobRow).where(JobRow.id == job_id).execution_options(populate_existing=True)
    return session.execute(stmt).scalar_one_or_none()


def create(session: Session, task_id: int, run_id: int, config: Mapping[str, Any], priority: int,
           requires: str = "any") -> JobRow:
    now = db_now(session)
    job = JobRow(task_id=task_id, run_id=run_id, config=dict(config), state=QUEUED, priority=priority, attempts=0,
                 error="", created_at=now, updated_at=now, requires=requires)
    session.add(job)
    session.flush()
    return job


def claim(session: Session, worker: str, lease_s: float, max_attempts: int,
          has: Sequence[str] = ("cpu", "gpu")) -> int | None:
    """Take the best claimable job for `worker` and return its id (None: nothing to do).

    Claimable: queued, or running with an expired lease (its worker died or stalled), and needing only what the
    worker's machine `has` (`cpu`, `gpu`): a CPU-only worker never takes a GPU job, nor a GPU worker a CPU one. A take-over of a job whose
    workers already lost it `max_attempts` times marks it failed instead (and its run), and the next is tried.
    """
    now = db_now(session)
    claimable = or_(J.c.state == QUEUED, and_(J.c.state == RUNNING, J.c.lease_expires_at < now))
    runnable = J.c.requires.in_(["any", *has])
    pick = select(J.c.id, J.c.state, J.c.attempts, J.c.run_id, J.c.worker).where(claimable, runnable)
    pick = pick.order_by(J.c.priority.desc(), J.c.id).limit(1)
    if is_postgres(session):
        pick = pick.with_for_update(skip_locked=True)
    while (found := session.execute(pick).first()) is not None:
        job_id, state, attempts, run_id, last_worker = found
        if state == RUNNING and attempts >= max_attempts:
            error = (f"its workers stopped renewing the lease {attempts} times (last: {last_worker}); "
                     f"continue the run with `opforge optimize --resume {run_id}` after finding out why")
            session.execute(update(J).where(J.c.id == job_id).values(
                state=JobState.FAILED.value, error=error, lease_expires_at=None, finished_at=now, updated_at=now))
            session.execute(update(R).where(R.c.id == run_id).values(status=RunStatus.FAILED.value, updated_at=now))
            continue
        session.execute(update(J).where(J.c.id == job_id).values(
            state=RUNNING, worker=worker, lease_expires_at=now + timedelta(seconds=lease_s), heartbeat_at=now,
            attempts=J.c.attempts + 1, started_at=func.coalesce(J.c.started_at, now), updated_at=now))
        return job_id
    return None


def _held(job_id: int, worker: str):  # noqa: ANN202 - a SQL condition
    return and_(J.c.id == job_id, J.c.worker == worker, J.c.state == RUNNING)


def heartbeat(session: Session, job_id: int, worker: str, lease_s: float) -> bool:
    """Extend the lease by `lease_s` from now if `worker` still holds the job; False when it does not."""
    now = db_now(session)
    stmt = update(J).where(_held(job_id, worker)).values(
        heartbeat_at=now, lease_expires_at=now + timedelta(seconds=lease_s), updated_at=now)
    return session.execute(stmt).rowcount == 1


def finish(session: Session, job_id: int, worker: str, state: JobState, error: str) -> bool:
    """Mark the job done or failed if `worker` still holds it; False (and nothing changed) otherwise."""
    now = db_now(session)
    stmt = update(J).where(_held(job_id, worker)).values(
        state=state.value, error=error, lease_expires_at=None, finished_at=now, updated_at=now)
    return session.execute(stmt).rowcount == 1


def release(session: Session, job_id: int, worker: str) -> bool:
    """Put a held job back in the queue (its worker is stopping); the next claim resumes its run."""
    now = db_now(session)
    stmt = update(J).where(_held(job_id, worker)).values(
        state=QUEUED, worker=None, lease_expires_at=None, updated_at=now)
    return session.execute(stmt).rowcount == 1


def cancel(session: Session, job_id: int) -> bool:
    """Cancel a queued or running job; False when it had already finished.

    A queued job's run is marked interrupted at once (it can still be continued with `optimize --resume`); a running
    job's worker notices at its next heartbeat, stops its search and the search marks the run interrupted.
    """
    now = db_now(session)
    found = session.execute(select(J.c.state, J.c.run_id).where(J.c.id == job_id).with_for_update()).first()
    if found is None or found.state not in (QUEUED, RUNNING):
        return False
    session.execute(update(J).where(J.c.id == job_id).values(
        state=JobState.CANCELLED.value, finished_at=now, updated_at=now))
    if found.state == QUEUED:
        session.execute(update(R).where(R.c.id == found.run_id).values(
            status=RunStatus.INTERRUPTED.value, updated_at=now))
    return True
