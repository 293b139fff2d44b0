"""A worker claims only the jobs its machine can run: a CPU-only worker never takes a GPU job and a GPU worker never a
native CPU one; `any` jobs (Triton checked under the interpreter) go to either. What a job needs comes from its run's
configuration and shows in `opforge jobs` and the dashboard."""

from __future__ import annotations

import dataclasses

import pytest
from store_fixtures import db_url, make_task, pg_url, sqlite_url, store  # noqa: F401 - fixtures

from evaluator.config import EvalConfig
from opforge.cli.program import main as opforge_main
from opforge.reports.jobs import job_rows
from opforge.run.capability import job_requirement, machine_has
from opforge.run.config import RunConfig
from store import Store, StoreError

LONG_S = 600.0


def _queue(store: Store, needs: list[str]) -> list[int]:
    task = store.add_task(make_task())
    return [store.submit_job(store.create_run(task.id, {}, {}).id, {"n": i}, requires=n).id
            for i, n in enumerate(needs)]


def test_claims_follow_what_the_machine_has(store):  # noqa: F811
    gpu_job, cpu_job, any_job, gpu_job_2 = _queue(store, ["gpu", "cpu", "any", "gpu"])
    cpu_claims = [store.claim_job("cpu-box", LONG_S, has=("cpu",)) for _ in range(3)]
    assert [j.id if j else None for j in cpu_claims] == [cpu_job, any_job, None]  # never a GPU job
    gpu_claims = [store.claim_job("gpu-box", LONG_S, has=("gpu",)) for _ in range(3)]
    assert [j.id if j else None for j in gpu_claims] == [gpu_job, gpu_job_2, None]
    assert store.get_job(gpu_job).requires == "gpu" and store.get_job(cpu_job).requires == "cpu"


def test_a_gpu_job_whose_worker_died_is_taken_over_only_by_a_gpu_worker(store):  # noqa: F811
    (job,) = _queue(store, ["gpu"])
    assert store.claim_job("gpu-1", 0.2, has=("gpu",)).id == job
    import time

    time.sleep(0.4)  # the lease runs out
    assert store.claim_job("cpu-box", LONG_S, has=("cpu",)) is None
    assert store.claim_job("gpu-2", LONG_S, has=("gpu",)).id == job


def test_an_unknown_requirement_is_refused(store):  # noqa: F811
    task = store.add_task(make_task())
    with pytest.raises(StoreError, match="A job requires one of any, cpu, gpu, not 'tpu'"):
        store.submit_job(store.create_run(task.id, {}, {}).id, requires="tpu")


@pytest.mark.parametrize("backend, device, cuda, needs", [
    ("cpp", "auto", False, "cpu"), ("cpp", "auto", True, "cpu"),
    ("cuda", "auto", False, "gpu"), ("triton", "cuda", False, "gpu"),
    ("triton", "auto", True, "gpu"),   # planned where a GPU is: meant for one
    ("triton", "auto", False, "any"),  # planned without one: interpreted checking runs anywhere
    ("triton", "cpu", True, "cpu"),
])
def test_a_runs_requirement_comes_from_its_configuration(backend, device, cuda, needs):
    config = RunConfig(backend=backend, eval=dataclasses.replace(EvalConfig(), device=device))
    assert job_requirement(config, cuda_available=cuda) == needs


def test_machine_has():
    assert machine_has(True) == ("gpu",) and machine_has(False) == ("cpu",)


def test_jobs_listing_and_rows_show_the_requirement(sqlite_url, capsys):  # noqa: F811
    from store import get_store

    s = get_store(sqlite_url)
    try:
        _queue(s, ["gpu", "cpu"])
        rows = job_rows(s, s.list_jobs())
        assert [r["requires"] for r in rows] == ["gpu", "cpu"]
    finally:
        s.close()
    assert opforge_main(["jobs", "--db", sqlite_url]) == 0
    out = capsys.readouterr().out
    header, *lines = [line for line in out.splitlines() if line.strip()][:3]
    assert "needs" in header.split() and lines[0].split()[4] == "gpu" and lines[1].split()[4] == "cpu"
