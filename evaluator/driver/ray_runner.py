"""`RayRunner`: evaluations spread over Ray actors (one per GPU, or a few CPU actors), replacing actors that die and
recycling old ones; the Ray side of `pool.py`'s runners.

CUDA builds (`build/stage.py`): a candidate that uses `cpp_extension` is built in a Ray CPU task (`num_cpus=1`, no
GPU) as soon as it is submitted, so the builds of several candidates run in parallel and an actor only loads the
cached result.

Faults are not verdicts (see `pool.py`): an actor, node or runner that went away is retried on a fresh actor and,
when that keeps failing, resolved `Status.INFRA_FAILED`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from evaluator.build.cache import cache_root
from evaluator.build.stage import build_mode, needs_build, prebuild
from evaluator.candidate import Candidate
from evaluator.config import EvalConfig
from evaluator.driver.evaluate import LocalEvaluator
from evaluator.driver.pool import (ATTEMPTS_PER_EVALUATION, BUILD_WAIT_S, DEFAULT_CPU_WORKERS, DEFAULT_RECYCLE_AFTER,
                                   evaluate_safely)
from evaluator.driver.ray_cluster import build_cpus, connect, plan_actors
from evaluator.result import EvalResult, Status
from evaluator.task import Task, TaskError
from evaluator.worker.heap import keep_freed_memory


class EvaluatorActor:
    """The body of a Ray actor: one `LocalEvaluator` (its zygotes stay warm between evaluations)."""

    def __init__(self, sandbox: str = "auto", build_cache: str | None = None) -> None:
        keep_freed_memory()  # a process of its own, driving evaluations: its copies of the workers' outputs (heap.py)
        self._evaluator = LocalEvaluator(sandbox, build_cache)

    def evaluate(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> EvalResult:
        return evaluate_safely(self._evaluator, task, candidate, cfg)

    def pid(self) -> int:
        return os.getpid()

    def placement(self) -> dict[str, Any]:
        """Where Ray put this actor: its process, the GPU ids Ray gave it and the CUDA_VISIBLE_DEVICES its
        evaluations (and their zygotes) inherit."""
        import ray

        return {"pid": os.getpid(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def close(self) -> None:
        self._evaluator.close()


def build_task(task: Task, candidate: Candidate, cfg: EvalConfig, mode: str,
               build_cache: str | None) -> list[dict[str, Any]]:
    """The body of a Ray CPU task: the candidate's CUDA builds, into the cache (see `stage.prebuild`)."""
    return prebuild(task, candidate, cfg, mode, build_cache)


@dataclass
class _Job:
    task: Task
    candidate: Candidate
    cfg: EvalConfig
    future: Future[EvalResult]
    attempts: int = 0
    build_ref: Any = None        # the ObjectRef of its build task, until that finishes
    build_deadline: float = 0.0
    build_since: float = 0.0


@dataclass
class _Slot:
    actor: Any = None            # a Ray actor handle, created when a job needs it
    evaluations: int = 0
    job: _Job | None = None
    ref: Any = None              # the ObjectRef of the job's result
    ready_ref: Any = None        # the actor's first call (`pid`), until it answers: Ray has placed the actor
    actor_since: float = 0.0


@dataclass(frozen=True, slots=True)
class RayStats:
    actors_started: int
    actors_died: int
    actors_recycled: int
    retried: int
    builds: int = 0              # build tasks started


