"""A run's budget holds whatever generation 0 holds (archive seeds included), and every command reports the same
best for a run whose kernels another run had already measured. Verdicts come from a dummy runner: fast, no
evaluator."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from concurrent.futures import Future

import pytest

from agents.tuner import TuneProposer, describe_tunables
from benchmarks import builtin_task, seed_for
from evaluator import Candidate, EvalConfig, EvalResult, Status, Task, load_candidate, load_task
from evaluator.result import DeviceInfo, Timing
from opforge.cli.commands.runs import run_list, run_show
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Search, SearchSettings
from opforge.run.start import Budget, start_run
from opforge.web import views
from store import QueueState, get_store

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAKE_DEVICE = DeviceInfo(kind="cpu", name="fake")


class DummyRunner:
    """Verdicts without evaluating, in submission order: speedup BLOCK_SIZE / 1000."""

    capacity = 2

    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        self.submitted.append(candidate.digest)
        block = describe_tunables(candidate.source).get("BLOCK_SIZE", 1)
        future: Future[EvalResult] = Future()
        future.set_result(EvalResult(Status.OK, "dummy", candidate_ms=Timing(1000.0 / block, 0.0, 5),
                                     reference_ms=Timing(1.0, 0.0, 5), device=FAKE_DEVICE))
        return future

    def close(self) -> None:
        pass


def _seed(block: int) -> Candidate:
    """The relu seed with another BLOCK_SIZE: the dummy runner's speedup is BLOCK_SIZE / 1000."""
    source = load_candidate(seed_for(builtin_task("relu"))).source
    assert "BLOCK_SIZE=1024" in source
    return Candidate.from_source(source.replace("BLOCK_SIZE=1024", f"BLOCK_SIZE={block}"), origin="seed")


@pytest.fixture
def store(tmp_path):
    s = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    yield s
    s.close()


def _run(store, task, seed: Candidate, budget: int) -> tuple[int, DummyRunner]:
    runner = DummyRunner()
    run = start_run(store, task, seed, RunConfig(), Budget(budget), use_archive=True,
                    device=FAKE_DEVICE.name)
    try:
        outcome = Search(store, run.id, task, Proposing(TuneProposer(seed=0), oversample=4), runner,
                         SearchSettings(EvalConfig(), Budget(budget))).run()
    finally:
        runner.close()
    assert outcome.done == len(runner.submitted) == store.run_totals(run.id).queue.get("done", 0)
    return run.id, runner


def test_archive_seeds_never_take_a_run_past_its_budget(store):
    task = load_task(TASK)
    earlier, _ = _run(store, task, _seed(512), 1)  # the archive now holds a 0.512x kernel of this task
    imported = _seed(2048)
    store.add_candidate(None, store.get_run(earlier).task_id, Candidate.from_source(imported.source, origin="import"))

    run_id, runner = _run(store, task, _seed(256), 1)
    assert runner.submitted == [_seed(256).digest]  # the seed only: no room for archived kernels
    assert store.get_run(run_id).config["archive"]["seeds"] == []
    assert store.run_totals(run_id).queue == {QueueState.DONE.value: 1}

    run_id, runner = _run(store, task, _seed(128), 2)
    # the seed, then the fastest measured archive kernel; the imported one had no room left
    assert sorted(runner.submitted) == sorted([_seed(128).digest, _seed(512).digest])
    assert [s["digest"] for s in store.get_run(run_id).config["archive"]["seeds"]] == [_seed(512).digest]
    assert store.run_totals(run_id).queue == {QueueState.DONE.value: 2}


def test_search_never_dispatches_past_the_budget_whatever_is_queued(store):
    task = load_task(TASK)
    run = start_run(store, task, _seed(256), RunConfig(), Budget(1))
    extra = [store.add_candidate(run.id, run.task_id, _seed(b))[0].id for b in (512, 1024)]
    store.enqueue(run.id, extra)  # e.g. a queue left by an older version, or a resumed run
    runner = DummyRunner()
    try:
        outcome = Search(store, run.id, task, Proposing(TuneProposer(seed=0)), runner,
                         SearchSettings(EvalConfig(), Budget(1))).run()
    finally:
        runner.close()
    assert outcome.done == 1 and runner.submitted == [_seed(256).digest]
    assert "budget of 1" in outcome.stop_reason


def _cli_json(fn, capsys, **kw) -> dict:
    capsys.readouterr()
    assert fn(argparse.Namespace(json=True, **kw)) == 0
    return json.loads(capsys.readouterr().out)


def test_runs_show_and_the_api_agree_on_a_best_below_1x(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = get_store(url)
    try:
        task = load_task(TASK)
        first, _ = _run(store, task, _seed(256), 1)
        # Same seed again: the archive offers the same kernel, measured before on this device, so this run
        # records no evaluation of its own; its verdict is the first run's.
        second, _ = _run(store, task, _seed(256), 1)
        api = {r["run_id"]: r["best_speedup"] for r in views.runs(store)}
    finally:
        store.close()
    listed = {r["run_id"]: r["best_speedup"] for r in _cli_json(run_list, capsys, db=url)["runs"]}
    for run_id in (first, second):
        shown = _cli_json(run_show, capsys, db=url, run_id=run_id, source=False)
        best = shown["best"][0]["speedup"]
        assert best == pytest.approx(0.256) and shown["best"][0]["candidate_id"] == 1
        assert listed[run_id] == pytest.approx(best) and api[run_id] == pytest.approx(best)
