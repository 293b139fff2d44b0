"""The JSON API under /api: submit a task file, read jobs, runs, candidates and the leaderboard, fetch a run's best
kernel with its evaluation, download exported packages. Reads are open; writes need `Authorization: Bearer TOKEN`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Path, Query, Request, UploadFile
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict

from opforge import __version__
from opforge.web import views
from opforge.web.auth import check_token
from opforge.web.downloads import export_zip
from opforge.web.submission import SubmitOptions, Upload, submit
from store import JobState, Store


class Problem(BaseModel):
    """Every refusal: one sentence; for a 422 of FastAPI's validation, the bad fields beside it."""
    detail: str
    errors: list[dict[str, Any]] | None = None


router = APIRouter(prefix="/api", tags=["api"], responses={422: {"model": Problem, "description": "invalid input"}})
bearer = HTTPBearer(auto_error=False, description="the server's $OPFORGE_TOKEN; needed for every write")

MAX_ID = 2**63 - 1
Id = Annotated[int, Path(ge=1, le=MAX_ID, description="an id the store gave out")]


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": Problem} for code in codes}


class Job(BaseModel):
    """A job of the queue and its run's progress (as `opforge jobs --json` prints it)."""
    model_config = ConfigDict(extra="allow")
    job_id: int
    state: str
    task: str
    priority: int
    worker: str | None
    run_id: int
    backend: str
    evaluated: int
    budget: int | None
    best_speedup: float | None
    run_status: str
    error: str


class JobList(BaseModel):
    jobs: list[Job]


class Submitted(BaseModel):
    job_id: int
    run_id: int
    task: str
    state: str
    priority: int
    budget: int


class Run(BaseModel):
    model_config = ConfigDict(extra="allow")
    run_id: int
    task: str
    status: str
    backend: str
    evaluated: int


class RunList(BaseModel):
    runs: list[Run]


class BestKernel(BaseModel):
    run_id: int
    task: str
    candidate: dict[str, Any]            # id, digest, speedup, origin, note, parents, ..., source
    evaluation: dict[str, Any] | None    # the verdict that made it the best (`opforge eval --json`'s shape)
    evaluations: list[dict[str, Any]]    # its verdicts on every device it was measured on


class Candidate(BaseModel):
    model_config = ConfigDict(extra="allow")
    candidate_id: int
    task_id: int
    digest: str
    source: str
    evaluations: list[dict[str, Any]]


class Leaderboard(BaseModel):
    suites: list[str]
    rows: list[dict[str, Any]]


class Health(BaseModel):
    status: str
    version: str
    submissions_enabled: bool


def store_of(request: Request) -> Store:
    return request.app.state.store


