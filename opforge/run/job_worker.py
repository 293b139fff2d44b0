"""A worker of the job queue: claim a job, drive its run with the search, keep the lease alive, finish the job.

    worker = Worker(store, runner, WorkerSettings(worker_id="gpu3:4711"))
    worker.run()        # claim -> Search.run -> finish, until --max-jobs, a drained queue (--drain) or a stop

A job is a run (see `opforge submit`), so driving it is `opforge optimize --resume`: the search rebuilds the
population from the store and goes on to the run's budget. A background thread renews the lease every few seconds
(`Lease`); the search asks it at every turn whether to stop:

- the job was cancelled: the heartbeat sees the state, the search stops cleanly (evaluations in flight are
  recorded), the run is marked interrupted;
- the lease was lost (another worker took the job over after this one stalled), or could not be renewed for most
  of its length (the database unreachable): the worker stops driving before anyone else may start, and does not
  finish the job — only the holder can (store/jobs.py);
- the worker is asked to stop (SIGTERM, `request_stop`): the search stops cleanly and the job goes back to the
  queue, to be resumed by the next claim.

Ctrl-C (KeyboardInterrupt) stops at once: the search marks the run interrupted and the job goes back to the queue.
A worker killed outright leaves its job running until its lease expires; then another worker takes it over.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from evaluator import Task
from evaluator.driver.pool import Runner
from opforge.run.config import stored_backend
from opforge.run.launch import search_for_run
from opforge.run.plan import backend_note
from opforge.run.progress import last_text, progress_line
from opforge.run.search import Progress, RunOutcome
from opforge.run.capability import machine_has
from opforge.run.plan import cuda_present
from store import JobRecord, JobState, RunRecord, RunStatus, Store, StoreError

DEFAULT_LEASE_S = 30.0
DEFAULT_HEARTBEAT_S = 2.0
DEFAULT_POLL_S = 2.0
DEFAULT_MAX_ATTEMPTS = 3


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    worker_id: str
    lease_s: float = DEFAULT_LEASE_S          # how long a claim or heartbeat holds the job
    heartbeat_s: float = DEFAULT_HEARTBEAT_S  # how often the lease is renewed (and a cancel noticed)
    poll_s: float = DEFAULT_POLL_S            # how often an idle worker looks for a job
    max_jobs: int | None = None               # jobs to take to an end (any outcome) before exiting
    drain: bool = False                       # exit once no job is queued or running anywhere
    max_attempts: int = DEFAULT_MAX_ATTEMPTS  # take-overs of one job before it is marked failed
    llm_base_url: str | None = None           # overrides the runs' configured endpoint
    has: tuple[str, ...] = ()                 # what the machine offers jobs (cpu, gpu); () = detect (capability.py)

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_s < self.lease_s:
            raise ValueError(f"the heartbeat interval ({self.heartbeat_s:g} s) must be shorter than the lease "
                             f"({self.lease_s:g} s)")

    @property
    def fence_s(self) -> float:
        """Without a renewal for this long the worker stops driving: its lease may run out before it can tell."""
        return max(self.lease_s - 2 * self.heartbeat_s, self.lease_s / 2)


class Lease:
    """Keeps one job's lease alive from a background thread; `stop_reason()` says when the search must stop."""

    def __init__(self, store: Store, job: JobRecord, settings: WorkerSettings, renewed_at: float,
                 log: Callable[[str], None]) -> None:
        self.store, self.job_id, self.settings, self.log = store, job.id, settings, log
        self.cancelled = self.lost = False
        self._renewed_at = renewed_at  # monotonic time the last successful renewal was *sent*
        self._reason: str | None = None
        self._closed = threading.Event()
        self._failing = False
        self._thread = threading.Thread(target=self._loop, name=f"opforge-lease-{job.id}", daemon=True)

    def start(self) -> "Lease":
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.settings.lease_s)

    def stop_reason(self) -> str | None:
        if self._reason is None and time.monotonic() - self._renewed_at > self.settings.fence_s:
            self.lost = True
            self._reason = (f"the lease of job {self.job_id} could not be renewed for {self.settings.fence_s:g} s; "
                            "stopping before another worker may take it over")
        return self._reason

    def _loop(self) -> None:
        while not self._closed.wait(self.settings.heartbeat_s) and self._reason is None:
            self.beat()

    def beat(self) -> None:
        me, sent = self.settings.worker_id, time.monotonic()
        try:
            job = self.store.heartbeat_job(self.job_id, me, self.settings.lease_s)
        except Exception as exc:  # noqa: BLE001 - the database away for a moment: try again, fence if it lasts
            if not self._failing:
                self.log(f"job {self.job_id}: cannot renew the lease ({_sentence(exc)}); retrying")
            self._failing = True
            return
        self._failing = False
        if job.held_by(me):
            self._renewed_at = sent
        elif job.state is JobState.CANCELLED and job.worker == me:
            self.cancelled, self._reason = True, f"job {self.job_id} was cancelled"
        else:
            self.lost = True
            holder = f"worker {job.worker}" if job.state is JobState.RUNNING else f"state {job.state.value}"
            self._reason = f"job {self.job_id} is no longer this worker's ({holder})"


