"""Time left on the live line: once two verdicts give this invocation a rate, the line says about how long the rest
of the budget takes (a real search on a real LocalRunner and SQLite store, a driven clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tuner import TuneProposer
from benchmarks import builtin_task, seed_for
from evaluator import EvalConfig, load_candidate, load_task
from evaluator.driver.pool import LocalRunner
from opforge.run.config import RunConfig
from opforge.run.progress import format_duration, progress_line
from opforge.run.proposals import Proposing
from opforge.run.search import Progress, Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import get_store

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAST = EvalConfig(max_timing_s=0.2, trials=1, profile=False, warmup_ms=5.0)


def test_durations_read_as_a_person_would_say_them():
    assert [format_duration(s) for s in (42, 420, 9000)] == ["42 s", "7 min", "2.5 h"]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


@pytest.mark.slow
def test_the_live_line_says_how_long_is_left_once_a_rate_is_known(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    runner = LocalRunner(workers=1, overlap=False)
    try:
        task = load_task(TASK)
        budget = Budget(4)
        run = start_run(store, task, load_candidate(seed_for(builtin_task("relu")), origin="seed"), RunConfig(),
                        budget)
        seen: list[Progress] = []
        Search(store, run.id, task, Proposing(TuneProposer(seed=3), oversample=4), runner, SearchSettings(FAST, budget),
               on_progress=seen.append, clock=_Clock()).run()
        results = [p for p in seen if p.event == "result"]
        assert len(results) == 4
        assert results[0].left_s is None  # one verdict: no rate yet
        second = results[1]
        assert second.left_s is not None and second.left_s > 0
        assert f"about {format_duration(second.left_s)} left" in progress_line(second)
        assert results[-1].left_s == 0
    finally:
        runner.close()
        store.close()
