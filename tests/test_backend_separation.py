"""CPU and GPU kernels never mix where they would be compared or reused: the archive seeds a run only with kernels of
its own backend (a native run is not seeded with an interpreted Triton kernel), verdicts stored before the backend was
recorded count as GPU ones, and the leaderboard keeps (device, backend) apart."""

from __future__ import annotations

import dataclasses

from store_fixtures import CPU, db_url, make_task, ok_result, pg_url, sqlite_url, store  # noqa: F401 - fixtures

from evaluator.candidate import Candidate
from evaluator.result import Status
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
    from evaluator.measure.task_work import TaskWork
    from opforge.reports.roofline import floor_ms, fraction

    work = TaskWork(flops=0.0, min_bytes=40_000_000)
    assert floor_ms(work, "CPU AMD EPYC", "cpp") is None  # no measured figures: never a guess
    assert floor_ms(work, "CPU AMD EPYC", "cpp", MeasuredRoofline(copy_bandwidth_gbps=20.0)) == 2.0
    assert floor_ms(work, "NVIDIA H100 80GB HBM3", "triton") == 40_000_000 / 3350e9 * 1e3
    assert floor_ms(work, "CPU AMD EPYC", "triton", MeasuredRoofline(copy_bandwidth_gbps=20.0)) is None  # interpreted
    assert floor_ms(None, "NVIDIA H100 80GB HBM3", "triton") is None
    assert fraction(2.0, 2.5) == 0.8 and fraction(None, 2.5) is None


def test_the_run_report_says_backend_device_and_roofline(store):  # noqa: F811
    from opforge.reports import html

    task = store.add_task(make_task())
    store.set_task_work(task.id, 0.0, 8_000_000, [])
    run = store.create_run(task.id, {"backend": "cpp"}, {"max_candidates": 1})
    _kernel(store, run.id, task.id, "native", 2.0, "cpp")  # 1.0 ms a call (ok_result: reference 2 ms)
    page = html.run_bundle(store, run.id, "opforge report").html
    assert "backend cpp (native C/C++ on the CPU), on " + CPU.name + "<" in page  # no "(Triton interpreter)": native
    assert "unknown (this machine's copy bandwidth and peak FLOP/s are not in the store)" in page
    store.set_device_peaks(CPU.name, copy_gbps=10.0, peak_gflops=500.0, threads=2)  # as `ensure_cpu_peaks` keeps them
    bundle = html.run_bundle(store, run.id, "opforge report")
    assert "80% of the task's roofline bound (0.8 ms)" in bundle.html
    assert bundle.data["run"]["kernels"]["roofline_fraction"] == 0.8

def test_the_dataset_tells_cpu_kernels_from_gpu_ones_and_reads_version_1(store, tmp_path):  # noqa: F811
    import json

    from opforge.export import dataset

    task_id, ids = _store_with_three_backends(store)
    records = {r["candidate_source"]: r for r in dataset.export_records(store)}
    assert records["# native\n"]["backend"] == "cpp" and records["# native\n"]["best_device"] == CPU.name
    assert records["# triton\n"]["backend"] == "triton"
    assert records["# before backends were kept\n"]["backend"] is None
    assert records["# native\n"]["evaluations"][0]["backend"] == "cpp"
    assert all(r["schema_version"] == dataset.SCHEMA_VERSION == 2 for r in records.values())

    old = {k: v for k, v in records["# native\n"].items() if k not in ("backend", "best_device")}
    old["schema_version"] = 1
    old["evaluations"] = [{k: v for k, v in e.items() if k != "backend"} for e in old["evaluations"]]
    path = tmp_path / "v1.jsonl"
    path.write_text(json.dumps(old) + "\n")
    (read,) = dataset.read_records(path)
    assert read["backend"] is None and read["best_device"] is None and read["evaluations"][0]["backend"] is None
    assert dataset.import_records(store, [read]).known == 1  # the same kernel: already in the store


def test_the_leaderboard_counts_a_runs_confirmed_best_not_its_lucky_verdict(store):  # noqa: F811
    """A bench's run whose search measured one kernel at 3.0x once, and whose re-measurements put it at 1.1x, scores
    the kernel the run reports (1.4x, confirmed), as `optimize` and the run report do; a kernel whose re-measurement
    came back wrong counts only where nothing else is correct."""
    from opforge.reports.leaderboard import leaderboard, reported_best

    task = store.add_task(make_task())
    bench = store.create_bench("tiny", "tune", {"backend": "cpp"})
    run = store.create_run(task.id, {}, {}, bench_id=bench.id)
    lucky = _kernel(store, run.id, task.id, "lucky", 3.0, "cpp")
    steady = _kernel(store, run.id, task.id, "steady", 1.5, "cpp")
    for cid, figures in ((lucky, (1.0, 1.2, 1.1)), (steady, (1.4, 1.5, 1.3))):
        for figure in figures:
            store.add_confirmation(run.id, cid, ok_result(figure, device=CPU))
    [row] = leaderboard(store, "tiny")
    assert row.tasks[0].raw_speedup is not None and abs(row.tasks[0].raw_speedup - 1.4) < 1e-9

    verdicts = {cid: dataclasses.replace(ok_result(s, device=CPU), backend="cpp")
                for cid, s in ((1, 3.0), (2, 1.5), (3, 1.2))}
    wrong = dataclasses.replace(ok_result(1.0, device=CPU), status=Status.INCORRECT)
    failed_first = [_record(1, wrong)]
    assert reported_best(verdicts, failed_first).speedup == 1.5  # unconfirmed beats a kernel found wrong on a re-run
    assert reported_best({1: verdicts[1]}, failed_first).speedup == 3.0  # ... which is kept when it is all there is
    assert reported_best(verdicts, []).speedup == 3.0  # no confirmation: the fastest verdict, as before


def _record(candidate_id: int, result):
    from datetime import datetime

    from store import ConfirmationRecord

    ref, cand = result.reference_ms, result.candidate_ms
    return ConfirmationRecord(0, 0, candidate_id, "cpu", result.status, result.reason, ref.median_ms, cand.median_ms,
                              result.speedup, datetime.now())
