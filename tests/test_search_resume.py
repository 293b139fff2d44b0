"""A run killed with SIGKILL mid-flight resumes with every finished evaluation kept and nothing evaluated twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import QueueState, RunStatus, get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
BUDGET = 6
KILL_AFTER = 2  # recorded evaluations

pytestmark = pytest.mark.slow


def _evaluations(url: str, run_id: int) -> dict[int, tuple[int, str, float | None]]:
    """candidate id -> (evaluation id, status, speedup) of the run's recorded verdicts."""
    store = get_store(url)
    try:
        return {sc.candidate.id: (sc.evaluation.id, sc.evaluation.result.status.value, sc.speedup)
                for sc in store.history(run_id) if sc.evaluation is not None}
    finally:
        store.close()


def _run_exists(url: str, run_id: int) -> bool:
    store = get_store(url)
    try:
        return any(r.id == run_id for r in store.list_runs())
    finally:
        store.close()


def test_kill_9_then_resume_loses_and_repeats_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    common = ["--db", url, "--runner", "local", "--workers", "2"]
    proc = subprocess.Popen([*OPFORGE, "optimize", str(TASK), "--seed-kernel", str(SEED), "--budget", str(BUDGET),
                             "--timing-s", "0.3", *common], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    before: dict = {}
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (tmp_path / "runs.db").exists() and _run_exists(url, 1):  # the file appears before the run row
                before = _evaluations(url, 1)
                if len(before) >= KILL_AFTER:
                    break
            time.sleep(0.2)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()[1][-2000:]!r}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    before = _evaluations(url, 1)  # whatever was committed up to the kill
    assert KILL_AFTER <= len(before) < BUDGET

    store = get_store(url)
    assert store.get_run(1).status == RunStatus.RUNNING  # killed: nobody marked it
    store.close()

    resumed = subprocess.run([*OPFORGE, "optimize", "--resume", "1", "--json", *common], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert summary["run_id"] == 1 and summary["evaluated"] == BUDGET
    assert summary["best"]["status"] == "ok" and summary["best"]["speedup"] > 0

    after = _evaluations(url, 1)
    assert len(after) == BUDGET
    for candidate_id, verdict in before.items():  # every finished evaluation kept, none measured again
        assert after[candidate_id] == verdict
    store = get_store(url)
    try:
        history = store.history(1)
        assert len({sc.candidate.digest for sc in history}) == len(history) == BUDGET
        totals = store.run_totals(1)
        assert totals.queue == {QueueState.DONE.value: BUDGET}
        assert totals.evaluated == BUDGET  # one verdict row per candidate
        assert store.get_run(1).status == RunStatus.DONE
    finally:
        store.close()
