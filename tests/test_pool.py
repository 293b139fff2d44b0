"""Runners: failures become statuses, a dying Ray actor is replaced and its evaluation retried, then `infra_failed`
(not a verdict: see test_infra_faults.py);
and a whole search through real Ray with two CPU actors."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agents.tuner import TuneProposer
from benchmarks import builtin_task, seed_for
from evaluator import Candidate, EvalConfig, EvalResult, Status, TaskError, load_candidate, load_task
from evaluator.driver.pool import ATTEMPTS_PER_EVALUATION, LocalRunner, evaluate_safely
from evaluator.driver.ray_runner import RayRunner
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import QueueState, RunStatus, get_store

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAST = EvalConfig(max_timing_s=0.3, trials=1, profile=False, warmup_ms=5.0)


def _seed() -> Candidate:
    return load_candidate(seed_for(builtin_task("relu")), origin="seed")


class _Exploding:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def evaluate(self, task, candidate, cfg) -> EvalResult:
        raise self.exc


def test_unexpected_evaluator_errors_become_crashed_and_task_errors_propagate():
    task = load_task(TASK)
    result = evaluate_safely(_Exploding(RuntimeError("boom")), task, _seed(), FAST)  # type: ignore[arg-type]
    assert result.status == Status.CRASHED and "boom" in result.reason
    with pytest.raises(TaskError):
        evaluate_safely(_Exploding(TaskError("bad task")), task, _seed(), FAST)  # type: ignore[arg-type]


def test_local_runner_returns_statuses_for_bad_candidates():
    runner = LocalRunner(workers=2)
    try:
        task = load_task(TASK)
        broken = runner.submit(task, Candidate.from_source("def ModelNew(:\n"), FAST)
        sneaky = runner.submit(task, Candidate.from_source("import subprocess\nclass ModelNew: pass\n"), FAST)
        assert broken.result(timeout=60).status == Status.COMPILE_ERROR
        assert sneaky.result(timeout=60).status == Status.REJECTED
        assert runner.capacity in (2, 4)  # 4 where evaluations overlap (no GPU here): see the tests below
    finally:
        runner.close()


class _Staged:
    """An evaluator whose evaluations say when they start and wait to be let through their timing and their end."""

    def __init__(self) -> None:
        self.started: dict[str, threading.Event] = {}
        self.timed: dict[str, threading.Event] = {}
        self.finish: dict[str, threading.Event] = {}

    def stage(self, name: str) -> None:
        for d in (self.started, self.timed, self.finish):
            d[name] = threading.Event()

    def evaluate(self, task, candidate, cfg, timed_over=None) -> EvalResult:
        name = candidate.note
        self.started[name].set()
        if name == "untimed":
            raise RuntimeError("refused before timing")
        assert self.timed[name].wait(30)
        if timed_over is not None:
            timed_over()
        assert self.finish[name].wait(30)
        return EvalResult(Status.OK, name)

    def close(self) -> None:
        pass


def _named(name: str) -> Candidate:
    return Candidate.from_source(f"# {name}\n", note=name)


def test_overlapping_runner_starts_the_next_evaluation_once_the_timing_of_one_is_over():
    staged = _Staged()
    for name in ("a", "b", "c"):
        staged.stage(name)
    runner = LocalRunner(workers=1, evaluator=staged, overlap=True)  # type: ignore[arg-type]
    try:
        assert runner.capacity == 2
        task = load_task(TASK)
        a, b = runner.submit(task, _named("a"), FAST), runner.submit(task, _named("b"), FAST)
        assert staged.started["a"].wait(30)
        assert not staged.started["b"].wait(0.3)  # one worker: b waits while a is prepared and timed
        staged.timed["a"].set()
        assert staged.started["b"].wait(30)  # a's timing is over: b starts while a is finishing
        assert not a.done()
        c = runner.submit(task, _named("c"), FAST)
        assert not staged.started["c"].wait(0.3)  # b holds the one slot until its own timing is over
        staged.finish["a"].set()
        assert a.result(timeout=30).reason == "a"
        assert not staged.started["c"].wait(0.3)  # a's end frees no slot: it had given it up
        staged.timed["b"].set()
        assert staged.started["c"].wait(30)
        staged.finish["b"].set()
        staged.timed["c"].set()
        staged.finish["c"].set()
        assert b.result(timeout=30).reason == "b" and c.result(timeout=30).reason == "c"
    finally:
        runner.close()


def test_an_evaluation_that_fails_before_timing_gives_its_slot_back():
    staged = _Staged()
    for name in ("untimed", "after"):
        staged.stage(name)
    runner = LocalRunner(workers=1, evaluator=staged, overlap=True)  # type: ignore[arg-type]
    try:
        task = load_task(TASK)
        failed = runner.submit(task, _named("untimed"), FAST)
        assert failed.result(timeout=30).status == Status.CRASHED
        after = runner.submit(task, _named("after"), FAST)
        staged.timed["after"].set()
        staged.finish["after"].set()
        assert after.result(timeout=30).status == Status.OK
    finally:
        runner.close()


def test_a_runner_without_overlap_runs_as_many_evaluations_as_workers():
    staged = _Staged()
    staged.stage("a")
    runner = LocalRunner(workers=2, evaluator=staged, overlap=False)  # type: ignore[arg-type]
    try:
        assert runner.capacity == 2
        future = runner.submit(load_task(TASK), _named("a"), FAST)
        staged.timed["a"].set()
        staged.finish["a"].set()
        assert future.result(timeout=30).status == Status.OK
    finally:
        runner.close()


@pytest.fixture(scope="module")
def ray_runtime():
    ray = pytest.importorskip("ray")
    import logging
    ray.init(num_cpus=3, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
             object_store_memory=128 * 2**20)
    yield ray
    ray.shutdown()


def _kill_current_actor(ray, runner: RayRunner, not_this: object = None, timeout_s: float = 120) -> object:
    """Kill the slot's actor once it exists and differs from `not_this`; returns the killed handle."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        actor = runner.actors[0]
        if actor is not None and actor is not not_this:
            ray.kill(actor, no_restart=True)
            return actor
        time.sleep(0.05)
    raise AssertionError("no actor was started")


