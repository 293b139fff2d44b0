"""The archive of earlier kernels: similarity of tasks, the store's per-task best, what a new run is offered, and a
second tuner run that starts where the first stopped."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Rule, reply
from store_fixtures import CPU, H100, make_task, ok_result

from agents.agent import Agent
from agents.llm_client import OpenAIClient
from agents.llm_coder import LLMCoder
from agents.prompting import DeviceFacts
from agents.proposal import Scored
from agents.tuner import TuneProposer
from evaluator import Candidate, EvalConfig, load_candidate, load_task
from evaluator.driver.pool import LocalRunner
from opforge.run import archive
from opforge.reports.run_summary import run_report
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
FAST = EvalConfig(max_timing_s=0.2, trials=1, profile=False, warmup_ms=5.0)


def test_related_tasks_share_ops_or_op_families():
    assert archive.families(["relu"]) == archive.families(["gelu"]) == {"activation"}
    assert archive.families(["addmm", "gelu"]) == {"matmul", "activation"}
    assert archive.families(["max_pool2d_with_indices"]) == {"pool"} and archive.families(["maximum"]) == {
        "elementwise"}
    assert archive.similarity(["relu"], ["relu"]) == 1.0
    assert archive.similarity(["relu"], ["gelu"]) == pytest.approx(0.4)
    assert archive.similarity(["relu"], ["addmm"]) == 0.0
    assert archive.similarity(["addmm", "gelu"], ["addmm", "relu"]) > archive.similarity(["addmm"], ["relu"])


def _task_with_results(store, name: str, ops: list[str], speedups: list[float], device=H100) -> tuple[int, int]:
    task = store.add_task(make_task(name, body=f"# {name}\n"))
    store.set_task_work(task.id, 0.0, 1000, ops)
    run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 9})
    for i, s in enumerate(speedups):
        cand, _ = store.add_candidate(run.id, task.id, Candidate.from_source(f"k = '{name}{i}'"))
        store.add_result(cand.id, run.id, ok_result(s, device=device))
    return task.id, run.id


def test_the_archive_offers_the_task_own_best_and_related_tasks_kernels(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'a.db'}")
    relu_id, relu_run = _task_with_results(store, "relu", ["relu"], [1.5, 3.0, 2.0])
    _task_with_results(store, "gelu", ["gelu"], [1.2, 1.8])
    _task_with_results(store, "matmul", ["addmm"], [4.0])
    _task_with_results(store, "silu_cpu", ["silu"], [0.5], device=CPU)

    entries = {e.task.name: e for e in store.archive()}
    assert entries["relu"].speedup == pytest.approx(3.0) and entries["gelu"].speedup == pytest.approx(1.8)
    assert "relu" not in {e.task.name for e in store.archive(exclude_run_id=relu_run)}
    assert {e.task.name for e in store.archive(device=CPU.name)} == {"silu_cpu"}

    offer = archive.find(store, store.get_task(relu_id), device=H100.name)
    assert [e.speedup for e in offer.seeds] == pytest.approx([3.0])
    assert [e.task.name for e, _ in offer.inspirations] == ["gelu", "silu_cpu"]  # same device ranks first
    [seed] = archive.seed_candidates(offer)
    assert seed.origin == "archive" and "3.00x" in seed.note and f"run {relu_run}" in seed.note
    as_json = offer.to_json()
    assert as_json["enabled"] and as_json["inspirations"][0]["task"] == "gelu"
    [gelu, _] = archive.inspirations_of(store, as_json)
    assert gelu.task_name == "gelu" and gelu.speedup == pytest.approx(1.8)
    assert archive.inspirations_of(store, {"enabled": False}) == []
    store.close()


def test_the_archive_names_a_tasks_best_by_the_searchs_rule_a_higher_figure_within_noise_is_not_better(tmp_path):
    """A run reports as its best the earliest kernel within noise of the fastest; the archive offers the next run
    that same kernel, and a later one only where it is faster beyond the figures' own error."""
    store = get_store(f"sqlite:///{tmp_path / 'a.db'}")
    task = store.add_task(make_task("relu", body="# relu\n"))
    run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 9})

    def measured(name: str, speedup: float, se_share: float) -> int:
        cand, _ = store.add_candidate(run.id, task.id, Candidate.from_source(f"k = '{name}'"))
        result = ok_result(speedup)
        timing = result.candidate_ms
        assert timing is not None
        store.add_result(cand.id, run.id, replace(result, candidate_ms=replace(
            timing, se_ms=se_share * timing.median_ms)))
        return cand.id

    first = measured("first", 2.0, 0.05)
    measured("noisy_higher", 2.1, 0.05)  # 5% apart, errors of 5% each: not told apart
    [entry] = store.archive()
    assert entry.candidate.id == first
    clearly = measured("clearly_faster", 3.0, 0.05)  # log(1.5) = 0.41 > 2 * 0.07
    [entry] = store.archive()
    assert entry.candidate.id == clearly
    store.close()


