"""`opforge serve`'s app against a real SQLite store: the OpenAPI schema and every route in it, open reads, writes
refused without the right token, bad uploads refused with a reason and nothing written, unknown ids as 404s, a
submission queued exactly as `opforge submit` queues it, a run's best kernel with its evaluation, escaped pages, and
(when schemathesis is installed) property-based calls of every operation checked against the schema.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from store_fixtures import failed_result, ok_result

from evaluator import Candidate, Status, load_task
from opforge.cli import main as opforge_main
from opforge.web import create_app
from store import JobState, Store, get_store

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
API_PATHS = {"/api/health", "/api/jobs", "/api/jobs/{job_id}", "/api/jobs/{job_id}/cancel", "/api/runs",
             "/api/runs/{run_id}", "/api/runs/{run_id}/best", "/api/candidates/{candidate_id}", "/api/leaderboard",
             "/api/export"}
WRITES = {("post", "/api/jobs"), ("post", "/api/jobs/{job_id}/cancel")}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = get_store(f"sqlite:///{tmp_path / 'opforge.db'}")
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def client(store: Store, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.delenv("OPFORGE_LLM_MODEL", raising=False)  # `--coder auto` means the tuner here
    return TestClient(create_app(store, token=TOKEN))


def _files(task: bytes | None = None, seed: bytes | None = None, task_name: str = "relu.py") -> dict[str, Any]:
    files = {"task": (task_name, TASK.read_bytes() if task is None else task, "text/x-python")}
    if seed is not False:  # False: no seed field at all
        files["seed_kernel"] = ("relu.seed.py", SEED.read_bytes() if seed is None else seed, "text/x-python")
    return files


def _submit(client: TestClient, **form: Any) -> dict[str, Any]:
    r = client.post("/api/jobs", files=_files(), data={"budget": "3", "timing_s": "0.2", "no_archive": "true", **form},
                    headers=AUTH)
    assert r.status_code == 201, r.text
    return r.json()


def _counts(store: Store) -> tuple[int, int, int]:
    """Runs, jobs and candidates in the store."""
    runs = store.list_runs()
    return len(runs), len(store.list_jobs()), sum(len(store.history(r.id)) for r in runs)


def _run_with_results(store: Store, note: str = "BLOCK_SIZE 1024->2048") -> dict[str, int]:
    """A run of relu with three candidates: the seed (1.5x), a faster child (2.5x) and an incorrect one."""
    task = store.add_task(load_task(TASK))
    run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 3})
    seed_src = SEED.read_text()
    seed = Candidate.from_source(seed_src, origin="seed")
    fast = Candidate.from_source(seed_src.replace("BLOCK_SIZE=1024", "BLOCK_SIZE=2048"), origin="tune",
                                 parents=(seed.digest,), note=note)
    wrong = Candidate.from_source(seed_src.replace("0.0)", "1.0)"), origin="tune", parents=(seed.digest,))
    ids = {}
    for name, cand, result in (("seed", seed, ok_result(1.5)), ("fast", fast, ok_result(2.5)),
                               ("wrong", wrong, failed_result(Status.INCORRECT))):
        record, _ = store.add_candidate(run.id, task.id, cand, generation=0 if name == "seed" else 1)
        store.enqueue(run.id, record.id)
        store.add_result(record.id, run.id, result)
        ids[name] = record.id
    return {"run_id": run.id, "task_id": task.id, **ids}


# --- the schema ------------------------------------------------------------------------------------------------------

def test_the_openapi_schema_describes_every_api_route_and_which_need_the_token(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert set(schema["paths"]) == API_PATHS  # the pages are not part of the API
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            secured = bool(op.get("security"))
            assert secured == ((method, path) in WRITES), (method, path)
            if secured:
                assert {"401", "403"} <= set(op["responses"])
    upload = schema["paths"]["/api/jobs"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in upload


def test_every_read_in_the_schema_answers_without_a_token(client: TestClient, store: Store) -> None:
    ids = _run_with_results(store)
    job = _submit(client)
    values = {"job_id": job["job_id"], "run_id": ids["run_id"], "candidate_id": ids["fast"]}
    schema = client.get("/openapi.json").json()
    reads = [(p, op) for p, ops in schema["paths"].items() for m, op in ops.items() if m == "get"]
    assert len(reads) == len(API_PATHS) - 1  # every path but the cancel has a GET
    for path, _ in reads:
        url = path.format(**values) + (f"?run_id={ids['run_id']}" if path == "/api/export" else "")
        r = client.get(url)
        assert r.status_code == 200, (url, r.text)
        assert r.headers["content-type"].startswith("application/zip" if path == "/api/export" else "application/json")
    for page in ("/", "/runs", f"/runs/{ids['run_id']}", f"/jobs/{job['job_id']}", f"/candidates/{ids['fast']}",
                 "/leaderboard"):
        r = client.get(page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), page
        assert "default-src 'none'" in r.headers["content-security-policy"]


# --- writes and the token ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("headers,status,says", [
    ({}, 401, "give the server's token"),
    ({"Authorization": "Basic dXNlcjpwYXNz"}, 401, "give the server's token"),
    ({"Authorization": "Bearer wrong"}, 403, "token is wrong"),
    ({"Authorization": f"Bearer {TOKEN}x"}, 403, "token is wrong"),
])
def test_writes_without_the_right_token_are_refused(client: TestClient, store: Store, headers: dict[str, str],
                                                    status: int, says: str) -> None:
    job = _submit(client)
    before = _counts(store)
    r = client.post("/api/jobs", files=_files(), headers=headers)
    assert r.status_code == status and says in r.json()["detail"]
    if status == 401:
        assert r.headers["www-authenticate"].startswith("Bearer")
    r = client.post(f"/api/jobs/{job['job_id']}/cancel", headers=headers)
    assert r.status_code == status
    assert _counts(store) == before and store.get_job(job["job_id"]).state is JobState.QUEUED
    # The page's form: the same rules, said on the page.
    given = headers.get("Authorization", "")
    r = client.post("/submit", files=_files(), data={"token": given[7:] if given.startswith("Bearer ") else ""})
    assert r.status_code == status and "text/html" in r.headers["content-type"]
    assert _counts(store) == before


def test_without_a_configured_token_every_write_is_refused(store: Store) -> None:
    client = TestClient(create_app(store, token=None))
    for headers in ({}, {"Authorization": "Bearer anything"}, {"Authorization": "Bearer "}):
        r = client.post("/api/jobs", files=_files(), headers=headers)
        assert r.status_code == 403
        assert "set OPFORGE_TOKEN to enable submissions" in r.json()["detail"]
    r = client.post("/submit", files=_files(), data={"token": "anything"})
    assert r.status_code == 403 and "set OPFORGE_TOKEN to enable submissions" in r.text
    assert client.get("/api/health").json()["submissions_enabled"] is False
    assert "Submissions are disabled" in client.get("/").text
    assert _counts(store) == (0, 0, 0)


def test_a_missing_token_is_reported_before_a_bad_body(client: TestClient) -> None:
    r = client.post("/api/jobs", files={"nothing": ("x", b"x")})
    assert r.status_code == 401


# --- bad input -----------------------------------------------------------------------------------------------------------

BIG = b"# padding\n" * 30_000  # 300 KB: over the 256 KiB file limit, under the request limit


@pytest.mark.parametrize("files,form,status,says", [
    (_files(task=b"print('hello')\n"), {}, 422, "not a task file: it does not define Model, get_inputs"),
    (_files(task=b"import torch\nclass Model(:\n"), {}, 422, "syntax error on line 2"),
    (_files(task="# caf\xe9\n".encode("latin-1")), {}, 422, "not UTF-8"),
    (_files(task=b""), {}, 422, "is empty"),
    (_files(task=BIG), {}, 413, "larger than 256 KiB"),
    (_files(seed=b"x = 1\n"), {}, 422, "does not define class ModelNew"),
    (_files(seed=b"class ModelNew(:\n"), {}, 422, "syntax error"),
    (_files(seed=False), {}, 422, "upload a seed kernel"),
    (_files(), {"coder": "llm"}, 422, "needs a model"),
    (_files(), {"budget": "0"}, 422, "budget"),
    (_files(), {"timing_s": "-1"}, 422, "timing_s"),
    (_files(), {"coder": "magic"}, 422, "coder"),
    ({"seed_kernel": ("s.py", SEED.read_bytes())}, {}, 422, "task"),
])
def test_bad_submissions_get_a_reason_and_write_nothing(client: TestClient, store: Store, files: dict, form: dict,
                                                        status: int, says: str) -> None:
    r = client.post("/api/jobs", files=files, data=form, headers=AUTH)
    assert r.status_code == status, r.text
    assert says in json.dumps(r.json()["detail"])
    assert _counts(store) == (0, 0, 0) and store.list_jobs() == []


def test_an_oversized_request_is_refused_before_it_is_read(client: TestClient, store: Store) -> None:
    r = client.post("/api/jobs", files=_files(task=BIG * 4), headers=AUTH)
    assert r.status_code == 413 and "more than this server takes" in r.json()["detail"]

    def chunks() -> Iterator[bytes]:
        yield b"--x\r\n"

    r = client.post("/api/jobs", content=chunks(), headers={**AUTH, "Content-Type": "multipart/form-data; boundary=x"})
    assert r.status_code == 411 and "Content-Length" in r.json()["detail"]
    r = client.post("/submit", files=_files(task=BIG * 4), data={"token": TOKEN})
    assert r.status_code == 413 and "text/html" in r.headers["content-type"]
    assert _counts(store) == (0, 0, 0)


def test_unknown_ids_are_404s_with_a_reason(client: TestClient, store: Store) -> None:
    ids = _run_with_results(store)
    for url in ("/api/jobs/999", "/api/runs/999", "/api/runs/999/best", "/api/candidates/999",
                "/api/export?run_id=999", f"/api/export?run_id={ids['run_id']}&run_id=999"):
        r = client.get(url)
        assert r.status_code == 404, url
        assert "There is no" in r.json()["detail"] and "999" in r.json()["detail"]
    r = client.post("/api/jobs/999/cancel", headers=AUTH)
    assert r.status_code == 404 and r.json()["detail"] == "There is no job with id 999 in this store."
    for page in ("/jobs/999", "/runs/999", "/candidates/999", "/runs/not-a-number", "/no/such/page"):
        r = client.get(page)
        assert r.status_code == 404 and "text/html" in r.headers["content-type"], page
    assert client.get("/api/runs/0").status_code == 422
    assert client.get(f"/api/runs/{2**70}").status_code == 422


# --- submitting ----------------------------------------------------------------------------------------------------------

def test_a_submission_queues_the_job_and_run_that_opforge_submit_would(client: TestClient, store: Store,
                                                                        tmp_path: Path, capsys) -> None:  # noqa: ANN001
    job = _submit(client, priority="4")
    assert job["state"] == "queued" and job["task"] == "relu" and job["budget"] == 3 and job["priority"] == 4
    record = store.get_job(job["job_id"])
    run = store.get_run(record.run_id)
    history = store.history(run.id)
    assert [sc.candidate.source for sc in history] == [SEED.read_text()]  # the seed, queued first
    assert store.run_totals(run.id).queue == {"queued": 1}
    assert store.get_task(run.task_id).source == TASK.read_text()

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    code = opforge_main(["submit", str(TASK), "--seed-kernel", str(SEED), "--budget", "3", "--timing-s", "0.2",
                         "--no-archive", "--priority", "4", "--db", url, "--json"])
    assert code == 0
    cli = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    with get_store(url) as other:
        cli_job = other.get_job(cli["job_id"])
        cli_run = other.get_run(cli_job.run_id)
        assert dict(run.config) == dict(cli_run.config) and dict(run.budget) == dict(cli_run.budget)
        assert record.priority == cli_job.priority and record.state is cli_job.state
        assert {k: v for k, v in record.config.items() if k not in ("task", "via")} == \
               {k: v for k, v in cli_job.config.items() if k != "task"}
        assert record.config["via"] == "http" and record.config["task"] == "relu.py"
        assert [sc.candidate.digest for sc in other.history(cli_run.id)] == [sc.candidate.digest for sc in history]
        assert other.get_task(cli_run.task_id).digest == store.get_task(run.task_id).digest


def test_the_page_form_submits_and_shows_the_job(client: TestClient, store: Store) -> None:
    r = client.post("/submit", files={**_files(), "seed_kernel": ("", b"")}, data={"token": TOKEN, "budget": "2"})
    assert r.status_code == 422 and "upload a seed kernel" in r.text and 'value="2"' in r.text  # the form kept
    assert _counts(store) == (0, 0, 0)
    r = client.post("/submit", files=_files(), data={"token": TOKEN, "budget": "2", "priority": "", "timing_s": "0.2",
                                                      "no_archive": "1"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/jobs/")
    page = client.get(r.headers["location"])
    assert 'data-state="queued"' in page.text and "0/2 evaluated" in page.text
    assert 'http-equiv="refresh"' in page.text  # it reloads itself until the job ends
    assert "relu" in client.get("/").text


def test_cancelling_a_job_by_api_and_by_page(client: TestClient, store: Store) -> None:
    first, second = _submit(client), _submit(client)
    r = client.post(f"/api/jobs/{first['job_id']}/cancel", headers=AUTH)
    assert r.status_code == 200 and r.json()["state"] == "cancelled" and r.json()["run_status"] == "interrupted"
    r = client.post(f"/jobs/{second['job_id']}/cancel", data={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303 and store.get_job(second["job_id"]).state is JobState.CANCELLED
    third = _submit(client)
    claimed = store.claim_job("w1", 60)
    assert claimed is not None and claimed.id == third["job_id"]
    store.finish_job(claimed.id, "w1", JobState.DONE)
    r = client.post(f"/api/jobs/{third['job_id']}/cancel", headers=AUTH)
    assert r.status_code == 409 and "already finished (done)" in r.json()["detail"]
    r = client.post(f"/jobs/{third['job_id']}/cancel", data={"token": TOKEN})
    assert r.status_code == 409 and "already finished" in r.text


# --- reading results -------------------------------------------------------------------------------------------------------

def test_the_best_kernel_of_a_run_with_its_source_and_evaluation(client: TestClient, store: Store) -> None:
    ids = _run_with_results(store)
    best = client.get(f"/api/runs/{ids['run_id']}/best").json()
    assert best["candidate"]["candidate_id"] == ids["fast"]
    assert best["candidate"]["source"] == store.get_candidate(ids["fast"]).source
    assert best["evaluation"]["status"] == "ok" and best["evaluation"]["speedup"] == pytest.approx(2.5)
    assert best["evaluation"]["timing"]["reference"]["median_ms"] == pytest.approx(2.0)
    assert [e["device"]["name"] for e in best["evaluations"]] == ["NVIDIA H100 80GB HBM3"]

    run = client.get(f"/api/runs/{ids['run_id']}").json()
    assert run["evaluated"] == 3 and run["by_status"] == {"ok": 2, "incorrect": 1}
    assert [m["candidate_id"] for m in run["best"]] == [ids["fast"], ids["seed"]]
    assert [m["candidate_id"] for m in run["lineage"]] == [ids["seed"], ids["fast"]]

    page = client.get(f"/runs/{ids['run_id']}").text
    assert "2.50x" in page and "<svg" in page and "Pareto front" in page
    assert '<pre class="source">' in page

    empty = store.create_run(ids["task_id"], {"coder": "tune"}, {"max_candidates": 5})
    r = client.get(f"/api/runs/{empty.id}/best")
    assert r.status_code == 404 and "has no correct kernel yet" in r.json()["detail"]


def test_pages_escape_everything_from_the_store(client: TestClient, store: Store) -> None:
    evil = "<script>alert('x')</script>"
    ids = _run_with_results(store, note=evil)
    cand = Candidate.from_source(f"# {evil}\n</pre><b>bold</b>\n", origin="human", note=evil)
    record, _ = store.add_candidate(ids["run_id"], ids["task_id"], cand)
    store.add_result(record.id, ids["run_id"], ok_result(3.0))
    for page in (f"/runs/{ids['run_id']}", f"/candidates/{record.id}", f"/candidates/{ids['fast']}"):
        text = client.get(page).text
        assert evil not in text and "<b>bold</b>" not in text, page
        assert "&lt;script&gt;" in text, page


def test_downloading_an_exported_package(client: TestClient, store: Store) -> None:
    ids = _run_with_results(store)
    r = client.get(f"/api/export?run_id={ids['run_id']}")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    name = r.headers["content-disposition"].split('filename="')[1].rstrip('"')
    with zipfile.ZipFile(io.BytesIO(r.content)) as z:
        files = z.namelist()
        top = name.removesuffix(".zip")
        assert f"{top}/pyproject.toml" in files
        manifest = json.loads(z.read(f"{top}/opforge_relu/manifest.json"))
        kernels = [z.read(f).decode() for f in files if f.startswith(f"{top}/opforge_relu/kernels/")]
    assert manifest["package"] == "opforge_relu" and [op["name"] for op in manifest["operators"]] == ["relu"]
    assert store.get_candidate(ids["fast"]).source in kernels  # the fastest kernel, unchanged
    assert f'href="/api/export?run_id={ids["run_id"]}"' in client.get(f"/runs/{ids['run_id']}").text
    r = client.get("/api/export")
    assert r.status_code == 409 and "Name the runs to export" in r.json()["detail"]
    r = client.get("/api/export?suite=tiny")
    assert r.status_code == 409 and "no bench of suite" in r.json()["detail"]


def test_the_leaderboard_page_and_api(client: TestClient, store: Store) -> None:
    bench = store.create_bench("tiny", "tune", {})
    task = store.add_task(load_task(TASK))
    run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 1}, bench_id=bench.id)
    record, _ = store.add_candidate(run.id, task.id, Candidate.from_source(SEED.read_text(), origin="seed"))
    store.add_result(record.id, run.id, ok_result(2.0))
    data = client.get("/api/leaderboard?suite=tiny").json()
    assert data["suites"] == ["tiny"]
    [row] = data["rows"]
    assert row["agent"] == "tune" and row["correct"] == 1 and row["geomean_speedup"] == pytest.approx(2.0)
    page = client.get("/leaderboard?suite=tiny").text
    assert "2.00x" in page and "/api/export?suite=tiny" in page
    assert client.get("/api/leaderboard?suite=none").json()["rows"] == []


def test_opforge_serve_refuses_bad_flags(capsys) -> None:  # noqa: ANN001 - pytest's capsys
    assert opforge_main(["serve", "--port", "70000"]) == 2
    assert "--port must be between 0 and 65535" in capsys.readouterr().err


def test_a_malformed_multipart_body_is_a_documented_400(client: TestClient) -> None:
    """A body that is no multipart form (a generated case found it: text before the closing boundary) is refused by
    the form parser with 400, which the schema must declare, as it declares every other refusal."""
    boundary = "9cc651cd2c8d168349f50fede4c361ac"
    r = client.post("/api/jobs", content=f"--{boundary}\r\nFalse--{boundary}--\r\n".encode(),
                    headers={**AUTH, "Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert r.status_code == 400 and r.json()["detail"]
    declared = client.get("/openapi.json").json()["paths"]["/api/jobs"]["post"]["responses"]
    assert "400" in declared


# --- schemathesis: every operation called with generated input, answers checked against the schema --------------------

@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_every_operation_answers_as_its_schema_says(store: Store, mode: str) -> None:
    """Generated calls of every operation (schema-valid ones, then invalid ones): never a server error, every status,
    header, content type and body as the schema declares. Writes carry the token, so generated submissions reach the
    upload checks (and are refused there: a generated file is no task file)."""
    schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed (pip install -e .[dev])")
    from hypothesis import HealthCheck, given, settings

    ids = _run_with_results(store)
    store.submit_job(ids["run_id"], {"task": "relu.py"})
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(store, token=TOKEN))
    generation = schemathesis.GenerationMode(mode)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} == API_PATHS
    for op in operations:
        if mode == "negative" and not list(op.iter_parameters()) and not op.get_request_payload_content_types():
            continue  # nothing to get wrong in a call without parameters
        # A schema-valid upload is still refused (422) when the file is no task file: the schema cannot say that.
        excluded = [schemathesis.checks.positive_data_acceptance] if op.path == "/api/jobs" else []

        @given(case=op.as_strategy(generation))
        @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def call(case: Any) -> None:
            case.call_and_validate(headers=AUTH, excluded_checks=excluded)

        call()


def test_the_backend_is_chosen_in_the_form_and_shown_with_the_job(client: TestClient, store: Store) -> None:
    page = client.get("/")
    assert '<select id="backend" name="backend">' in page.text and '<option value="cpp"' in page.text
    job = _submit(client, backend="triton")  # the Triton seed kernel, said explicitly
    run = store.get_run(job["run_id"])
    assert run.config["backend"] == "triton" and store.get_job(job["job_id"]).config["backend"] == "triton"
    [listed] = client.get("/api/jobs").json()["jobs"]
    assert listed["backend"] == "triton"
    assert '<td>triton</td>' in client.get("/").text
    auto = _submit(client, priority="1")  # auto follows the uploaded seed kernel: Triton
    assert store.get_run(auto["run_id"]).config["backend"] == "triton"
    r = client.post("/api/jobs", files=_files(), data={"backend": "opencl"}, headers=AUTH)
    assert r.status_code == 422 and _counts(store)[1] == 2
