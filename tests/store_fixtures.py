"""Fixtures shared by the store tests: one database per test, on SQLite and (when configured) PostgreSQL.

PostgreSQL tests read the server's URL from $OPFORGE_TEST_PG_URL and are skipped when it is unset. Each test gets a
fresh schema (selected through the connection's search_path) that is dropped afterwards, so tests can run repeatedly
and side by side.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from types import MappingProxyType
from typing import Iterator
from urllib.parse import quote

import pytest

from evaluator.result import DeviceInfo, EvalResult, Status, Timing
from evaluator.task import Task, task_from_source
from store import Store, get_store

PG_ENV = "OPFORGE_TEST_PG_URL"
PG_SKIP_REASON = f"PostgreSQL store tests need ${PG_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test); CI sets it"

H100 = DeviceInfo(kind="cuda", name="NVIDIA H100 80GB HBM3", driver="560.35", torch_version="2.11.0",
                  triton_version="3.6.0", cuda_version="12.8")
CPU = DeviceInfo(kind="cpu", name="cpu", interpreted=True, torch_version="2.11.0", triton_version="3.6.0")


def pg_base_url() -> str | None:
    return os.environ.get(PG_ENV) or None


def pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


def _pg_admin(base: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(sql)


@pytest.fixture
def pg_url() -> Iterator[str]:
    base = pg_base_url()
    if base is None:
        pytest.skip(PG_SKIP_REASON)
    schema = f"opforge_test_{uuid.uuid4().hex[:12]}"
    _pg_admin(base, f'CREATE SCHEMA "{schema}"')
    try:
        yield pg_schema_url(base, schema)
    finally:
        _pg_admin(base, f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def sqlite_url(tmp_path) -> str:  # noqa: ANN001 - pytest's tmp_path
    return f"sqlite:///{tmp_path / 'opforge.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request) -> str:  # noqa: ANN001 - pytest's request
    """A URL for an empty database, once per backend."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = get_store(db_url)
    try:
        yield s
    finally:
        s.close()


def make_task(name: str = "softmax", body: str = "") -> Task:
    source = (
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.softmax(-1)\n\n"
        f"def get_inputs():\n    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n{body}"
    )
    return task_from_source(source, name=name)


def ok_result(speedup: float, device: DeviceInfo = H100, reference_ms: float = 2.0) -> EvalResult:
    return EvalResult(
        status=Status.OK,
        reason="correct and timed",
        candidate_ms=Timing(median_ms=reference_ms / speedup, iqr_ms=0.01, reps=50),
        reference_ms=Timing(median_ms=reference_ms, iqr_ms=0.02, reps=50),
        device=device,
    )


def failed_result(status: Status = Status.INCORRECT, device: DeviceInfo = H100) -> EvalResult:
    return EvalResult(status=status, reason=f"the candidate's verdict is {status.value}", device=device, log="tail")


_UNLIKE_DEFAULTS: dict[str, object] = {
    "status": Status.OK,
    "reason": "correct on 3 trials; 1.7x faster than the reference",
    # Every Timing field set too (`se_ms` included), so a timing field the store drops fails the round trip.
    "candidate_ms": Timing(median_ms=0.1234567890123456, iqr_ms=0.0012345678901234, reps=731,
                           se_ms=0.0001234567890123),
    "reference_ms": Timing(median_ms=0.2098765432109876, iqr_ms=0.0023456789012345, reps=402,
                           se_ms=0.0002345678901234),
    "compiled_reference_ms": Timing(median_ms=0.1876543210987654, iqr_ms=0.0034567890123456, reps=313,
                                    se_ms=0.0003456789012345),
    "max_abs_error": 1.1920928955078125e-07,
    "max_rel_error": 3.0517578125e-05,
    "peak_memory_bytes": 17_179_869_184 + 12_345,
    "reference_peak_memory_bytes": 34_359_738_368 + 678,
    "energy_j": 0.000123456789,
    "reference_energy_j": 0.000246913578,
    "power_w": 412.3456789,
    "profile": MappingProxyType({"dram__throughput.avg.pct_of_peak": 87.25, "sm__warps_active.avg": 0.5}),
    "device": H100,
    "backend": "triton",
    "log": "line one\nline two: ünïcödé ✓\n",
    "suspicious": True,
    "trials": ({"seed": 1, "shape": [8, 8], "max_abs_error": 1e-7}, {"seed": 2, "shape": [16, 8], "ok": True}),
    "torch_rule": "kernels-do-the-work",
    "torch_share": 0.3333333333333333,
}


def full_result() -> EvalResult:
    """Every EvalResult field set to a value unlike its default, with floats that do not round-trip by accident.

    Built from `dataclasses.fields(EvalResult)`: a field added to the verdict without a value here fails every test
    that uses this fixture, so the store's round-trip test covers each field the day it is added."""
    values = {}
    for f in dataclasses.fields(EvalResult):
        if f.name not in _UNLIKE_DEFAULTS:
            raise AssertionError(f"tests/store_fixtures.py: EvalResult.{f.name} has no value in _UNLIKE_DEFAULTS; "
                                 "add one unlike its default so the store round-trip test covers it")
        value = _UNLIKE_DEFAULTS[f.name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        assert value != default, f"_UNLIKE_DEFAULTS[{f.name!r}] equals EvalResult's default"
        values[f.name] = value
    return EvalResult(**values)  # type: ignore[arg-type]