def test_an_inspiration_from_a_related_task_is_labelled_as_such_in_the_crossover_prompt():
    task = load_task(TASK)
    parent = load_candidate(SEED)
    related = Scored(load_candidate(ROOT / "benchmarks" / "tiny" / "gelu_tanh.seed.py"), ok_result(1.7),
                     task_name="gelu_tanh")
    with FakeLLMServer(rules=[Rule("You are combining", [reply("```python\nx = 1\n```")])]) as server:
        client = OpenAIClient(base_url=server.base_url, model="m", timeout_s=10)
        coder = LLMCoder(Agent(client, "m", temperature=0.5, max_tokens=512), DeviceFacts(name="cpu"))
        asyncio.run(coder.crossover(task, Scored(parent, ok_result(1.0)), [related]))
        prompt = server.requests[0]["messages"][-1]["content"]
    assert "written for the related operator `gelu_tanh` (speedup 1.70x there)" in prompt


def _slow_seed() -> Candidate:
    """The relu seed with blocks of 64: 16x the programs of its usual 1024, so that under the interpreter the usual
    seed is ~16x faster; a tuner neighbour (2x the block) is not beyond the noise a loaded 2-core machine puts on
    the reference's microsecond calls, and a search names a new best only beyond it (`evaluator.measure.speedup_noise`)."""
    source = SEED.read_text()
    assert "BLOCK_SIZE=1024" in source
    return Candidate.from_source(source.replace("BLOCK_SIZE=1024", "BLOCK_SIZE=64"), origin="seed")


class _UsualBlocks:
    """Proposes the relu seed as shipped (blocks of 1024), which the first run should keep as its best."""

    async def propose(self, task, parents, inspirations, n):
        return [load_candidate(SEED)]


@pytest.mark.slow
def test_a_second_run_starts_from_the_first_runs_best_and_says_so(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    task = load_task(TASK)
    runner = LocalRunner(workers=2)
    try:
        first = start_run(store, task, _slow_seed(), RunConfig(), Budget(4),
                          use_archive=True)
        assert first.config["archive"] == {"enabled": True, "seeds": [], "inspirations": []}
        best_first = Search(store, first.id, task, Proposing(_UsualBlocks()), runner,
                            SearchSettings(FAST, Budget(2))).run().best
        assert best_first.candidate_id != 1, "the usual 1024-element blocks did not beat blocks of 64"
        second = start_run(store, task, _slow_seed(), RunConfig(), Budget(3), use_archive=True)
        [offered] = second.config["archive"]["seeds"]
        assert offered["candidate_id"] == best_first.candidate_id and offered["run_id"] == first.id
        starting = [sc.candidate.id for sc in store.history(second.id)]  # the seed and the archived best, queued
        assert starting == [1, best_first.candidate_id]
        Search(store, second.id, task, Proposing(TuneProposer(seed=2), oversample=4), runner,
               SearchSettings(FAST, Budget(3))).run()
        report = run_report(store, second.id)
        assert any(m.candidate_id == best_first.candidate_id for m, _ in report.drew_on_archive)
        assert any(f"#{best_first.candidate_id}" in line for line in report.archive_lines())
        alone = start_run(store, task, _slow_seed(), RunConfig(), Budget(3))
        assert alone.config["archive"] == {"enabled": False}
        assert [sc.candidate.id for sc in store.history(alone.id)] == [1]
    finally:
        runner.close()
        store.close()
