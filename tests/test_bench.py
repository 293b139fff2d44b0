"""Benches and the leaderboard: the scoring rules on a hand-made store, then `opforge bench` end to end on CPU."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from store_fixtures import H100, failed_result, make_task, ok_result

from evaluator import Candidate
from opforge.run.bench import agent_label, bench_tasks
from opforge.run.bench_config import BenchConfig
from opforge.run.config import LLMSettings, RunConfig, RunConfigError
from opforge.reports.leaderboard import leaderboard
from store import RunStatus, get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]


def _bench(store, agent: str, scores: dict[str, object], cost_usd: float = 0.0) -> int:
    """A bench with one run per task; each task's results as given (an EvalResult or a list of them)."""
    bench = store.create_bench("tiny", agent, {"coder": "tune"})
    for i, (name, results) in enumerate(scores.items()):
        task = store.add_task(make_task(name, body=f"# {name}\n"))
        store.set_task_work(task.id, flops=0.0, min_bytes=3_350_000)  # 1 us at the H100's 3350 GB/s
        run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 4}, bench_id=bench.id)
        for j, result in enumerate(results if isinstance(results, list) else [results]):
            cand, _ = store.add_candidate(run.id, task.id, Candidate.from_source(f"x = {bench.id}_{i}_{j}"))
            store.add_result(cand.id, run.id, result, worker_s=30.0)
        if cost_usd:
            store.record_llm_call(run.id, "coder:refine", "m", "p", "r", tokens_in=1000, tokens_out=500,
                                  cost_usd=cost_usd)
    return bench.id


def test_leaderboard_scores_fast_p_geomean_with_roofline_floor_and_cost(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'lb.db'}")
    energetic = dataclasses.replace(ok_result(2.0), energy_j=0.5, reference_energy_j=1.0,
                                    peak_memory_bytes=300, reference_peak_memory_bytes=100)
    bench_id = _bench(store, "llm:m", {
        "fast": [ok_result(1.2), energetic],               # best of the run counts: 2.0x
        "slow": ok_result(0.5),
        "wrong": failed_result(),
        "too_good": ok_result(4000.0, reference_ms=2.0),   # 0.0005 ms < the 0.001 ms floor: floored to 2000x
    }, cost_usd=0.25)
    [row] = leaderboard(store, "tiny")
    assert (row.agent, row.device, row.bench_id, row.attempted, row.correct) == ("llm:m", H100.name, bench_id, 4, 3)
    assert row.fast_p == {"0": 0.75, "1": 0.5, "1.5": 0.5, "2": 0.25}  # 2.0 is not > 2
    by_task = {t.task: t for t in row.tasks}
    assert by_task["too_good"].floored and by_task["too_good"].speedup == pytest.approx(2000.0)
    assert by_task["too_good"].raw_speedup == pytest.approx(4000.0)
    assert not by_task["wrong"].correct and by_task["wrong"].speedup is None
    expected = math.exp((math.log(2.0) + math.log(0.5) + 0.0 + math.log(2000.0)) / 4)
    assert row.geomean_speedup == pytest.approx(expected)
    assert row.mean_energy_ratio == pytest.approx(0.5) and row.mean_memory_ratio == pytest.approx(3.0)
    per = row.per_correct()
    assert per["usd"] == pytest.approx(4 * 0.25 / 3) and per["tokens"] == pytest.approx(4 * 1500 / 3)
    assert per["worker_minutes"] == pytest.approx(5 * 30.0 / 60 / 3)

    # A newer bench of the same agent on the same device replaces it; another agent gets its own row.
    _bench(store, "llm:m", {"fast": ok_result(3.0)})
    _bench(store, "tune", {"fast": failed_result()})
    rows = leaderboard(store, "tiny")
    assert [(r.agent, r.attempted, r.correct) for r in rows] == [("llm:m", 1, 1), ("tune", 1, 0)]
    assert rows[1].geomean_speedup == pytest.approx(1.0) and rows[1].per_correct()["usd"] is None
    assert leaderboard(store, "other") == []
    store.close()


def test_agent_labels_name_the_models():
    assert agent_label({"coder": "tune"}) == "tune"
    llm = {"model": "gpt-4.1", "judge_model": "o4-mini", "backend": "triton"}
    assert agent_label({"coder": "llm", "llm": llm}) == "llm:gpt-4.1+judge:o4-mini"
    assert agent_label({"coder": "llm", "llm": {**llm, "judge_model": "gpt-4.1"}}) == "llm:gpt-4.1"
    assert agent_label({"coder": "llm", "llm": {**llm, "judge_model": None, "backend": "cuda"}}) == \
        "llm:gpt-4.1+nojudge:cuda"
    assert agent_label({"coder": "tune", "backend": "cpp", "use_archive": True}) == "tune:cpp+archive"
    assert agent_label({"coder": "llm", "backend": "cuda", "llm": llm}) == "llm:gpt-4.1+judge:o4-mini:cuda"