class Worker:
    def __init__(self, store: Store, runner: Runner, settings: WorkerSettings, stream: TextIO | None = None) -> None:
        self.store, self.runner, self.settings = store, runner, settings
        self.stream = stream or sys.stderr
        self._stopping = threading.Event()
        self._stop_reason = ""

    def log(self, line: str) -> None:
        self.stream.write(f"opforge worker {self.settings.worker_id}: {line}\n")
        self.stream.flush()

    def request_stop(self, why: str) -> None:
        """Stop after the current job's search has stopped cleanly; the job goes back to the queue."""
        self._stop_reason = why
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self) -> int:
        """Claim and drive jobs until --max-jobs, a drained queue or a stop; returns how many jobs were handled."""
        s = self.settings
        has = s.has or machine_has(cuda_present())
        runnable = {"any", *has}
        self.log(f"started on {self.store.url} (lease {s.lease_s:g} s, heartbeat {s.heartbeat_s:g} s, "
                 f"{self.runner.capacity} evaluations at once; claims {', '.join(has)} jobs)")
        handled = 0
        while not self.stopping and (s.max_jobs is None or handled < s.max_jobs):
            sent = time.monotonic()
            try:
                job = self.store.claim_job(s.worker_id, s.lease_s, s.max_attempts, has)
                idle = job is None and s.drain and not any(
                    j.requires in runnable for j in self.store.list_jobs([JobState.QUEUED, JobState.RUNNING]))
            except StoreError as exc:
                self.log(f"cannot claim a job: {exc}")
                job, idle = None, False
            if idle:
                self.log("no job is queued or running: the queue is drained")
                break
            if job is None:
                self._stopping.wait(s.poll_s)
                continue
            if self.run_job(job, sent):
                handled += 1
        if self.stopping:
            self.log(f"stopped: {self._stop_reason}")
        self.log(f"exiting after {handled} job{'s' if handled != 1 else ''}")
        return handled

    def run_job(self, job: JobRecord, claimed_at: float) -> bool:
        """Drive a claimed job's run and end the job; False when the job went back to the queue (worker stopping)."""
        lease = Lease(self.store, job, self.settings, claimed_at, self.log).start()
        try:
            run = self.store.get_run(job.run_id)
            task = self.store.get_task(run.task_id).task
            again = ", resuming its run" if job.attempts > 1 else ""
            self.log(f"job {job.id}: claimed (attempt {job.attempts}{again}): run {run.id} on {task.name}, "
                     f"{run.evaluated}/{run.budget.get('max_candidates')} evaluated")
            if note := backend_note(stored_backend(run.config)):
                self.log(f"job {job.id}: note: {note}")
            outcome = self._search(job, run, task, lease)
        except KeyboardInterrupt:
            lease.close()
            self._release(job)
            raise
        except Exception as exc:  # noqa: BLE001 - one job's failure is data: record it and go on to the next
            lease.close()
            self._end(job, lease, JobState.FAILED, _sentence(exc))
            return True
        finally:
            lease.close()
        if lease.cancelled:
            self.log(f"job {job.id}: cancelled; stopped after {outcome.done} evaluations (run {outcome.run_id} "
                     f"is {outcome.status.value})")
        elif lease.lost:
            self.log(f"job {job.id}: stopped driving run {outcome.run_id}: {lease.stop_reason()}")
        elif self.stopping:
            return not self._release(job)
        elif outcome.status is RunStatus.DONE:
            self._end(job, lease, JobState.DONE, "", f"{outcome.done} evaluated, {outcome.stop_reason}")
        else:
            self._end(job, lease, JobState.FAILED, outcome.stop_reason)
        return True

    def _search(self, job: JobRecord, run: RunRecord, task: Task, lease: Lease) -> RunOutcome:
        def should_stop() -> str | None:
            return lease.stop_reason() or (self._stop_reason if self.stopping else None)

        def on_progress(p: Progress) -> None:
            if p.event in ("result", "stop"):
                last = last_text(p)
                self.log(f"job {job.id}: {progress_line(p)}" + (f" | last {last}" if last else ""))

        return search_for_run(self.store, run, task, self.runner, llm_base_url=self.settings.llm_base_url,
                              on_progress=on_progress, should_stop=should_stop).run()

    def _end(self, job: JobRecord, lease: Lease, state: JobState, error: str, detail: str = "") -> None:
        try:
            final = self.store.finish_job(job.id, self.settings.worker_id, state, error)
        except StoreError as exc:
            self.log(f"job {job.id}: could not be marked {state.value} ({exc}); it will be taken over")
            return
        if final.state is state and final.worker == self.settings.worker_id:
            self.log(f"job {job.id}: {state.value}" + (f": {detail or error}" if detail or error else ""))
        else:  # cancelled or taken over meanwhile: the job is not ours to end
            self.log(f"job {job.id}: not marked {state.value}, it is {final.state.value} "
                     f"(worker {final.worker}) now")

    def _release(self, job: JobRecord) -> bool:
        """Give the job back to the queue; True when it was still held."""
        try:
            final = self.store.release_job(job.id, self.settings.worker_id)
        except StoreError as exc:
            self.log(f"job {job.id}: could not be given back ({exc}); it is taken over when its lease expires")
            return False
        held = final.state is JobState.QUEUED
        self.log(f"job {job.id}: " + ("back in the queue" if held else f"left as {final.state.value}"))
        return held


def _sentence(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else exc.__class__.__name__
