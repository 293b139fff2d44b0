"""The confirmation records of `Store`: a finished run's fastest candidates re-measured before the run reports its
best (opforge/run/confirm.py decides which and how often). A mixin, as `JobMethods`, so `store/sql_store.py` keeps
one role per file.

A re-measurement is a record of its own, never a second verdict: the store keeps one verdict per candidate and
device, and the search's figure stays as it was measured. What a run reports is derived (`confirmed_speedups`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ContextManager

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from evaluator.result import EvalResult, Status
from store.records import ConfirmationRecord, ConfirmedSpeedup
from store.rows import CandidateRow, ConfirmationRow, RunRow, utcnow

F = ConfirmationRow.__table__
COLUMNS = (F.c.id, F.c.run_id, F.c.candidate_id, F.c.device_name, F.c.status, F.c.reason, F.c.reference_median_ms,
           F.c.candidate_median_ms, F.c.speedup, F.c.created_at)


def confirmation_from_values(values: Sequence[Any]) -> ConfirmationRecord:
    """From the values of COLUMNS, in order."""
    cid, run_id, candidate_id, device, status, reason, ref_ms, cand_ms, speedup, created_at = values
    return ConfirmationRecord(cid, run_id, candidate_id, device, Status(status), reason, ref_ms, cand_ms, speedup,
                              created_at)


def run_confirmations(session: Session, run_id: int) -> list[ConfirmationRecord]:
    rows = session.execute(select(*COLUMNS).where(F.c.run_id == run_id).order_by(F.c.id)).all()
    return [confirmation_from_values(row) for row in rows]


def confirmed_speedups(records: Iterable[ConfirmationRecord]) -> dict[int, ConfirmedSpeedup]:
    """Per candidate re-measured, its confirmed figure (`ConfirmedSpeedup`), from its records in order."""
    speedups: dict[int, list[float]] = {}
    failures: dict[int, list[str]] = {}
    references: dict[int, list[float]] = {}
    for rec in records:
        speedups.setdefault(rec.candidate_id, [])
        failures.setdefault(rec.candidate_id, [])
        references.setdefault(rec.candidate_id, [])
        if rec.status == Status.OK and rec.speedup is not None and rec.speedup > 0:
            speedups[rec.candidate_id].append(rec.speedup)
            if rec.reference_ms is not None and rec.reference_ms > 0:
                references[rec.candidate_id].append(rec.reference_ms)
        else:
            failures[rec.candidate_id].append(f"{rec.status.value}: {rec.reason}")
    return {cid: ConfirmedSpeedup(cid, tuple(speedups[cid]), tuple(failures[cid]), tuple(references[cid]))
            for cid in speedups}


class ConfirmationMethods:
    """Mixed into `Store`, whose session and lookups it uses."""

    if TYPE_CHECKING:
        @property
        def url(self) -> str: ...

        def _session(self, write: bool = False) -> ContextManager[Session]: ...

        def _get(self, s: Session, row_type: type, ident: int, what: str) -> Any: ...

    def add_confirmation(self, run_id: int, candidate_id: int, result: EvalResult, worker_s: float = 0.0
                         ) -> ConfirmationRecord:
        """Record one re-measurement of a run's candidate (any verdict: a failure is kept too); `worker_s`, the
        seconds a worker slot was held for it, is added to the run's worker time."""
        if not result.is_verdict:
            raise ValueError(f"An infrastructure failure is not a re-measurement and is not stored as one "
                             f"({result.reason}); measure the candidate again.")
        ref, cand = result.reference_ms, result.candidate_ms
        with self._session(write=True) as s:
            self._get(s, RunRow, run_id, "run")
            self._get(s, CandidateRow, candidate_id, "candidate")
            row = ConfirmationRow(
                run_id=run_id, candidate_id=candidate_id, device_name=result.device.name, status=result.status.value,
                reason=result.reason, reference_median_ms=None if ref is None else ref.median_ms,
                candidate_median_ms=None if cand is None else cand.median_ms,
                speedup=result.speedup if result.status == Status.OK else None, created_at=utcnow())
            s.add(row)
            if worker_s > 0:
                s.execute(update(RunRow).where(RunRow.id == run_id).values(
                    worker_s=RunRow.worker_s + worker_s, updated_at=utcnow()))
            s.flush()
            return confirmation_from_values(s.execute(select(*COLUMNS).where(F.c.id == row.id)).one())

    def confirmations(self, run_id: int) -> list[ConfirmationRecord]:
        """The run's re-measurements, oldest first."""
        with self._session() as s:
            self._get(s, RunRow, run_id, "run")
            return run_confirmations(s, run_id)

    def confirmed(self, run_id: int) -> dict[int, ConfirmedSpeedup]:
        """Per candidate the run re-measured, the figure it reports (see `confirmed_speedups`)."""
        return confirmed_speedups(self.confirmations(run_id))