def require_token(request: Request,
                  credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    """401 without a bearer token, 403 with a wrong one, or for every write when the server has none."""
    given = credentials.credentials if credentials is not None else None
    check_token(request.app.state.settings.token, given)


@router.get("/health", response_model=Health, summary="whether the server is up and takes submissions")
def health(request: Request) -> dict[str, Any]:
    return {"status": "ok", "version": __version__, "submissions_enabled": request.app.state.settings.writes_enabled}


@router.get("/jobs", response_model=JobList, summary="the queue's jobs, newest first")
def list_jobs(request: Request, state: Annotated[list[JobState] | None, Query(
        description="only jobs in these states (repeatable)")] = None) -> dict[str, Any]:
    return {"jobs": views.jobs(store_of(request), [s.value for s in state] if state else None)}


@router.post("/jobs", status_code=201, response_model=Submitted, dependencies=[Depends(require_token)],
             # 400: a body that is no multipart form at all (Starlette's parser refuses it before any field is read)
             responses=_errors(400, 401, 403, 411, 413, 422, 503),
             summary="submit a task file: queue a job that optimises it, as `opforge submit` does")
def submit_job(
    request: Request,
    task: Annotated[UploadFile, File(description="a KernelBench task file: Model, get_inputs, get_init_inputs")],
    seed_kernel: Annotated[UploadFile | None, File(
        description="the starting kernel (a file defining ModelNew); needed unless the LLM coder starts")] = None,
    budget: Annotated[int | None, Form(ge=1, le=100_000, description="candidates to evaluate (default 20)")] = None,
    priority: Annotated[int, Form(ge=-1000, le=1000, description="higher runs first")] = 0,
    coder: Annotated[Literal["auto", "tune", "llm"], Form()] = "auto",
    backend: Annotated[Literal["auto", "triton", "cuda", "cpp"], Form(
        description="what the kernels are written in; auto: the seed kernel's, else triton with a GPU, cpp without")
    ] = "auto",
    model: Annotated[str | None, Form(max_length=200, description="the LLM coder's model")] = None,
    timing_s: Annotated[float | None, Form(gt=0, le=600, description="timing cap per side (s)")] = None,
    time_limit_s: Annotated[float | None, Form(gt=0, le=10**7, description="wall time per worker (s)")] = None,
    worker_s: Annotated[float | None, Form(gt=0, le=10**9, description=(
        "worker-time budget (s): submit to verdict per candidate, summed"))] = None,
    max_usd: Annotated[float | None, Form(gt=0, le=10**6, description="LLM spending limit (USD)")] = None,
    no_archive: Annotated[bool, Form(description="do not draw on earlier runs' kernels")] = False,
) -> dict[str, Any]:
    settings = request.app.state.settings
    options = SubmitOptions(budget=budget, priority=priority, coder=coder, backend=backend, model=model or None, timing_s=timing_s,
                            time_limit_s=time_limit_s, worker_s=worker_s, max_usd=max_usd, no_archive=no_archive)
    done = submit(store_of(request), read_upload(task, settings.max_file_bytes),
                  read_upload(seed_kernel, settings.max_file_bytes), options, settings.max_file_bytes)
    return done.to_json()


def read_upload(upload: UploadFile | None, limit_bytes: int) -> Upload | None:
    """The file's bytes (at most one more than the limit: enough to refuse it); None for an empty file field."""
    if upload is None or (not upload.filename and not upload.size):
        return None
    upload.file.seek(0)
    return Upload(upload.filename or "", upload.file.read(limit_bytes + 1))


@router.get("/jobs/{job_id}", response_model=Job, responses=_errors(404), summary="one job and its run's progress")
def get_job(request: Request, job_id: Id) -> dict[str, Any]:
    return views.job(store_of(request), job_id)


@router.post("/jobs/{job_id}/cancel", response_model=Job, dependencies=[Depends(require_token)],
             responses=_errors(401, 403, 404, 409), summary="cancel a queued or running job")
def cancel_job(request: Request, job_id: Id) -> dict[str, Any]:
    return cancel(store_of(request), job_id)


def cancel(store: Store, job_id: int) -> dict[str, Any]:
    """Cancel as `opforge cancel` does; a job that has already finished (done or failed) is a 409."""
    views.found(lambda: store.get_job(job_id), "job", job_id)  # an unknown id is a 404, not a 503
    after = store.cancel_job(job_id)
    if after.state is not JobState.CANCELLED:
        raise views.Conflict(f"Job {job_id} has already finished ({after.state.value}); there is nothing to cancel.")
    return views.job(store, job_id)


@router.get("/runs", response_model=RunList, summary="the store's runs, newest first")
def list_runs(request: Request) -> dict[str, Any]:
    return {"runs": views.runs(store_of(request))}


@router.get("/runs/{run_id}", response_model=Run, responses=_errors(404),
            summary="a run: progress, best candidates, Pareto front, lineage, cost (as `opforge show --json`)")
def get_run(request: Request, run_id: Id) -> dict[str, Any]:
    return views.run_json(store_of(request), run_id)


@router.get("/runs/{run_id}/best", response_model=BestKernel, responses=_errors(404),
            summary="the run's fastest correct kernel: its source and its evaluation")
def best_kernel(request: Request, run_id: Id) -> dict[str, Any]:
    return views.best_kernel(store_of(request), run_id)


@router.get("/candidates/{candidate_id}", response_model=Candidate, responses=_errors(404),
            summary="a candidate kernel: its source and its evaluations")
def get_candidate(request: Request, candidate_id: Id) -> dict[str, Any]:
    return views.candidate_json(store_of(request), candidate_id)


@router.get("/leaderboard", response_model=Leaderboard, summary="the leaderboard (as `opforge leaderboard --json`)")
def get_leaderboard(request: Request, suite: Annotated[str | None, Query(max_length=200)] = None) -> dict[str, Any]:
    store = store_of(request)
    return {"suites": views.suites(store), "rows": views.leaderboard_json(store, suite)}


@router.get("/export", response_class=Response, responses={
    200: {"content": {"application/zip": {}}, "description": "the package, zipped"}, **_errors(404, 409, 422)},
    summary="download the package `opforge export` makes of some runs' best kernels (or a suite's top bench)")
def export(request: Request,
           run_id: Annotated[list[Annotated[int, Query(ge=1, le=MAX_ID)]] | None, Query(
               description="runs whose best kernels to export (repeatable)")] = None,
           suite: Annotated[str | None, Query(max_length=200, description="instead: a suite's top bench")] = None,
           agent: Annotated[str | None, Query(max_length=200, description="with suite: this agent's bench")] = None,
           ) -> Response:
    store = store_of(request)
    for rid in dict.fromkeys(run_id or []):
        views.found(lambda: store.get_run(rid), "run", rid)  # an unknown run is a 404
    name, data = export_zip(store, run_id, suite, agent)
    return Response(data, media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})
