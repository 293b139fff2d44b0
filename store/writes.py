"""Batched, race-safe inserts: INSERT ... ON CONFLICT DO NOTHING RETURNING, then a look-up of the rows that existed.

Rows are inserted in key order, so concurrent writers lock keys in one order and cannot deadlock; the look-ups go
through an index whose first column is the looked-up key, so they stay fast before the planner has statistics.
"""

from __future__ import annotations

from typing import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from evaluator.candidate import Candidate
from evaluator.result import EvalResult
from store import queue
from store.codec import (
    CANDIDATE_COLUMNS,
    EVALUATION_COLUMNS,
    candidate_from_values,
    evaluation_from_values,
    result_columns,
)
from store.dialect import insert
from store.errors import UnknownId
from store.records import CandidateRecord, EvaluationRecord
from store.rows import CandidateRow, EvaluationRow, LLMCallRow, RunRow, utcnow

C = CandidateRow.__table__
E = EvaluationRow.__table__


def insert_candidates(
    session: Session, run_id: int | None, task_id: int, chunk: Sequence[Candidate], generation: int, island: int
) -> list[tuple[CandidateRecord, bool]]:
    now = utcnow()
    values = [
        {"task_id": task_id, "run_id": run_id, "source": c.source, "digest": c.digest, "parents": list(c.parents),
         "generation": generation, "island": island, "origin": c.origin, "note": c.note, "created_at": now}
        for c in sorted(chunk, key=lambda c: c.digest)
    ]
    stmt = insert(session, C).on_conflict_do_nothing(index_elements=["digest", "task_id"]).returning(*CANDIDATE_COLUMNS)
    added = {rec.digest: rec for rec in map(candidate_from_values, session.execute(stmt, values))}
    existing = {c.digest for c in chunk} - added.keys()
    found = dict(added)
    if existing:
        rows = session.execute(select(*CANDIDATE_COLUMNS).where(C.c.digest.in_(existing), C.c.task_id == task_id))
        found.update((rec.digest, rec) for rec in map(candidate_from_values, rows))
    if run_id is not None and added:
        link_llm_calls(session, run_id, {d: rec.id for d, rec in added.items()})
    out = []
    for c in chunk:
        out.append((found[c.digest], c.digest in added))
        added.pop(c.digest, None)  # a source repeated within the batch is new only once
    return out


def link_llm_calls(session: Session, run_id: int, ids_by_digest: dict[str, int]) -> None:
    """Point the run's LLM calls that produced or judged these candidates (known by digest so far) at their rows."""
    L = LLMCallRow.__table__
    waiting = session.execute(select(L.c.id, L.c.candidate_digest).where(
        L.c.run_id == run_id, L.c.candidate_id.is_(None), L.c.candidate_digest.in_(list(ids_by_digest)))).all()
    for call_id, digest in waiting:
        session.execute(update(L).where(L.c.id == call_id).values(candidate_id=ids_by_digest[digest]))


def insert_results(
    session: Session, url: str, run_id: int | None, chunk: Sequence[tuple[int, EvalResult]], worker_s: float
) -> list[EvaluationRecord]:
    if lost := next((res for _, res in chunk if not res.is_verdict), None):
        raise ValueError(f"An infrastructure failure is not a verdict and is not stored as one ({lost.reason}); "
                         "requeue the candidate (Store.requeue_after_fault).")
    ids = {cid for cid, _ in chunk}
    task_of = {cid: tid for cid, tid in session.execute(select(C.c.id, C.c.task_id).where(C.c.id.in_(ids)))}
    if missing := sorted(ids - task_of.keys()):
        raise UnknownId(url, "candidate", missing[0])
    now = utcnow()
    values = [{"candidate_id": cid, "task_id": task_of[cid], "run_id": run_id, "created_at": now, **result_columns(res)}
              for cid, res in sorted(chunk, key=lambda item: (item[0], item[1].device.name))]
    stmt = (insert(session, E).on_conflict_do_nothing(index_elements=["candidate_id", "device_name"])
            .returning(*EVALUATION_COLUMNS))
    inserted = map(evaluation_from_values, session.execute(stmt, values))
    added = {(ev.candidate_id, ev.result.device.name): ev for ev in inserted}
    found = dict(added)
    if existing := {(cid, res.device.name) for cid, res in chunk} - added.keys():
        rows = session.execute(select(*EVALUATION_COLUMNS).where(E.c.candidate_id.in_({cid for cid, _ in existing})))
        found.update(((ev.candidate_id, ev.result.device.name), ev) for ev in map(evaluation_from_values, rows))
    if run_id is not None:
        # One definition of "evaluated": the run's queue items that are done, counted as they finish, whether the
        # verdict is new or the store already held one for that candidate and device (a re-measure).
        finished = queue.mark_done(session, run_id, sorted(ids))
        session.execute(update(RunRow).where(RunRow.id == run_id).values(
            evaluated=RunRow.evaluated + finished, worker_s=RunRow.worker_s + worker_s * len(chunk), updated_at=now))
    return [found[(cid, res.device.name)] for cid, res in chunk]
