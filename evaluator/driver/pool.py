"""Runners: where evaluations run. `LocalRunner` uses threads over one `LocalEvaluator` in this process; `RayRunner`
(`ray_runner.py`) spreads them over Ray actors (one per GPU, or a few CPU actors), replacing actors that die and
recycling old ones.

CUDA builds (`build/stage.py`): `RayRunner` builds a candidate that uses `cpp_extension` in a Ray CPU task
(`num_cpus=1`, no GPU) as soon as it is submitted, so the builds of several candidates run in parallel and an actor
only loads the cached result. Under `LocalRunner` each evaluation's driver builds (or finds) its extension in its own
thread, through the same cache.

A runner receives only `(Task, Candidate, EvalConfig)` and resolves a `concurrent.futures.Future` to an `EvalResult`.
It never raises for a candidate's problem: a failure is a status. The one exception a future can carry is `TaskError`
(the task itself is unusable), which the driver must stop on.

Faults are not verdicts. "The candidate's process died" is judged inside the evaluator (`crashed`); "the Ray worker
that drove the evaluation, its node or the runner went away" (the OOM killer, Ray's memory monitor, a lost node, a
shutdown) is not about the candidate: the runner retries it on a fresh actor and, when that keeps failing, resolves
`Status.INFRA_FAILED`, which the search requeues and the store refuses to keep as a verdict.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from evaluator.candidate import Candidate
from evaluator.config import EvalConfig
from evaluator.device.rules import rules
from evaluator.driver.evaluate import LocalEvaluator
from evaluator.result import EvalResult, Status
from evaluator.task import Task, TaskError
from evaluator.driver.warm_start import likely_device

DEFAULT_CPU_WORKERS = 2
DEFAULT_RECYCLE_AFTER = 200      # evaluations per actor before it is replaced (leaks, fragmentation, stale caches)
ATTEMPTS_PER_EVALUATION = 3      # tries on fresh actors when the infrastructure fails, before `infra_failed`
BUILD_WAIT_S = 900.0             # a job waits at most this long for its build task, then builds in its actor


class Runner(Protocol):
    """Evaluates candidates somewhere; `capacity` evaluations run at once."""

    @property
    def capacity(self) -> int: ...

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]: ...

    def close(self) -> None: ...


def evaluate_safely(evaluator: LocalEvaluator, task: Task, candidate: Candidate, cfg: EvalConfig,
                    timed_over: Callable[[], None] | None = None) -> EvalResult:
    """The evaluator's verdict; anything unexpected becomes `crashed` (a `TaskError` propagates: the task is bad)."""
    try:
        if timed_over is None:
            return evaluator.evaluate(task, candidate, cfg)
        return evaluator.evaluate(task, candidate, cfg, timed_over=timed_over)
    except TaskError:
        raise
    except Exception as exc:  # noqa: BLE001 - a runner turns every failure into a status
        return EvalResult(Status.CRASHED, f"the evaluator failed: {exc.__class__.__name__}: {exc}".rstrip(": "))


class LocalRunner:
    """`workers` evaluations at once on threads of this process, all through one `LocalEvaluator`.

    With `overlap` (the default where this machine has no GPU), each of the `workers` may also have one evaluation
    finishing behind it: an evaluation holds its worker's slot until its timing is over on the CPU
    (`LocalEvaluator.evaluate`'s `timed_over`), and what is left of it (rechecks, the clock probe, closing its
    workers: about 150 ms) then runs beside the next evaluation's start (forks, loading, trials) instead of before
    it. Both hold the device lock shared, so neither runs beside a timed phase; the timed phases follow each other
    more closely. `capacity` counts both kinds, so a search keeps the next candidates submitted. Their walls (submit
    to verdict, what `--worker-s` adds up) include the wait for a slot, as they include the wait for the timed phase.
    On a GPU the untimed work takes no lock and would run beside another evaluation's timed phase: no overlap."""

    def __init__(self, workers: int = 1, sandbox: str = "auto", evaluator: LocalEvaluator | None = None,
                 build_cache: str | None = None, overlap: bool | None = None) -> None:
        if workers < 1:
            raise ValueError(f"LocalRunner needs at least one worker, not {workers}.")
        self._workers = workers
        if overlap is None:
            likely = likely_device("auto")
            overlap = likely is not None and rules(likely).hands_back_timed_cores
        self._overlap = overlap
        self._slots = threading.BoundedSemaphore(workers)
        self._own_evaluator = evaluator is None
        self._evaluator = evaluator or LocalEvaluator(sandbox, build_cache)
        self._pool = ThreadPoolExecutor(max_workers=self.capacity, thread_name_prefix="opforge-eval")

    @property
    def capacity(self) -> int:
        return 2 * self._workers if self._overlap else self._workers

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        if not self._overlap:
            return self._pool.submit(evaluate_safely, self._evaluator, task, candidate, cfg)
        return self._pool.submit(self._evaluate_in_slot, task, candidate, cfg)

    def _evaluate_in_slot(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> EvalResult:
        """One evaluation holding a worker's slot until its timing is over (or it ends), whichever comes first."""
        self._slots.acquire()
        held = [True]

        def release() -> None:  # called in this thread only: by the evaluator, then here
            if held[0]:
                held[0] = False
                self._slots.release()

        try:
            return evaluate_safely(self._evaluator, task, candidate, cfg, timed_over=release)
        finally:
            release()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._own_evaluator:
            self._evaluator.close()
