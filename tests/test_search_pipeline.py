"""The run loop's bookkeeping with a dummy runner (instant synthetic verdicts): budgets, pipelining, stop reasons."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from agents.tuner import TuneProposer, describe_tunables
from benchmarks import builtin_task, seed_for
from evaluator import Candidate, EvalConfig, EvalResult, Status, Task, TaskError, load_candidate, load_task
from evaluator.result import DeviceInfo, Timing
from opforge.run.progress import ProgressPrinter
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Progress, Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import QueueState, RunStatus, get_store

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAKE_DEVICE = DeviceInfo(kind="cpu", name="fake")


class DummyRunner:
    """Verdicts without evaluating: a bigger BLOCK_SIZE is faster."""

    def __init__(self, capacity: int = 2, delay_s: float = 0.01, fail_with: Exception | None = None) -> None:
        self.capacity, self.delay_s, self.fail_with = capacity, delay_s, fail_with
        self._pool = ThreadPoolExecutor(capacity)
        self.submitted: list[str] = []

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        self.submitted.append(candidate.digest)
        return self._pool.submit(self._evaluate, candidate)

    def _evaluate(self, candidate: Candidate) -> EvalResult:
        time.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        block = describe_tunables(candidate.source).get("BLOCK_SIZE", 1)
        return EvalResult(Status.OK, "dummy", candidate_ms=Timing(1000.0 / block, 0.0, 5),
                          reference_ms=Timing(1.0, 0.0, 5), device=FAKE_DEVICE)

    def close(self) -> None:
        self._pool.shutdown()


@pytest.fixture
def setup(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    task = load_task(TASK)
    seed = load_candidate(seed_for(builtin_task("relu")), origin="seed")
    yield store, task, seed
    store.close()


def _search(store, task, seed, budget: Budget, proposer=None, runner=None, **kw) -> tuple[Search, int]:
    run = start_run(store, task, seed, RunConfig(), budget)
    search = Search(store, run.id, task, Proposing(proposer or TuneProposer(seed=1), oversample=4),
                    runner or DummyRunner(), SearchSettings(EvalConfig(), budget), **kw)
    return search, run.id


def test_search_reaches_its_budget_and_records_lineage(setup):
    store, task, seed = setup
    search, run_id = _search(store, task, seed, Budget(10))
    outcome = search.run()
    assert outcome.status == RunStatus.DONE and outcome.done == 10
    history = store.history(run_id)
    assert len(history) == 10 and all(sc.evaluation is not None for sc in history)
    by_digest = {sc.candidate.digest: sc.candidate for sc in history}
    assert history[0].candidate.origin == "seed" and history[0].candidate.generation == 0
    for sc in history[1:]:
        parent = by_digest[sc.candidate.parents[0]]
        assert sc.candidate.generation == parent.generation + 1 and sc.candidate.note
    assert len({sc.candidate.digest for sc in history}) == 10
    assert store.run_totals(run_id).queue == {QueueState.DONE.value: 10}
    assert outcome.best.speedup > history[0].speedup  # the dummy rewards bigger blocks


def test_slow_proposer_never_delays_recording_results(setup):
    store, task, seed = setup
    seed_recorded = threading.Event()
    tuner = TuneProposer(seed=2)
    seen_release: list[bool] = []

    class SlowProposer:
        async def propose(self, task, parents, inspirations, n):
            if not seen_release:  # the first batch waits until a result was recorded meanwhile
                seen_release.append(await asyncio.to_thread(seed_recorded.wait, 60))
            return await tuner.propose(task, parents, inspirations, n)

    def on_progress(p: Progress) -> None:
        if p.event == "result":
            seed_recorded.set()

    search, _ = _search(store, task, seed, Budget(4), proposer=SlowProposer(), on_progress=on_progress)
    assert search.run().done == 4
    assert seen_release and all(seen_release)  # every waiting proposal saw a result recorded meanwhile


def test_evaluation_time_budget_stops_cleanly(setup):
    store, task, seed = setup
    search, run_id = _search(store, task, seed, Budget(50, worker_s=0.5), runner=DummyRunner(delay_s=0.2))
    outcome = search.run()
    assert outcome.status == RunStatus.DONE and "evaluation-time budget" in outcome.stop_reason
    assert 1 <= outcome.done < 50
    queue = store.run_totals(run_id).queue
    assert queue.get(QueueState.RUNNING.value, 0) == 0 and queue[QueueState.DONE.value] == outcome.done


def test_wall_time_limit_stops_cleanly(setup):
    store, task, seed = setup
    search, _ = _search(store, task, seed, Budget(50, time_limit_s=0.5), runner=DummyRunner(delay_s=0.2))
    outcome = search.run()
    assert "time limit" in outcome.stop_reason and 1 <= outcome.done < 50


def test_exhausted_proposer_ends_the_run(setup):
    store, task, seed = setup

    class Empty:
        async def propose(self, task, parents, inspirations, n):
            return []

    outcome = _search(store, task, seed, Budget(5), proposer=Empty())[0].run()
    assert outcome.done == 1 and outcome.status == RunStatus.DONE and "nothing new" in outcome.stop_reason


def test_failing_proposer_fails_the_run_but_keeps_results(setup):
    store, task, seed = setup

    class Broken:
        async def propose(self, task, parents, inspirations, n):
            raise RuntimeError("the model is down")

    search, run_id = _search(store, task, seed, Budget(5), proposer=Broken())
    outcome = search.run()
    assert outcome.status == RunStatus.FAILED and "the model is down" in outcome.stop_reason
    assert store.get_run(run_id).status == RunStatus.FAILED
    assert store.run_totals(run_id).queue.get(QueueState.DONE.value) == 1


def test_unusable_task_stops_the_run(setup):
    store, task, seed = setup
    search, run_id = _search(store, task, seed, Budget(5), runner=DummyRunner(fail_with=TaskError("bad task")))
    with pytest.raises(TaskError):
        search.run()
    assert store.get_run(run_id).status == RunStatus.FAILED


def test_progress_is_one_updating_line_on_a_terminal_and_plain_lines_otherwise(setup):
    store, task, seed = setup
    outputs = {}
    for tty in (True, False):
        stream = io.StringIO()
        printer = ProgressPrinter(stream, tty=tty)
        _search(store, task, seed, Budget(3), on_progress=printer)[0].run()
        printer.finish()
        outputs[tty] = stream.getvalue()
    assert outputs[True].count("\n") == 1 and "\r" in outputs[True] and "3/3 evaluated" in outputs[True]
    plain = outputs[False].splitlines()
    assert "\r" not in outputs[False] and len(plain) == 4  # the start, then one line per result
    assert plain[-1].startswith("run ") and "3/3 evaluated" in plain[-1] and "best" in plain[-1]


def test_a_note_is_said_once_above_the_live_line(setup):
    store, task, seed = setup
    for tty in (True, False):
        stream = io.StringIO()
        printer = ProgressPrinter(stream, tty=tty, note="Triton on a CPU runs under its interpreter.")
        _search(store, task, seed, Budget(2), on_progress=printer)[0].run()
        printer.finish()
        text = stream.getvalue()
        assert text.count("interpreter") == 1 and text.startswith("opforge: note: Triton on a CPU")
