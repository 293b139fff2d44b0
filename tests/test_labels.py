"""Labels that say what ran: "(Triton interpreter)" only where Triton's interpreter ran the kernel (a native C kernel
on the same CPU ran natively), "OK" beside a large relative error says why it is within tolerance, and the
leaderboard names an agent that used the archive once (real SQLite, the real web app)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from store_fixtures import ok_result

from evaluator import Candidate, EvalResult, Status, load_task
from evaluator.result import DeviceInfo
from opforge.cli.commands.eval import summary
from opforge.run.bench import agent_label
from opforge.web import create_app
from store import Store, get_store

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
CPU = DeviceInfo(kind="cpu", name="AMD EPYC 7B13", interpreted=True)  # what device_info says of any CPU


def _on_cpu(backend: str | None, **changes: object) -> EvalResult:
    return dataclasses.replace(ok_result(1.5, device=CPU), backend=backend, **changes)  # type: ignore[arg-type]


def test_only_a_triton_kernel_is_labelled_interpreted():
    assert _on_cpu("cpp").device_label == "AMD EPYC 7B13" and not _on_cpu("cpp").interpreted
    assert _on_cpu("torch").device_label == "AMD EPYC 7B13"
    assert _on_cpu("triton").device_label == "AMD EPYC 7B13 (Triton interpreter)" and _on_cpu("triton").interpreted
    assert _on_cpu(None).interpreted  # a verdict from before backends were reported keeps the device's word


def test_eval_says_why_a_large_relative_error_is_ok():
    passing = summary(_on_cpu("cpp", max_abs_error=3e-5, max_rel_error=5.96e4), "k.py", "relu")
    assert "OK" in passing and "5.96e+04   (within tolerance: large only where the reference is near zero" in passing
    assert "Triton interpreter" not in passing
    small = summary(_on_cpu("cpp", max_abs_error=1e-7, max_rel_error=1e-6), "k.py", "relu")
    assert "within tolerance" not in small
    failing = dataclasses.replace(_on_cpu("cpp", max_abs_error=3.0, max_rel_error=5.96e4), status=Status.INCORRECT)
    assert "within tolerance" not in summary(failing, "k.py", "relu")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = get_store(f"sqlite:///{tmp_path / 'opforge.db'}")
    try:
        yield s
    finally:
        s.close()


def test_pages_label_a_native_kernel_by_its_backend_and_name_an_archive_agent_once(store: Store):
    config = {"coder": "tune", "backend": "cpp", "use_archive": True}
    bench = store.create_bench("tiny", agent_label(config), config)
    task = store.add_task(load_task(TASK))
    run = store.create_run(task.id, config, {"max_candidates": 1}, bench_id=bench.id)
    record, _ = store.add_candidate(run.id, task.id, Candidate.from_source(SEED.read_text(), origin="seed"))
    store.add_result(record.id, run.id, _on_cpu("cpp"))
    client = TestClient(create_app(store, token="t"))
    page = client.get("/leaderboard?suite=tiny").text
    assert "tune:cpp+archive" in page and "+archive +archive" not in page and "+archive+archive" not in page
    detail = client.get(f"/candidates/{record.id}").text
    assert "AMD EPYC 7B13" in detail and "Triton interpreter" not in detail