@pytest.mark.slow
def test_ray_actor_death_is_retried_then_reported_as_an_infrastructure_failure(ray_runtime):
    ray = ray_runtime
    task = load_task(TASK)
    runner = RayRunner(workers=1, recycle_after=1)
    try:
        # One death: replaced, retried on the fresh actor, verdict as usual.
        future = runner.submit(task, _seed(), FAST)
        _kill_current_actor(ray, runner)
        result = future.result(timeout=240)
        assert result.status == Status.OK, result.reason
        stats = runner.stats()
        assert (stats.actors_died, stats.retried, stats.actors_recycled) == (1, 1, 1)  # recycled after 1 evaluation
        assert runner.actors == (None,)

        # As many deaths as tries: an infrastructure failure, not a verdict on the candidate.
        future = runner.submit(task, _seed(), FAST)
        killed = None
        for _ in range(ATTEMPTS_PER_EVALUATION):
            killed = _kill_current_actor(ray, runner, not_this=killed)
        result = future.result(timeout=240)
        assert result.status == Status.INFRA_FAILED and f"lost {ATTEMPTS_PER_EVALUATION} times" in result.reason
        assert runner.stats().actors_died == 1 + ATTEMPTS_PER_EVALUATION
    finally:
        runner.close()


@pytest.mark.slow
def test_search_through_ray_with_two_cpu_actors(tmp_path, ray_runtime):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    task = load_task(TASK)
    runner = RayRunner(workers=2)
    assert runner.capacity == 2 and not runner.uses_gpus
    try:
        budget = Budget(4)
        run = start_run(store, task, _seed(), RunConfig(), budget)
        outcome = Search(store, run.id, task, Proposing(TuneProposer(seed=3), oversample=4), runner,
                         SearchSettings(FAST, budget)).run()
        assert outcome.status == RunStatus.DONE and outcome.done == 4
        history = store.history(run.id)
        assert [sc.evaluation.result.status for sc in history] == [Status.OK] * 4
        assert store.run_totals(run.id).queue == {QueueState.DONE.value: 4}
        assert runner.stats().actors_started == 2
    finally:
        runner.close()
        store.close()