def test_bench_config_is_typed_and_stored_flat_with_unknown_keys_refused():
    run = RunConfig(coder="llm", backend="cpp", seed=3, llm=LLMSettings(model="m", from_scratch=True))
    config = BenchConfig(run=run, budget_per_task=4, tasks="soft*", max_usd=1.5, use_archive=False, device="cpu:x")
    stored = config.to_json()
    assert stored["coder"] == "llm" and stored["budget_per_task"] == 4 and "archive" not in stored  # flat, as before
    assert agent_label(stored) == "llm:m+nojudge:cpp"
    back = BenchConfig.from_json(json.loads(json.dumps(stored)), "bench 7")
    assert back == config and back.run.llm is not None and back.run.llm.from_scratch
    with pytest.raises(RunConfigError, match="bench 7.*colour"):
        BenchConfig.from_json({**stored, "colour": "red"}, "bench 7")
    with pytest.raises(RunConfigError, match="bench 7.*budget_per_task"):
        BenchConfig.from_json({"coder": "tune"}, "bench 7")
    with pytest.raises(RunConfigError, match="at least one candidate"):
        BenchConfig.from_json({**stored, "budget_per_task": 0}, "bench 7")


def test_bench_tasks_read_kernelbench_levels_and_filter_by_pattern(tmp_path):
    problem = (ROOT / "benchmarks" / "tiny" / "relu.py").read_text()
    for level, names in {"level1": ["10_B.py", "2_A.py"], "level2": ["1_C.py"]}.items():
        (tmp_path / "KernelBench" / level).mkdir(parents=True)
        for name in names:
            (tmp_path / "KernelBench" / level / name).write_text(problem)
    (tmp_path / "KernelBench" / "level1" / "notes.py").write_text("print('not a problem')\n")
    labels = [t.label for t in bench_tasks(str(tmp_path))]
    assert labels == ["level1/2_A", "level1/10_B", "level2/1_C"]
    assert [t.label for t in bench_tasks(str(tmp_path), "level2/*")] == ["level2/1_C"]
    assert [t.label for t in bench_tasks("tiny", "soft*")] == ["tiny/softmax"]
    with pytest.raises(ValueError, match="matches"):
        bench_tasks("tiny", "nothing*")
    with pytest.raises(ValueError, match="neither a built-in suite"):
        bench_tasks(str(tmp_path / "missing"))


@pytest.mark.slow
def test_bench_on_cpu_runs_every_task_records_work_and_resumes_without_redoing(tmp_path):
    db = f"sqlite:///{tmp_path / 'bench.db'}"
    common = ["--db", db, "--runner", "local", "--workers", "2"]
    first = subprocess.run([*OPFORGE, "bench", "--suite", "tiny", "--tasks", "relu", "--budget-per-task", "2",
                            "--coder", "tune", "--backend", "triton", "--timing-s", "0.2", "--no-archive", "--json",
                            *common],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = json.loads(first.stdout.strip().splitlines()[-1])
    assert summary["agent"] == "tune" and summary["status"] == "done"
    [task] = summary["tasks"]
    assert task["task"] == "tiny/relu" and task["evaluated"] == 2 and task["best_speedup"] > 0

    store = get_store(db)
    [run] = store.bench_runs(summary["bench_id"])
    assert run.status == RunStatus.DONE and run.evaluated == 2
    assert store.get_task(run.task_id).min_bytes == 2 * 3968 * 2048 * 4  # relu in and out, fp32, its native size
    store.close()

    again = subprocess.run([*OPFORGE, "bench", "--resume", str(summary["bench_id"]), "--json", *common],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    store = get_store(db)
    assert store.get_run(run.id).evaluated == 2 and len(store.bench_runs(summary["bench_id"])) == 1
    store.close()

    board = subprocess.run([*OPFORGE, "leaderboard", "--suite", "tiny", "--json", "--db", db],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    [row] = json.loads(board.stdout)["rows"]
    assert (row["agent"], row["attempted"], row["correct"]) == ("tune", 1, 1)
    assert row["fast_p"]["0"] == 1.0 and row["device"].startswith("CPU")
    # The bench measured this CPU's peaks once; interpreted Triton (timed on INTERPRETER_SHAPE) gets no roofline.
    store = get_store(db)
    assert store.device_peaks(row["device"]) is not None
    store.close()
    assert row["mean_roofline_fraction"] is None and row["tasks"][0]["roofline_fraction"] is None


def test_bench_with_the_tuner_on_tasks_without_seeds_records_them_as_failed(tmp_path):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "relu.py").write_text((ROOT / "benchmarks" / "tiny" / "relu.py").read_text())
    db = f"sqlite:///{tmp_path / 'bench.db'}"
    done = subprocess.run([*OPFORGE, "bench", "--suite", str(tmp_path / "suite"), "--coder", "tune", "--db", db,
                           "--runner", "local", "--json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    [task] = json.loads(done.stdout.strip().splitlines()[-1])["tasks"]
    assert task["status"] == "failed" and "no seed kernel" in done.stdout
    store = get_store(db)
    [row] = leaderboard(store, str((tmp_path / "suite").resolve()))
    assert (row.attempted, row.correct) == (1, 0)
    store.close()
