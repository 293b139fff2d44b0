"""Faults are not verdicts: an evaluation whose Ray worker is killed from outside (the OOM killer, Ray's memory
monitor, a lost node, a shutdown) is retried and, when it keeps failing, put back in the run's queue with the fault
noted; the store never keeps it as the candidate's verdict (real Ray, real SQLite)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from agents.tuner import TuneProposer
from benchmarks import builtin_task, seed_for
from evaluator import Candidate, EvalConfig, EvalResult, Status, load_candidate, load_task
from evaluator.driver.pool import ATTEMPTS_PER_EVALUATION
from evaluator.driver.ray_runner import RayRunner, infra_failure
from opforge.run.config import RunConfig
from opforge.run.progress import progress_line
from opforge.run.proposals import Proposing
from opforge.run.search import Progress, Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import QueueState, RunStatus, get_store

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAST = EvalConfig(max_timing_s=0.3, trials=1, profile=False, warmup_ms=5.0)


def _seed() -> Candidate:
    return load_candidate(seed_for(builtin_task("relu")), origin="seed")


def test_an_infrastructure_failure_is_one_line_and_not_a_verdict():
    dump = RuntimeError("Task was killed due to the node running low on memory.\n" + "PID\tMEM\tCOMMAND\n" * 400)
    result = infra_failure(3, dump)
    assert result.status == Status.INFRA_FAILED and not result.is_verdict
    assert "lost 3 times" in result.reason and "running low on memory" in result.reason
    assert "\n" not in result.reason and len(result.reason) < 320
    assert EvalResult(Status.CRASHED, "the candidate's process died").is_verdict


def test_the_store_refuses_an_infrastructure_failure_as_a_verdict_and_requeues_it(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        task = load_task(TASK)
        run = start_run(store, task, _seed(), RunConfig(), Budget(1))
        [record] = store.claim_pending(run.id, 1)
        lost = infra_failure(3, RuntimeError("ActorDiedError"))
        with pytest.raises(ValueError, match="not a verdict"):
            store.add_result(record.id, run.id, lost)
        with pytest.raises(ValueError, match="not a re-measurement"):
            store.add_confirmation(run.id, record.id, lost)
        assert store.requeue_after_fault(run.id, record.id, lost.reason) == 1
        totals = store.run_totals(run.id)
        assert totals.queue == {QueueState.QUEUED.value: 1} and totals.faults == 1 and totals.by_status == {}
        assert store.history(run.id)[0].evaluation is None
        [again] = store.claim_pending(run.id, 1)  # claimed again, first in line
        assert again.id == record.id
    finally:
        store.close()


def test_the_live_line_says_evaluations_were_lost_and_retried():
    p = Progress(run_id=1, event="fault", done=0, budget=4, in_flight=1, queued=1, best_speedup=None,
                 by_status={}, worker_s=0.0, elapsed_s=3.0, faults=2, note="the evaluation worker was lost")
    assert "2 lost to the workers, retried" in progress_line(p)


@pytest.fixture(scope="module")
def ray_runtime():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=3, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
             object_store_memory=128 * 2**20)
    yield ray
    ray.shutdown()


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _ours(pid: int) -> bool:
    """Whether `pid` descends from this process (its own Ray): another test file's Ray, running beside this one under
    pytest-xdist, has actors of the same title, and killing those failed that file's tests."""
    me = os.getpid()
    while pid > 1:
        pid = _parent(pid)
        if pid == me:
            return True
    return False


def _actor_pids() -> set[int]:
    """Processes this process's Ray runs the evaluator actors in (their title is `ray::EvaluatorActor...`)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"ray::EvaluatorActor") and _ours(int(entry.name)):
            pids.add(int(entry.name))
    return pids


class _OomKiller:
    """Kills (SIGKILL, as the kernel's OOM killer does) the next `n` evaluator actors Ray starts, each once."""

    def __init__(self, n: int) -> None:
        self.n, self.killed = n, 0
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        deadline = time.monotonic() + 600
        while self.killed < self.n and not self._stop.is_set() and time.monotonic() < deadline:
            for pid in sorted(_actor_pids() - self._seen):
                self._seen.add(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                    self.killed += 1
                except ProcessLookupError:
                    pass
                if self.killed >= self.n:
                    break
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.mark.slow
def test_killed_workers_are_retried_and_never_recorded_against_the_kernel(tmp_path, ray_runtime):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    task = load_task(TASK)
    runner = RayRunner(workers=1)
    killer = None
    try:
        budget = Budget(1)
        run = start_run(store, task, _seed(), RunConfig(), budget)
        seen: list[Progress] = []
        # Every try the runner makes is killed: the runner gives up (infra_failed), the search puts the candidate
        # back in the queue, and its next evaluation (on a fresh actor, unharmed) gives the verdict.
        killer = _OomKiller(ATTEMPTS_PER_EVALUATION)
        outcome = Search(store, run.id, task, Proposing(TuneProposer(seed=3), oversample=1), runner,
                         SearchSettings(FAST, budget), on_progress=seen.append).run()
        assert killer.killed == ATTEMPTS_PER_EVALUATION
        assert outcome.status == RunStatus.DONE and outcome.done == 1, outcome.stop_reason
        [scored] = store.history(run.id)
        assert scored.evaluation is not None and scored.evaluation.result.status == Status.OK, scored.evaluation
        totals = store.run_totals(run.id)
        assert totals.by_status == {Status.OK.value: 1} and totals.faults == 1
        assert totals.queue == {QueueState.DONE.value: 1}
        assert outcome.by_status == {Status.OK.value: 1}
        faults = [p for p in seen if p.event == "fault"]
        assert len(faults) == 1 and "not through the candidate's doing" in faults[0].note
        assert runner.stats().actors_died == ATTEMPTS_PER_EVALUATION
    finally:
        if killer is not None:
            killer.stop()
        runner.close()
        store.close()


@pytest.mark.slow
def test_an_evaluation_in_flight_when_the_runner_shuts_down_is_not_a_verdict(ray_runtime):
    runner = RayRunner(workers=1)
    try:
        future = runner.submit(load_task(TASK), _seed(), FAST)
    finally:
        runner.close()
    result = future.result(timeout=60)
    assert result.status == Status.INFRA_FAILED and "shut down" in result.reason
