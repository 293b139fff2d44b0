"""Server-side pages (no script): the queue with its submit form, a job, runs, a run, a candidate, the leaderboard.

Forms post normally; a write's form carries the server's token in a password field. Pages of a job or run still in
progress reload themselves every few seconds (<meta http-equiv="refresh">).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Path, Query, Request, UploadFile
from fastapi.responses import RedirectResponse, Response
from markupsafe import Markup

from opforge.run.config import BACKEND_CHOICES
from opforge.web import views
from opforge.web.api import MAX_ID, cancel, read_upload
from opforge.web.app import render
from opforge.web.auth import WriteRefused, check_token
from opforge.web.submission import SubmissionError, SubmitOptions, submit
from store import JobState, RunStatus

router = APIRouter(include_in_schema=False)
Id = Annotated[int, Path(ge=1, le=MAX_ID)]
REFRESH_S = 3
FORM_TOKEN = "the form's token field"


def _queue(request: Request, status_code: int = 200, error: str | None = None,
           form: dict[str, Any] | None = None) -> Response:
    return render(request, "queue.html", status_code, jobs=views.jobs(request.app.state.store), error=error,
                  form=form or {"budget": "20", "priority": "0", "timing_s": "", "coder": "auto", "backend": "auto",
                                     "model": ""},
                  backends=BACKEND_CHOICES,
                  states=[s.value for s in JobState])


@router.get("/")
def queue_page(request: Request) -> Response:
    return _queue(request)


def _number(form: dict[str, Any], field: str, kind: type, label: str) -> Any:
    text = str(form.get(field) or "").strip()
    if not text:
        return None
    try:
        value = kind(text)
    except ValueError:
        raise SubmissionError(422, f"{label} must be a {'whole ' if kind is int else ''}number, not {text!r}.") from None
    if kind is float and not math.isfinite(value):
        raise SubmissionError(422, f"{label} must be a finite number, not {text!r}.")
    return value


@router.post("/submit")
def submit_page(
    request: Request,
    task: Annotated[UploadFile | None, File()] = None,
    seed_kernel: Annotated[UploadFile | None, File()] = None,
    token: Annotated[str, Form()] = "",
    budget: Annotated[str, Form()] = "",
    priority: Annotated[str, Form()] = "",
    coder: Annotated[str, Form()] = "auto",
    backend: Annotated[str, Form()] = "auto",
    model: Annotated[str, Form()] = "",
    timing_s: Annotated[str, Form()] = "",
    no_archive: Annotated[str, Form()] = "",
) -> Response:
    """The queue page's form: on success, on to the new job's page; otherwise the form again, saying why."""
    form = {"budget": budget, "priority": priority, "coder": coder, "backend": backend, "model": model,
            "timing_s": timing_s}
    settings = request.app.state.settings
    try:
        check_token(settings.token, token, FORM_TOKEN)
        if coder not in ("auto", "tune", "llm"):
            raise SubmissionError(422, f"The coder must be auto, tune or llm, not {coder!r}.")
        if backend not in BACKEND_CHOICES:
            raise SubmissionError(422, f"The backend must be one of {', '.join(BACKEND_CHOICES)}, not {backend!r}.")
        budget_n, priority_n = _number(form, "budget", int, "The budget"), _number(form, "priority", int, "Priority")
        if priority_n is not None and not -1000 <= priority_n <= 1000:
            raise SubmissionError(422, f"Priority must be between -1000 and 1000, not {priority_n}.")
        if budget_n is not None and not 1 <= budget_n <= 100_000:
            raise SubmissionError(422, f"The budget must be between 1 and 100000 candidates, not {budget_n}.")
        options = SubmitOptions(budget=budget_n, priority=priority_n or 0, coder=coder, backend=backend,
                                model=model.strip() or None,
                                timing_s=_number(form, "timing_s", float, "The timing cap"),
                                no_archive=bool(no_archive))
        upload = read_upload(task, settings.max_file_bytes)
        if upload is None:
            raise SubmissionError(422, "Choose a task file to upload (a KernelBench task: Model, get_inputs, "
                                       "get_init_inputs).")
        done = submit(request.app.state.store, upload, read_upload(seed_kernel, settings.max_file_bytes), options,
                      settings.max_file_bytes)
    except (WriteRefused, SubmissionError) as exc:
        return _queue(request, exc.status, str(exc), form)
    return RedirectResponse(f"/jobs/{done.job.id}", status_code=303)


@router.get("/jobs/{job_id}")
def job_page(request: Request, job_id: Id) -> Response:
    return _job(request, job_id)


def _job(request: Request, job_id: int, error: str | None = None, status_code: int = 200) -> Response:
    job = views.job(request.app.state.store, job_id)
    return render(request, "job.html", status_code, job=job, error=error,
                  refresh_s=None if job["finished"] else REFRESH_S)


@router.post("/jobs/{job_id}/cancel")
def cancel_page(request: Request, job_id: Id, token: Annotated[str, Form()] = "") -> Response:
    try:
        check_token(request.app.state.settings.token, token, FORM_TOKEN)
        cancel(request.app.state.store, job_id)
    except WriteRefused as exc:
        return _job(request, job_id, str(exc), exc.status)
    except views.Conflict as exc:
        return _job(request, job_id, str(exc), 409)
    return RedirectResponse(f"/jobs/{job_id}", status_code=303)


@router.get("/runs")
def runs_page(request: Request) -> Response:
    return render(request, "runs.html", runs=views.runs(request.app.state.store))


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: Id) -> Response:
    store = request.app.state.store
    rep = views.report(store, run_id)
    plots = views.run_plots(store, rep)
    job_id = next((j.id for j in store.list_jobs() if j.run_id == run_id), None)
    best = [{"member": m, "facts": views.result_facts(m.result)} for m in rep.best]
    return render(request, "run.html", rep=rep, best=best, job_id=job_id, cost=rep.cost.text(),
                  archive=rep.archive_lines(), by_status=sorted(rep.by_status.items()),
                  plots={k: (Markup(v) if v is not None and k != "pareto_note" else v) for k, v in plots.items()},
                  refresh_s=REFRESH_S if rep.run.status is RunStatus.RUNNING else None)


@router.get("/candidates/{candidate_id}")
def candidate_page(request: Request, candidate_id: Id) -> Response:
    record, evaluations = views.candidate(request.app.state.store, candidate_id)
    return render(request, "candidate.html", c=record,
                  evaluations=[{"e": e, "facts": views.result_facts(e.result)} for e in evaluations])


@router.get("/leaderboard")
def leaderboard_page(request: Request, suite: Annotated[str | None, Query(max_length=200)] = None) -> Response:
    store = request.app.state.store
    return render(request, "leaderboard.html", rows=views.leaderboard_json(store, suite or None),
                  suites=views.suites(store), suite=suite or None)
