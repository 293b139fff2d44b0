"""The read side: a run's history (to rebuild a population on resume), a task's leaderboard, a run's totals.

These read plain columns (not ORM objects): a history of 100,000 candidates must load in seconds.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from sqlalchemy import func, select, union
from sqlalchemy.orm import Session

from evaluator.measure import speedup_noise
from evaluator.result import Status
from store.codec import (
    CANDIDATE_COLUMNS,
    EVALUATION_COLUMNS,
    candidate_from_values,
    evaluation_from_values,
    task_record,
)
from store.confirmations import confirmed_speedups, run_confirmations
from store.records import (
    ArchiveEntry,
    CandidateRecord,
    EvaluationRecord,
    LLMUsage,
    RunTotals,
    ScoredCandidate,
    TaskRecord,
)
from store.rows import CandidateRow, EvaluationRow, LLMCallRow, QueueItemRow, RunRow, TaskRow

C = CandidateRow.__table__
E = EvaluationRow.__table__
Q = QueueItemRow.__table__
_CHUNK = 1000


GPU_BACKENDS = ("triton", "cuda")


def run_members(run_id: int):  # noqa: ANN201 - a SQL subquery
    """The candidates a run created, and those it queued (a candidate another run found first still counts)."""
    return union(select(C.c.id).where(C.c.run_id == run_id), select(Q.c.candidate_id).where(Q.c.run_id == run_id))


def history(session: Session, run_id: int, device: str | None = None) -> list[ScoredCandidate]:
    members = run_members(run_id).subquery()
    member_ids = select(members.c.id)
    cands = session.execute(select(*CANDIDATE_COLUMNS).where(C.c.id.in_(member_ids)).order_by(C.c.id)).all()
    evals = select(*EVALUATION_COLUMNS).where(E.c.candidate_id.in_(member_ids))
    if device is not None:
        evals = evals.where(E.c.device_name == device)
    best: dict[int, EvaluationRecord] = {}
    records = list(map(evaluation_from_values, session.execute(evals).all()))
    rank = verdict_rank(run_id, run_device(session, run_id))
    for ev in sorted(records, key=lambda ev: rank(ev.run_id, ev.result.device.name, ev.id)):
        best[ev.candidate_id] = ev
    return [ScoredCandidate(rec, best.get(rec.id)) for rec in map(candidate_from_values, cands)]


def run_device(session: Session, run_id: int) -> str | None:
    """The device the run evaluates on: that of its latest own evaluation (None before it has recorded one)."""
    return session.execute(select(E.c.device_name).where(E.c.run_id == run_id)
                           .order_by(E.c.id.desc()).limit(1)).scalar()


def verdict_rank(run_id: int, device: str | None):  # noqa: ANN201 - a sort key
    """Which of a candidate's verdicts is the run's (the highest ranks): one the run recorded itself; otherwise one on
    the run's device (a kernel another run had already measured there is not measured twice: the store keeps one
    verdict per candidate and device); then the latest. `history` and `run_totals` both choose with it, so `opforge
    show`, `opforge runs` and the API agree on a run's results and best."""
    return lambda ev_run_id, ev_device, ev_id: (ev_run_id == run_id, device is not None and ev_device == device,
                                                ev_id)


def top_k(session: Session, task_id: int, k: int, device: str | None = None) -> list[ScoredCandidate]:
    """The task's k fastest correct candidates, by speedup (ties: latest evaluated first); each candidate once."""
    ok = (E.c.task_id == task_id, E.c.status == Status.OK.value, E.c.speedup.is_not(None))
    query = select(*EVALUATION_COLUMNS).where(*ok)
    if device is not None:
        query = query.where(E.c.device_name == device)
    query = query.order_by(E.c.speedup.desc(), E.c.id.desc())
    page = max(2 * k, 32)
    picked: dict[int, EvaluationRecord] = {}
    offset = 0
    while len(picked) < k:
        rows = session.execute(query.offset(offset).limit(page)).all()
        for ev in map(evaluation_from_values, rows):
            if ev.candidate_id not in picked and len(picked) < k:
                picked[ev.candidate_id] = ev
        if len(rows) < page:
            break
        offset += page
    cands = candidates_by_id(session, list(picked))
    return [ScoredCandidate(cands[cid], ev) for cid, ev in picked.items()]


def candidates_by_id(session: Session, ids: Sequence[int]) -> dict[int, CandidateRecord]:
    out: dict[int, CandidateRecord] = {}
    for start in range(0, len(ids), _CHUNK):
        for rec in map(candidate_from_values, session.execute(
                select(*CANDIDATE_COLUMNS).where(C.c.id.in_(ids[start : start + _CHUNK])))):
            out[rec.id] = rec
    return out


