"""`Store`: the one API over the SQL database. Every public method is one transaction and returns records."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from evaluator.candidate import Candidate
from evaluator.result import EvalResult
from evaluator.task import Task
from store import queries, queue, writes
from store.codec import bench_record, candidate_record, device_peaks_record, llm_call_record, run_record, task_record
from store.dialect import insert
from store.engine import display, session_scope
from store.errors import StoreError, UnknownId
from store.records import (
    ArchiveEntry,
    BenchRecord,
    CandidateRecord,
    DevicePeaks,
    EvaluationRecord,
    LLMCallRecord,
    LLMUsage,
    RunRecord,
    RunStatus,
    RunTotals,
    ScoredCandidate,
    TaskRecord,
)
from store.rows import BenchRow, CandidateRow, DevicePeakRow, LLMCallRow, RunRow, TaskRow, utcnow
from store.confirmations import ConfirmationMethods
from store.job_methods import JobMethods

_CHUNK = 1000


class Store(JobMethods, ConfirmationMethods):
    """Tasks, runs, candidates, verdicts, LLM calls; the work queue's methods come from `JobMethods`, the
    re-measurements of a run's best from `ConfirmationMethods`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return display(self._engine.url)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _session(self, write: bool = False):  # noqa: ANN202 - a context manager
        return session_scope(self._engine, write=write)

    def _get(self, s: Session, row_type: type, ident: int, what: str) -> Any:
        row = s.get(row_type, ident)
        if row is None:
            raise UnknownId(self.url, what, ident)
        return row

    # --- tasks ---------------------------------------------------------------------------------------------------
    def add_task(self, task: Task) -> TaskRecord:
        """Record a task; the same source (by digest) always gives back the same record."""
        with self._session(write=True) as s:
            values = {"name": task.name, "source": task.source, "digest": task.digest, "path": task.path,
                      "created_at": utcnow()}
            s.execute(insert(s, TaskRow).values(values).on_conflict_do_nothing(index_elements=["digest"]))
            return task_record(s.scalars(select(TaskRow).where(TaskRow.digest == task.digest)).one())

    def get_task(self, task_id: int) -> TaskRecord:
        with self._session() as s:
            return task_record(self._get(s, TaskRow, task_id, "task"))

    def set_device_peaks(self, device: str, copy_gbps: float, peak_gflops: float, threads: int,
                         method: str | None = None) -> DevicePeaks:
        """Keep a device's measured copy bandwidth and peak FLOP/s, and the method that measured them (a new
        measurement replaces the old one)."""
        with self._session(write=True) as s:
            return device_peaks_record(s.merge(DevicePeakRow(device=device, copy_gbps=copy_gbps,
                                                             peak_gflops=peak_gflops, threads=threads,
                                                             measured_at=utcnow(), method=method)))

    def device_peaks(self, device: str) -> DevicePeaks | None:
        with self._session() as s:
            row = s.get(DevicePeakRow, device)
            return device_peaks_record(row) if row is not None else None

    # --- runs ----------------------------------------------------------------------------------------------------
    def set_task_work(self, task_id: int, flops: float | None, min_bytes: int | None,
                      ops: Sequence[str] | None = None) -> TaskRecord:
        """Record the least work one reference call does (the leaderboard's roofline floor) and its compute ops."""
        with self._session(write=True) as s:
            row = self._get(s, TaskRow, task_id, "task")
            row.flops, row.min_bytes = flops, min_bytes
            if ops is not None:
                row.ops = sorted(ops)
            s.flush()
            return task_record(row)

    def create_run(self, task_id: int, config: Mapping[str, Any], budget: Mapping[str, Any],
                   bench_id: int | None = None) -> RunRecord:
        with self._session(write=True) as s:
            self._get(s, TaskRow, task_id, "task")
            if bench_id is not None:
                self._get(s, BenchRow, bench_id, "bench")
            now = utcnow()
            row = RunRow(task_id=task_id, bench_id=bench_id, config=dict(config), budget=dict(budget),
                         status=RunStatus.RUNNING.value, evaluated=0, worker_s=0.0, cost_usd=0.0, created_at=now,
                         updated_at=now)
            s.add(row)
            s.flush()
            return run_record(row)

    # --- benches ---------------------------------------------------------------------------------------------------
    def create_bench(self, suite: str, agent: str, config: Mapping[str, Any]) -> BenchRecord:
        with self._session(write=True) as s:
            now = utcnow()
            row = BenchRow(suite=suite, agent=agent, config=dict(config), status=RunStatus.RUNNING.value,
                           created_at=now, updated_at=now)
            s.add(row)
            s.flush()
            return bench_record(row)

    def get_bench(self, bench_id: int) -> BenchRecord:
        with self._session() as s:
            return bench_record(self._get(s, BenchRow, bench_id, "bench"))

    def list_benches(self, suite: str | None = None) -> list[BenchRecord]:
        """Benches oldest first, optionally of one suite."""
        with self._session() as s:
            stmt = select(BenchRow).order_by(BenchRow.id)
            if suite is not None:
                stmt = stmt.where(BenchRow.suite == suite)
            return [bench_record(r) for r in s.scalars(stmt)]

    def set_bench_status(self, bench_id: int, status: RunStatus | str) -> BenchRecord:
        with self._session(write=True) as s:
            row = self._get(s, BenchRow, bench_id, "bench")
            row.status, row.updated_at = RunStatus(status).value, utcnow()
            s.flush()
            return bench_record(row)

    def bench_runs(self, bench_id: int) -> list[RunRecord]:
        """The bench's runs, one per task it has started, oldest first."""
        with self._session() as s:
            self._get(s, BenchRow, bench_id, "bench")
            return [run_record(r) for r in s.scalars(select(RunRow).where(RunRow.bench_id == bench_id)
                                                     .order_by(RunRow.id))]

    def get_run(self, run_id: int) -> RunRecord:
        with self._session() as s:
            return run_record(self._get(s, RunRow, run_id, "run"))

    def list_runs(self, task_id: int | None = None) -> list[RunRecord]:
        with self._session() as s:
            query = select(RunRow).order_by(RunRow.id)
            if task_id is not None:
                query = query.where(RunRow.task_id == task_id)
            return [run_record(r) for r in s.scalars(query)]

    def set_run_status(self, run_id: int, status: RunStatus | str) -> RunRecord:
        try:
            status = RunStatus(status)
        except ValueError:
            choices = ", ".join(s.value for s in RunStatus)
            raise StoreError(f"{status!r} is not a run status; use one of {choices}.") from None
        with self._session(write=True) as s:
            row = self._get(s, RunRow, run_id, "run")
            row.status, row.updated_at = status.value, utcnow()
            s.flush()
            return run_record(row)

    def run_totals(self, run_id: int) -> RunTotals:
        with self._session() as s:
            return queries.run_totals(s, self._get(s, RunRow, run_id, "run"), queue.counts(s, run_id),
                                      queue.faults(s, run_id))

    # --- candidates ----------------------------------------------------------------------------------------------
    def add_candidate(
        self, run_id: int | None, task_id: int, candidate: Candidate, generation: int = 0, island: int = 0
    ) -> tuple[CandidateRecord, bool]:
        """Record a candidate unless the task already has one with that source; True when it is new."""
        [(record, new)] = self.add_candidates(run_id, task_id, [candidate], generation, island)
        return record, new

    def add_candidates(
        self, run_id: int | None, task_id: int, candidates: Sequence[Candidate], generation: int = 0, island: int = 0
    ) -> list[tuple[CandidateRecord, bool]]:
        """Many `add_candidate`s in one transaction; safe against other processes adding the same sources."""
        out: list[tuple[CandidateRecord, bool]] = []
        with self._session(write=True) as s:
            for start in range(0, len(candidates), _CHUNK):
                chunk = candidates[start : start + _CHUNK]
                out += writes.insert_candidates(s, run_id, task_id, chunk, generation, island)
        return out

    def get_candidate(self, candidate_id: int) -> CandidateRecord:
        with self._session() as s:
            return candidate_record(self._get(s, CandidateRow, candidate_id, "candidate"))

    def find_candidate(self, task_id: int, digest: str) -> CandidateRecord | None:
        with self._session() as s:
            row = s.scalars(select(CandidateRow).where(CandidateRow.task_id == task_id,
                                                        CandidateRow.digest == digest)).one_or_none()
            return None if row is None else candidate_record(row)

    # --- the run's queue -----------------------------------------------------------------------------------------
    def enqueue(self, run_id: int, candidate_ids: int | Sequence[int]) -> int:
        """Queue candidates for evaluation in a run; returns how many were newly queued."""
        ids = [candidate_ids] if isinstance(candidate_ids, int) else list(candidate_ids)
        with self._session(write=True) as s:
            return queue.enqueue(s, run_id, ids)

    def claim_pending(self, run_id: int, limit: int) -> list[CandidateRecord]:
        """Take up to `limit` queued candidates (oldest first) and mark them running; no two callers get the same."""
        with self._session(write=True) as s:
            ids = queue.claim(s, run_id, limit)
            found = queries.candidates_by_id(s, ids)
            return [found[i] for i in ids]

    def requeue_in_flight(self, run_id: int) -> int:
        """On resume: evaluations that were running when the run died go back to the queue; returns how many."""
        with self._session(write=True) as s:
            return queue.requeue_in_flight(s, run_id)

    def requeue_after_fault(self, run_id: int, candidate_id: int, fault: str) -> int:
        """An evaluation lost to the infrastructure (`Status.INFRA_FAILED`, not a verdict): its queue item goes back
        to the queue with the fault noted; returns how many faults that item has met so far."""
        with self._session(write=True) as s:
            return queue.requeue_after_fault(s, run_id, candidate_id, fault)

    # --- results -------------------------------------------------------------------------------------------------
    def add_result(self, candidate_id: int, run_id: int | None, result: EvalResult, worker_s: float = 0.0
                   ) -> EvaluationRecord:
        """Record a verdict and close the candidate's queue item, in one transaction.

        Idempotent per candidate and device: a second verdict for the same pair returns the first unchanged.
        With a run: the candidate's queue item in that run is done (created done if it was never queued), so it
        counts once in the run's `evaluated` however many times it is recorded; `worker_s` (seconds a worker slot was
        held for this evaluation, submit to verdict) is added to the run's total whether or not the verdict is new.
        """
        [record] = self.add_results(run_id, [(candidate_id, result)], worker_s)
        return record

    def add_results(self, run_id: int | None, items: Sequence[tuple[int, EvalResult]], worker_s: float = 0.0
                    ) -> list[EvaluationRecord]:
        """Many `add_result`s in one transaction."""
        out: list[EvaluationRecord] = []
        with self._session(write=True) as s:
            for start in range(0, len(items), _CHUNK):
                out += writes.insert_results(s, self.url, run_id, items[start : start + _CHUNK], worker_s)
        return out

    def add_wall_time(self, run_id: int, seconds: float) -> None:
        """Add the run loop's wall time since its last report (cost per accepted kernel counts it)."""
        with self._session(write=True) as s:
            s.execute(update(RunRow).where(RunRow.id == run_id).values(wall_s=RunRow.wall_s + max(0.0, seconds)))

    def history(self, run_id: int, device: str | None = None) -> list[ScoredCandidate]:
        """The run's candidates in creation order, each with its verdict (None while unevaluated)."""
        with self._session() as s:
            self._get(s, RunRow, run_id, "run")
            return queries.history(s, run_id, device)

    def unverified(self, origin: str = "import") -> list[tuple[TaskRecord, CandidateRecord]]:
        """Candidates of this origin (`import` and `import:cpp` for `import`) that no evaluator of this store has
        measured yet, with their tasks."""
        with self._session() as s:
            return queries.unverified(s, origin)

    def evaluations_of(self, candidate_id: int) -> list[EvaluationRecord]:
        """A candidate's verdicts, one per device it was measured on."""
        with self._session() as s:
            return queries.evaluations_of(s, candidate_id)

    def archive(self, device: str | None = None, exclude_run_id: int | None = None,
                backend: str | None = None) -> list[ArchiveEntry]:
        """Every task's fastest correct kernel in the store, on one device name if given, of one backend if given
        (a native CPU run is not seeded with Triton kernels, nor the reverse), not counting one run's own
        measurements (a run drawing on the archive should not find itself)."""
        with self._session() as s:
            return queries.archive(s, device, exclude_run_id, backend)

    def top_k(self, task_id: int, k: int, device: str | None = None) -> list[ScoredCandidate]:
        """The task's k fastest correct candidates across runs, by speedup, optionally on one device name."""
        with self._session() as s:
            return queries.top_k(s, task_id, k, device)

    # --- LLM calls -----------------------------------------------------------------------------------------------
    def record_llm_call(
        self, run_id: int | None, role: str, model: str, prompt: str, reply: str, *, tokens_in: int = 0,
        tokens_out: int = 0, latency_s: float = 0.0, cost_usd: float = 0.0, candidate_id: int | None = None,
        candidate_digest: str | None = None, outcome: str = "ok", problem: str = "", attempts: int = 1,
    ) -> LLMCallRecord:
        """Keep a prompt and its reply; its cost and tokens are added to the run's totals in the same transaction.

        `candidate_digest` names the candidate the call produced or judged; when that candidate is already stored
        in the run's task the call is linked to it now, otherwise when it is added (`add_candidates`).
        """
        with self._session(write=True) as s:
            if candidate_id is None and candidate_digest is not None and run_id is not None:
                candidate_id = queries.candidate_id_in_run_task(s, run_id, candidate_digest)
            row = LLMCallRow(run_id=run_id, candidate_id=candidate_id, candidate_digest=candidate_digest, role=role,
                             model=model, prompt=prompt, reply=reply, tokens_in=tokens_in, tokens_out=tokens_out,
                             latency_s=latency_s, cost_usd=cost_usd, outcome=outcome, problem=problem,
                             attempts=attempts, created_at=utcnow())
            s.add(row)
            if run_id is not None:
                s.execute(update(RunRow).where(RunRow.id == run_id).values(
                    cost_usd=RunRow.cost_usd + cost_usd, tokens_in=RunRow.tokens_in + tokens_in,
                    tokens_out=RunRow.tokens_out + tokens_out, updated_at=utcnow()))
            s.flush()
            return llm_call_record(row)

    def llm_calls(self, run_id: int, candidate_id: int | None = None) -> list[LLMCallRecord]:
        """The run's LLM calls in the order they were made (only those about one candidate, if given)."""
        with self._session() as s:
            self._get(s, RunRow, run_id, "run")
            stmt = select(LLMCallRow).where(LLMCallRow.run_id == run_id)
            if candidate_id is not None:
                stmt = stmt.where(LLMCallRow.candidate_id == candidate_id)
            return [llm_call_record(r) for r in s.scalars(stmt.order_by(LLMCallRow.id))]

    def llm_usage(self, run_id: int) -> list[LLMUsage]:
        """The run's LLM calls summed per role, roles in alphabetical order."""
        with self._session() as s:
            self._get(s, RunRow, run_id, "run")
            return queries.llm_usage(s, run_id)