class RayRunner:
    """Evaluations on Ray: one actor per GPU (`num_gpus=1`) where the cluster has GPUs, otherwise `workers` CPU actors
    (fewer on a joined cluster too small to keep a CPU for builds: `ray_cluster.plan_actors`).

    `address` (or $RAY_ADDRESS) joins an existing cluster, as does a cluster already running on this machine; without
    either a small local Ray is started, with `BUILD_CPUS` CPUs beyond the actors' for build tasks (see
    `ray_cluster.py`, which also says what token authentication needs). `close` disconnects (and stops a Ray it
    started). A candidate that uses `cpp_extension` is built by a Ray CPU task first (`build_cache`: the cache
    folder, see `cache.cache_root`); it waits for that task before it is handed to an actor. An actor that dies
    (or whose node does) is replaced and its evaluation retried on the fresh actor, wherever Ray places it,
    `ATTEMPTS_PER_EVALUATION` tries in all, then resolves `infra_failed` (not a verdict); each retry is announced in
    `notices`. Actors are replaced after `recycle_after` evaluations.
    """

    def __init__(self, workers: int = DEFAULT_CPU_WORKERS, address: str | None = None, sandbox: str = "auto",
                 recycle_after: int = DEFAULT_RECYCLE_AFTER, build_cache: str | None = None) -> None:
        import ray

        if workers < 1:
            raise ValueError(f"RayRunner needs at least one worker, not {workers}.")
        if recycle_after < 1:
            raise ValueError(f"RayRunner: recycle_after must be at least 1, not {recycle_after}.")
        self._ray = ray
        self._owns_ray = False
        owned = False
        self.where = "Ray (initialised by the caller)"
        if not ray.is_initialized():
            joined = connect(ray, workers, address)
            self._owns_ray, owned, self.where = True, joined.owned, joined.where
        self.plan = plan_actors(ray.cluster_resources(), workers, owned)
        options: dict[str, Any] = {"num_cpus": self.plan.actor_cpus, "max_restarts": 0, "max_task_retries": 0}
        if self.plan.actor_gpus:  # one actor per GPU; its CPU work is the evaluator's own processes
            options.update(num_gpus=self.plan.actor_gpus)
        self._actor_class = ray.remote(**options)(EvaluatorActor)
        # `build_cache` travels as given: each process resolves it (None: $OPFORGE_CUDA_BUILD_CACHE or its default).
        self._build_cache = build_cache
        self._builds_on = cache_root(build_cache) is not None
        self._build_class = ray.remote(num_cpus=1, num_gpus=0, max_retries=0)(build_task)
        self._sandbox = sandbox
        self._recycle_after = recycle_after
        self._slots = [_Slot() for _ in range(self.plan.actors)]
        self.uses_gpus = bool(self.plan.actor_gpus)
        self._pending: deque[_Job] = deque()
        self._notices: list[str] = [self.plan.note] if self.plan.note else []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._started = self._died = self._recycled = self._retried = self._builds = 0
        self._thread = threading.Thread(target=self._dispatch, name="opforge-ray-dispatch", daemon=True)
        self._thread.start()

    # -- the Runner protocol ----------------------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return len(self._slots)

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        future: Future[EvalResult] = Future()
        job = _Job(task, candidate, cfg, future)
        if self._builds_on and needs_build(candidate.source):
            mode = build_mode("cuda" if self.uses_gpus and cfg.device != "cpu" else "cpu")
            cpus = build_cpus(self._ray.cluster_resources(), self.plan)
            job.build_ref = self._build_class.options(num_cpus=cpus).remote(task, candidate, cfg, mode,
                                                                           self._build_cache)
            job.build_deadline = time.monotonic() + BUILD_WAIT_S
            job.build_since = time.monotonic()
        with self._lock:
            if self._closed:
                raise RuntimeError("RayRunner.submit after close")
            self._builds += job.build_ref is not None
            self._pending.append(job)
        self._wake.set()
        return future

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            jobs = list(self._pending) + [s.job for s in self._slots if s.job is not None]
            self._pending.clear()
        for job in jobs:
            if job.build_ref is not None:
                try:
                    self._ray.cancel(job.build_ref, force=True)
                except Exception:  # noqa: BLE001 - already finished
                    pass
        self._wake.set()
        self._thread.join(timeout=10)
        for job in jobs:
            _resolve(job.future, EvalResult(Status.INFRA_FAILED, SHUTDOWN_REASON))
        for slot in self._slots:
            self._kill(slot)
        if self._owns_ray:
            self._ray.shutdown()

    # -- introspection (progress displays, tests) -------------------------------------------------------------------
    @property
    def actors(self) -> tuple[Any, ...]:
        """The current actor handle of each slot (None where no actor is running)."""
        with self._lock:
            return tuple(s.actor for s in self._slots)

    def notices(self) -> list[str]:
        """What happened since the last call that a user watching the run should read (a lost worker retried
        elsewhere, fewer workers than asked for), one sentence each."""
        with self._lock:
            out, self._notices = self._notices, []
        return out

    def waiting_reason(self, stalled_s: float = 0.0) -> str | None:
        """Why evaluations are not moving, where Ray is the cause: an actor Ray has not placed, or a build task
        that has not finished, for `stalled_s` seconds or more; None when nothing waits on Ray that long. The search
        asks once no verdict has come for a minute (`opforge.run.search.STALL_S`)."""
        now = time.monotonic()
        with self._lock:
            placing = [(s.ready_ref, now - s.actor_since) for s in self._slots
                       if s.actor is not None and s.ready_ref is not None and now - s.actor_since >= stalled_s]
            building = [now - j.build_since for j in self._pending
                        if j.build_ref is not None and now - j.build_since >= stalled_s]
        if placing:
            ready, _ = self._ray.wait([ref for ref, _ in placing], num_returns=len(placing), timeout=0)
            waiting = [age for ref, age in placing if ref not in ready]
            if waiting:
                free = self._ray.available_resources().get("CPU", 0.0)
                return (f"an evaluation worker has waited {max(waiting):.0f} s for Ray to place it ({free:g} CPUs "
                        f"free in the cluster, it needs {self.plan.actor_cpus or 'a GPU'}; a node may be lost: "
                        "see `ray status`)")
            with self._lock:
                for slot in self._slots:
                    if slot.ready_ref in ready:
                        slot.ready_ref = None
        if building:
            return f"a build task has waited {max(building):.0f} s for Ray to run it (see `ray status`)"
        return None

    def stats(self) -> RayStats:
        with self._lock:
            return RayStats(self._started, self._died, self._recycled, self._retried, self._builds)

    # -- the dispatcher thread --------------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                self._assign()
                refs = [s.ref for s in self._slots if s.ref is not None]
                builds = {j.build_ref: j for j in self._pending if j.build_ref is not None}
            if not refs and not builds:
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            ready, _ = self._ray.wait(refs + list(builds), num_returns=1, timeout=0.2)
            for ref in ready:
                if ref in builds:
                    with self._lock:
                        builds[ref].build_ref = None  # built (or failed: its actor then builds it itself)
                else:
                    self._collect(ref)

    def _assign(self) -> None:
        """Free slots take the oldest jobs whose build is done (or that waited past BUILD_WAIT_S)."""
        now = time.monotonic()
        for slot in self._slots:
            if slot.job is not None:
                continue
            job = next((j for j in self._pending if j.build_ref is None or now > j.build_deadline), None)
            if job is None:
                return
            self._pending.remove(job)
            self._start(slot, job)

    def _start(self, slot: _Slot, job: _Job) -> None:
        if slot.actor is None:
            slot.actor = self._actor_class.remote(self._sandbox, self._build_cache)
            slot.ready_ref, slot.actor_since = slot.actor.pid.remote(), time.monotonic()
            slot.evaluations = 0
            self._started += 1
        job.attempts += 1
        slot.job = job
        slot.ref = slot.actor.evaluate.remote(job.task, job.candidate, job.cfg)

    def _collect(self, ref: Any) -> None:
        exceptions = self._ray.exceptions
        with self._lock:
            slot = next((s for s in self._slots if s.ref is not None and s.ref == ref), None)
            if slot is None or slot.job is None:
                return
            job, slot.job, slot.ref = slot.job, None, None
        try:
            result = self._ray.get(ref)
        except exceptions.RayTaskError as exc:  # raised by the actor's own Python code
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            if isinstance(cause, TaskError):
                _fail(job.future, TaskError(str(cause)))
            else:
                _resolve(job.future, EvalResult(Status.CRASHED, f"the evaluation worker failed: {cause}"))
            return
        except exceptions.RayError as exc:  # the actor, its node or Ray itself went away: not the candidate's doing
            with self._lock:
                self._died += 1
                self._kill(slot)
                if job.attempts < ATTEMPTS_PER_EVALUATION and not self._closed:
                    self._retried += 1
                    self._notices.append(f"an evaluation worker was lost ({one_line(exc)}); retrying on a fresh "
                                         f"one, wherever Ray places it (try {job.attempts + 1} of "
                                         f"{ATTEMPTS_PER_EVALUATION})")
                    self._start(slot, job)  # the retry goes to this slot's fresh actor, wherever Ray places it
                    return
                closed = self._closed
            _resolve(job.future, infra_failure(job.attempts, exc, closed))
            return
        except Exception as exc:  # noqa: BLE001 - every failure is a status
            _resolve(job.future, EvalResult(Status.CRASHED, f"the evaluation worker failed: {exc}"))
            return
        with self._lock:
            slot.evaluations += 1
            if slot.evaluations >= self._recycle_after:
                self._recycled += 1
                self._kill(slot)
        _resolve(job.future, result)

    def _kill(self, slot: _Slot) -> None:
        actor, slot.actor, slot.evaluations = slot.actor, None, 0
        if actor is not None:
            try:
                self._ray.kill(actor, no_restart=True)  # its zygotes see their control socket close and exit
            except Exception:  # noqa: BLE001 - already gone
                pass


SHUTDOWN_REASON = "the evaluation runner shut down before this candidate was judged"


def infra_failure(attempts: int, exc: BaseException, closed: bool = False) -> EvalResult:
    """The result of an evaluation whose worker kept going away: one line naming Ray's error, never Ray's report
    (a memory monitor's report runs to kilobytes of process tables)."""
    if closed:
        return EvalResult(Status.INFRA_FAILED, SHUTDOWN_REASON)
    return EvalResult(Status.INFRA_FAILED, f"the evaluation worker was lost {attempts} times, not through the "
                                           f"candidate's doing ({one_line(exc)})")


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's class and first line, at most `limit` characters."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    detail = f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__
    return detail if len(detail) <= limit else detail[: limit - 3] + "..."


def _resolve(future: Future[EvalResult], result: EvalResult) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: Future[EvalResult], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
