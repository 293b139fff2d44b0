"""CPU and GPU kernels never mix where they would be compared or reused: the archive seeds a run only with kernels of
its own backend (a native run is not seeded with an interpreted Triton kernel), verdicts stored before the backend was
recorded count as GPU ones, and the leaderboard keeps (device, backend) apart."""

from __future__ import annotations

import dataclasses

from store_fixtures import CPU, db_url, make_task, ok_result, pg_url, sqlite_url, store  # noqa: F401 - fixtures

from evaluator.candidate import Candidate
from opforge.run import archive
from store import Store


def _kernel(store: Store, run_id: int, task_id: int, tag: str, speedup: float, backend: str | None) -> int:
    record, _ = store.add_candidate(run_id, task_id, Candidate.from_source(f"# {tag}\n"), generation=0, island=0)
    store.add_result(record.id, run_id, dataclasses.replace(ok_result(speedup, device=CPU), backend=backend))
    return record.id


def _store_with_three_backends(store: Store) -> tuple[int, dict[str, int]]:
    task = store.add_task(make_task())
    run = store.create_run(task.id, {}, {})
    ids = {"cpp": _kernel(store, run.id, task.id, "native", 3.0, "cpp"),
           "triton": _kernel(store, run.id, task.id, "triton", 0.01, "triton"),
           "old": _kernel(store, run.id, task.id, "before backends were kept", 0.02, None)}
    return task.id, ids


def test_the_archive_offers_a_run_only_its_own_backends_kernels(store):  # noqa: F811
    task_id, ids = _store_with_three_backends(store)
    task = store.get_task(task_id)
    seeds = lambda backend: [e.candidate.id for e in archive.find(store, task, backend=backend).seeds]  # noqa: E731
    assert seeds("cpp") == [ids["cpp"]]
    assert seeds("triton") == [ids["old"]]  # the fastest GPU-side verdict; an unrecorded backend counts as GPU
    assert seeds(None) == [ids["cpp"]]      # no backend asked: the fastest of all, as before
    assert seeds("cuda") == [ids["old"]]


def test_the_run_backend_is_read_from_either_form_of_the_configuration():
    assert archive.run_backend({"backend": "cpp"}) == "cpp"
    assert archive.run_backend({"llm": {"backend": "cuda"}}) == "cuda"
    assert archive.run_backend({"coder": "tune"}) is None

    @dataclasses.dataclass(frozen=True)
    class Typed:
        backend: str = "triton"

    assert archive.run_backend(Typed()) == "triton"


def _bench(store: Store, task_id: int, agent: str, backend: str, speedup: float, config: dict) -> int:
    bench = store.create_bench("tiny", agent, config)
    run = store.create_run(task_id, {}, {}, bench_id=bench.id)
    _kernel(store, run.id, task_id, f"{backend} {speedup}", speedup, backend)
    return bench.id


def test_leaderboard_keeps_cpu_and_gpu_benches_of_one_agent_and_device_apart(store):  # noqa: F811
    """Before rows were keyed by backend, the newer bench (here the Triton one, interpreted on the same CPU) replaced
    the native one: same suite, agent label and device name."""
    from opforge.reports.leaderboard import leaderboard

    task = store.add_task(make_task())
    native = _bench(store, task.id, "tune", "cpp", 2.5, {})                     # older bench, backend from kernels
    triton = _bench(store, task.id, "tune", "triton", 0.01, {"backend": "triton"})  # newer, backend configured
    rows = leaderboard(store, "tiny")
    assert sorted((r.bench_id, r.backend, r.device) for r in rows) == [(native, "cpp", CPU.name),
                                                                      (triton, "triton", CPU.name)]
    assert [r.backend for r in rows] == ["cpp", "triton"]  # best geometric mean first
    assert rows[0].tasks[0].backend == "cpp" and rows[0].geomean_speedup == 2.5
    # A newer bench of the same (agent, device, backend) still replaces the older one.
    newer = _bench(store, task.id, "tune", "cpp", 1.5, {"backend": "cpp"})
    assert sorted(r.bench_id for r in leaderboard(store, "tiny")) == [triton, newer]


def test_roofline_bounds_come_from_the_right_table():
    from agents.cpu_facts import MeasuredRoofline
    from evaluator.task_work import TaskWork
    from opforge.reports.roofline import floor_ms, fraction

    work = TaskWork(flops=0.0, min_bytes=40_000_000)
    assert floor_ms(work, "CPU AMD EPYC", "cpp") is None  # no measured figures: never a guess
    assert floor_ms(work, "CPU AMD EPYC", "cpp", MeasuredRoofline(copy_bandwidth_gbps=20.0)) == 2.0
    assert floor_ms(work, "NVIDIA H100 80GB HBM3", "triton") == 40_000_000 / 3350e9 * 1e3
    assert floor_ms(None, "NVIDIA H100 80GB HBM3", "triton") is None
    assert fraction(2.0, 2.5) == 0.8 and fraction(None, 2.5) is None


def test_the_run_report_says_backend_device_and_roofline(store, monkeypatch):  # noqa: F811
    from agents.cpu_facts import MeasuredRoofline
    from opforge.reports import html

    task = store.add_task(make_task())
    store.set_task_work(task.id, 0.0, 8_000_000, [])
    run = store.create_run(task.id, {"backend": "cpp"}, {"max_candidates": 1})
    _kernel(store, run.id, task.id, "native", 2.0, "cpp")  # 1.0 ms a call (ok_result: reference 2 ms)
    page = html.run_bundle(store, run.id, "opforge report").html
    assert "backend cpp (native C/C++ on the CPU), on " + CPU.label in page
    assert "unknown (this machine's copy bandwidth and peak FLOP/s are not in the store)" in page
    monkeypatch.setattr(html, "measured_cpu_roofline", lambda _store, _device: MeasuredRoofline(copy_bandwidth_gbps=10.0))
    bundle = html.run_bundle(store, run.id, "opforge report")
    assert "80% of the task's roofline bound (0.8 ms)" in bundle.html
    assert bundle.data["run"]["kernels"]["roofline_fraction"] == 0.8