def run_totals(session: Session, run: RunRow, queue_counts: dict[str, int], faults: int = 0) -> RunTotals:
    """Statuses and best speedup over the run's verdicts, chosen as `history` chooses them: a candidate the run
    queued that another run had already measured on the same device counts with that verdict (the store keeps one
    verdict per candidate and device, so such a re-evaluation records no row of its own). Once the run has
    re-measured its fastest candidates (store/confirmations.py), its best is the best confirmed figure."""
    members = run_members(run.id).subquery()
    rows = session.execute(select(E.c.candidate_id, E.c.run_id, E.c.device_name, E.c.id, E.c.status, E.c.speedup)
                           .where(E.c.candidate_id.in_(select(members.c.id)))).all()
    rank = verdict_rank(run.id, run_device(session, run.id))
    chosen: dict[int, tuple[str, float | None]] = {}
    for cid, _, _, _, status, speedup in sorted(rows, key=lambda r: rank(r[1], r[2], r[3])):
        chosen[cid] = (status, speedup)
    by_status = dict(Counter(status for status, _ in chosen.values()))
    fast = [s for status, s in chosen.values() if status == Status.OK.value and s is not None and s > 0]
    best = max(fast) if fast else None
    confirmed = confirmed_speedups(run_confirmations(session, run.id))
    if confirmed:
        figures = [c.speedup for c in confirmed.values() if c.speedup is not None]
        best = max(figures) if figures else None
    return RunTotals(
        run_id=run.id,
        evaluated=run.evaluated,
        by_status=by_status,
        best_speedup=best,
        worker_s=run.worker_s,
        cost_usd=run.cost_usd,
        tokens_in=run.tokens_in or 0,
        tokens_out=run.tokens_out or 0,
        queue=queue_counts,
        faults=faults,
    )


def candidate_id_in_run_task(session: Session, run_id: int, digest: str) -> int | None:
    """The id of the candidate with this digest in the task of this run, if it is stored."""
    task_id = select(RunRow.task_id).where(RunRow.id == run_id).scalar_subquery()
    return session.execute(select(C.c.id).where(C.c.digest == digest, C.c.task_id == task_id)).scalar()


def llm_usage(session: Session, run_id: int) -> list[LLMUsage]:
    L = LLMCallRow.__table__
    rows = session.execute(
        select(L.c.role, L.c.outcome, func.count(), func.sum(L.c.tokens_in), func.sum(L.c.tokens_out),
               func.sum(L.c.cost_usd), func.sum(L.c.latency_s))
        .where(L.c.run_id == run_id).group_by(L.c.role, L.c.outcome))
    acc: dict[str, list] = {}
    for role, outcome, n, t_in, t_out, cost, latency in rows:
        a = acc.setdefault(role, [0, {}, 0, 0, 0.0, 0.0])
        a[0] += n
        a[1][outcome] = n
        a[2] += int(t_in or 0)
        a[3] += int(t_out or 0)
        a[4] += float(cost or 0.0)
        a[5] += float(latency or 0.0)
    return [LLMUsage(role, a[0], dict(sorted(a[1].items())), a[2], a[3], a[4], a[5]) for role, a in sorted(acc.items())]


def of_backend(backend: str):  # noqa: ANN201 - a SQL condition
    """Verdicts of one backend. Verdicts recorded before the store kept the backend (NULL) were GPU kernels (Triton
    or CUDA), so they count as those and never as native CPU ones."""
    return E.c.backend == backend if backend not in GPU_BACKENDS else (E.c.backend == backend) | E.c.backend.is_(None)


def archive(session: Session, device: str | None, exclude_run_id: int | None,
            backend: str | None = None) -> list[ArchiveEntry]:
    """Each task's fastest correct evaluation (optionally on one device name, of one backend, not measured by one
    run), fastest by the rule a search names its best with (`evaluator.measure.speedup_noise`): of the evaluations within
    noise of the highest speedup, the earliest candidate's."""
    stmt = select(*EVALUATION_COLUMNS).where(E.c.status == Status.OK.value, E.c.speedup.is_not(None))
    if backend is not None:
        stmt = stmt.where(of_backend(backend))
    if device is not None:
        stmt = stmt.where(E.c.device_name == device)
    if exclude_run_id is not None:
        stmt = stmt.where((E.c.run_id != exclude_run_id) | E.c.run_id.is_(None))
    by_task: dict[int, list[EvaluationRecord]] = {}
    for ev in map(evaluation_from_values, session.execute(stmt.order_by(E.c.id))):
        by_task.setdefault(ev.task_id, []).append(ev)
    best = {tid: speedup_noise.best_within_noise(evs, lambda e: e.speedup, lambda e: e.result,
                                                 lambda e: (e.candidate_id, e.id))
            for tid, evs in by_task.items()}
    chosen = {tid: ev for tid, ev in best.items() if ev is not None}
    if not chosen:
        return []
    candidates = candidates_by_id(session, [ev.candidate_id for ev in chosen.values()])
    tasks = {row.id: task_record(row) for row in session.scalars(select(TaskRow).where(TaskRow.id.in_(list(chosen))))}
    return [ArchiveEntry(tasks[tid], candidates[ev.candidate_id], ev) for tid, ev in sorted(chosen.items())]


def evaluations_of(session: Session, candidate_id: int) -> list[EvaluationRecord]:
    rows = session.execute(select(*EVALUATION_COLUMNS).where(E.c.candidate_id == candidate_id).order_by(E.c.id))
    return [evaluation_from_values(r) for r in rows]


def unverified(session: Session, origin: str) -> list[tuple[TaskRecord, CandidateRecord]]:
    measured = select(E.c.candidate_id)
    of_origin = (C.c.origin == origin) | C.c.origin.startswith(origin + ":", autoescape=True)
    rows = session.execute(select(*CANDIDATE_COLUMNS).where(of_origin, C.c.id.not_in(measured))
                           .order_by(C.c.id)).all()
    found = [candidate_from_values(r) for r in rows]
    tasks = {row.id: task_record(row) for row in session.scalars(
        select(TaskRow).where(TaskRow.id.in_({c.task_id for c in found})))} if found else {}
    return [(tasks[c.task_id], c) for c in found]
