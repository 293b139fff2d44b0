"""The work queue's methods of `Store` (`opforge worker`): submit, claim under a lease, heartbeat, finish, release,
cancel. A mixin so that `store/sql_store.py` keeps one role per file; the SQL and the state diagram are in
store/jobs.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ContextManager, Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from store import jobs as job_queue
from store.codec import job_record
from store.errors import StoreError, UnknownId
from store.records import JOB_REQUIREMENTS, JobRecord, JobState
from store.rows import JobRow, RunRow


class JobMethods:
    """Mixed into `Store`, whose session and lookups it uses."""

    if TYPE_CHECKING:
        @property
        def url(self) -> str: ...

        def _session(self, write: bool = False) -> ContextManager[Session]: ...

        def _get(self, s: Session, row_type: type, ident: int, what: str) -> Any: ...

    def submit_job(self, run_id: int, config: Mapping[str, Any] | None = None, priority: int = 0,
                   requires: str = "any") -> JobRecord:
        """Queue a job that drives the run (created beforehand, e.g. by `opforge.run.start.start_run`); `requires`
        is what a worker's machine must have to claim it (`any`, `cpu` or `gpu`)."""
        if requires not in JOB_REQUIREMENTS:
            raise StoreError(f"A job requires one of {', '.join(JOB_REQUIREMENTS)}, not {requires!r}.")
        with self._session(write=True) as s:
            run = self._get(s, RunRow, run_id, "run")
            taken = s.execute(select(JobRow.id).where(JobRow.run_id == run_id)).scalar()
            if taken is not None:
                raise StoreError(f"Run {run_id} in {self.url} already belongs to job {taken}; submit a new run.")
            return job_record(job_queue.create(s, run.task_id, run_id, config or {}, priority, requires))

    def get_job(self, job_id: int) -> JobRecord:
        with self._session() as s:
            return job_record(self._get(s, JobRow, job_id, "job"))

    def list_jobs(self, states: Sequence[JobState | str] | None = None) -> list[JobRecord]:
        """Jobs oldest first, optionally only those in the given states."""
        with self._session() as s:
            stmt = select(JobRow).order_by(JobRow.id)
            if states is not None:
                stmt = stmt.where(JobRow.state.in_([JobState(x).value for x in states]))
            return [job_record(r) for r in s.scalars(stmt)]

    def claim_job(self, worker: str, lease_s: float, max_attempts: int = 3,
                  has: Sequence[str] = ("cpu", "gpu")) -> JobRecord | None:
        """Atomically take the next job (highest priority, then oldest; expired leases included) for `worker`, among
        those its machine can run (`has`: `cpu`, `gpu`), holding it for `lease_s` seconds; None when there is
        nothing to do. No two callers ever get one job."""
        _check_lease(lease_s)
        with self._session(write=True) as s:
            job_id = job_queue.claim(s, worker, lease_s, max_attempts, tuple(has))
            row = None if job_id is None else job_queue.row(s, job_id)
            return None if row is None else job_record(row)

    def heartbeat_job(self, job_id: int, worker: str, lease_s: float) -> JobRecord:
        """Renew `worker`'s lease for `lease_s` seconds from now, if it still holds the job; returns the job as it
        is, so the worker sees a cancel (state cancelled) or a lost lease (`not job.held_by(worker)`)."""
        _check_lease(lease_s)
        with self._session(write=True) as s:
            job_queue.heartbeat(s, job_id, worker, lease_s)
            return self._job_row(s, job_id)

    def finish_job(self, job_id: int, worker: str, state: JobState | str, error: str = "") -> JobRecord:
        """Mark the job done or failed, only if `worker` still holds it; returns the job as it is."""
        state = JobState(state)
        if state not in (JobState.DONE, JobState.FAILED):
            raise StoreError(f"A worker finishes a job as done or failed, not {state.value}.")
        with self._session(write=True) as s:
            job_queue.finish(s, job_id, worker, state, error)
            return self._job_row(s, job_id)

    def release_job(self, job_id: int, worker: str) -> JobRecord:
        """Give a held job back to the queue (the worker is stopping); returns the job as it is."""
        with self._session(write=True) as s:
            job_queue.release(s, job_id, worker)
            return self._job_row(s, job_id)

    def cancel_job(self, job_id: int) -> JobRecord:
        """Cancel a queued or running job (a finished one is left as it is); returns the job as it is."""
        with self._session(write=True) as s:
            self._get(s, JobRow, job_id, "job")
            job_queue.cancel(s, job_id)
            return self._job_row(s, job_id)

    def _job_row(self, s: Session, job_id: int) -> JobRecord:
        found = job_queue.row(s, job_id)
        if found is None:
            raise UnknownId(self.url, "job", job_id)
        return job_record(found)


def _check_lease(lease_s: float) -> None:
    if not lease_s > 0:
        raise StoreError(f"A job's lease must last a positive number of seconds, not {lease_s}.")
