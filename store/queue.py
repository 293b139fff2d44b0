"""A run's queue of in-flight evaluations: queued -> running (claimed by a worker) -> done.

On SQLite the writer holds the database lock (BEGIN IMMEDIATE), so a claim is atomic; on PostgreSQL concurrent
claimers skip each other's locked rows (FOR UPDATE SKIP LOCKED), so no item is handed out twice.
"""

from __future__ import annotations

from typing import Iterable

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from store.dialect import insert, is_postgres
from store.records import QueueState
from store.rows import QueueItemRow, utcnow

Q = QueueItemRow.__table__


def enqueue(session: Session, run_id: int, candidate_ids: Iterable[int]) -> int:
    """Queue candidates for evaluation in a run; a candidate already queued (or done) in that run is left as it is."""
    now = utcnow()
    rows = [
        {"run_id": run_id, "candidate_id": cid, "state": QueueState.QUEUED.value, "attempts": 0,
         "created_at": now, "updated_at": now}
        for cid in sorted(set(candidate_ids))  # one lock order for all writers
    ]
    if not rows:
        return 0
    stmt = insert(session, Q).on_conflict_do_nothing(index_elements=["run_id", "candidate_id"]).returning(Q.c.id)
    return len(session.execute(stmt, rows).all())


def claim(session: Session, run_id: int, limit: int) -> list[int]:
    """Mark up to `limit` queued items running, oldest first, and return their candidate ids in queue order."""
    if limit <= 0:
        return []
    pick = (
        select(Q.c.id)
        .where(Q.c.run_id == run_id, Q.c.state == QueueState.QUEUED.value)
        .order_by(Q.c.id)
        .limit(limit)
    )
    if is_postgres(session):
        pick = pick.with_for_update(skip_locked=True)
    stmt = (
        update(Q)
        .where(Q.c.id.in_(pick.scalar_subquery()))
        .values(state=QueueState.RUNNING.value, attempts=Q.c.attempts + 1, updated_at=utcnow())
        .returning(Q.c.id, Q.c.candidate_id)
    )
    return [cid for _, cid in sorted(session.execute(stmt).all())]


def requeue_in_flight(session: Session, run_id: int) -> int:
    """Put a killed run's running items back in the queue; returns how many."""
    stmt = (
        update(Q)
        .where(Q.c.run_id == run_id, Q.c.state == QueueState.RUNNING.value)
        .values(state=QueueState.QUEUED.value, updated_at=utcnow())
    )
    return session.execute(stmt).rowcount


def requeue_after_fault(session: Session, run_id: int, candidate_id: int, fault: str) -> int:
    """Put one running item back in the queue after an infrastructure fault (not a verdict), noting the fault;
    returns how many faults the item has met. Its queue position (the item's id) is kept: it is claimed next."""
    stmt = (
        update(Q)
        .where(Q.c.run_id == run_id, Q.c.candidate_id == candidate_id, Q.c.state != QueueState.DONE.value)
        .values(state=QueueState.QUEUED.value, faults=Q.c.faults + 1, last_fault=fault[:1000], updated_at=utcnow())
        .returning(Q.c.faults)
    )
    found = session.execute(stmt).scalar_one_or_none()
    return int(found or 0)


def faults(session: Session, run_id: int) -> int:
    """Infrastructure faults the run's evaluations met (each was retried; none is a verdict)."""
    return int(session.execute(select(func.coalesce(func.sum(Q.c.faults), 0)).where(Q.c.run_id == run_id)).scalar_one())


def mark_done(session: Session, run_id: int, candidate_ids: Iterable[int]) -> int:
    """Finish the run's items for these candidates (an item never queued is created done); returns how many items
    became done now (an item already done counts once, when it first finished)."""
    ids = sorted(set(candidate_ids))
    enqueue(session, run_id, ids)
    finished = 0
    for start in range(0, len(ids), 1000):
        finished += session.execute(
            update(Q)
            .where(Q.c.run_id == run_id, Q.c.candidate_id.in_(ids[start : start + 1000]),
                   Q.c.state != QueueState.DONE.value)
            .values(state=QueueState.DONE.value, updated_at=utcnow())
        ).rowcount
    return finished


def counts(session: Session, run_id: int) -> dict[str, int]:
    rows = session.execute(select(Q.c.state, func.count()).where(Q.c.run_id == run_id).group_by(Q.c.state))
    return {state: n for state, n in rows}
