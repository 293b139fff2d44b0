"""A task submitted over HTTP: the uploads checked, then the job queued exactly as `opforge submit` queues it.

Everything is checked before the first write — size, UTF-8, Python syntax, the task's `Model`/`get_inputs`/
`get_init_inputs` (evaluator.task.task_from_source), the seed kernel's `ModelNew`, the run's numbers, coder and
backend — by the typed request `opforge submit` builds too (`opforge.run.request.RunRequest`, planned by
`plan_run`; its sentences name the form's fields); then `queue_job` does what `opforge submit` does: `start_run`,
then `Store.submit_job`, marking the run failed if the job cannot be queued. Any refusal is a `SubmissionError`
with an HTTP status and one sentence.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evaluator import TaskError
from evaluator.task import task_from_source
from opforge.errors import UsageError
from opforge.run.plan import RunPlan, plan_run, queue_run, seed_source_problem
from opforge.run.proposers import resolve_coder
from opforge.run.request import LLMRequest, RunRequest
from opforge.run.search import SearchError
from store import JobRecord, Store, StoreError

MAX_FILE_BYTES = 256 * 1024
NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
# The request's fields as a submission names them (error sentences say these, not the CLI's flags).
FORM_NAMES = {"seed_kernel": "a seed kernel upload", "model": "a model (the model field)", "budget": "the budget",
              "timing_s": "timing_s", "time_limit_s": "time_limit_s", "worker_s": "worker_s", "max_usd": "max_usd",
              "backend": "backend", "coder": "coder", "from_scratch": "from_scratch",
              "prices": "a price table (set $OPFORGE_LLM_PRICES where the server runs)",
              "base_url": "an endpoint (set $OPFORGE_LLM_BASE_URL where the server runs)"}


class SubmissionError(Exception):
    """A submission refused: `status` is the HTTP status, the message one sentence saying what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Upload:
    filename: str
    data: bytes


@dataclass(frozen=True, slots=True)
class SubmitOptions:
    """The run's settings a submission may choose (the rest are `opforge submit`'s defaults)."""

    budget: int | None = None
    priority: int = 0
    coder: str = "auto"
    backend: str = "auto"
    model: str | None = None
    timing_s: float | None = None
    time_limit_s: float | None = None
    worker_s: float | None = None
    max_usd: float | None = None
    no_archive: bool = False

    def request(self, task_path: str, seed_path: str | None) -> RunRequest:
        """The same request `opforge submit TASK` builds from its flags."""
        return RunRequest(task=task_path, coder=self.coder, backend=self.backend, seed_kernel=seed_path,
                          budget=self.budget, timing_s=self.timing_s, time_limit_s=self.time_limit_s,
                          worker_s=self.worker_s, use_archive=not self.no_archive,
                          llm=LLMRequest(model=self.model, max_usd=self.max_usd))


@dataclass(frozen=True, slots=True)
class Submitted:
    job: JobRecord
    task: str
    budget: int

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job.id, "run_id": self.job.run_id, "task": self.task, "state": self.job.state.value,
                "priority": self.job.priority, "budget": self.budget}


def task_name(filename: str) -> str:
    """The task's name from the uploaded file's name (`relu.py` -> relu), as `opforge submit` takes the file's stem."""
    stem = Path(filename.replace("\\", "/")).name.removesuffix(".py")
    stem = NAME_CHARS.sub("_", stem).strip("_")[:64]
    return stem or "task"


def read_text(upload: Upload, what: str, limit_bytes: int = MAX_FILE_BYTES) -> str:
    label = upload.filename or what
    if len(upload.data) > limit_bytes:
        raise SubmissionError(413, f"{label}: the {what} is larger than {limit_bytes // 1024} KiB; upload a single "
                                   "Python file.")
    if not upload.data.strip():
        raise SubmissionError(422, f"{label}: the {what} is empty; upload a Python file.")
    try:
        return upload.data.decode("utf-8")
    except UnicodeDecodeError:
        raise SubmissionError(422, f"{label}: the {what} is not UTF-8 text; upload a Python source file.") from None


def check_task(upload: Upload, limit_bytes: int = MAX_FILE_BYTES) -> str:
    """The task's source, or a SubmissionError naming what is wrong with it."""
    source = read_text(upload, "task file", limit_bytes)
    try:
        task_from_source(source, name=task_name(upload.filename), path=upload.filename or "the task file")
    except TaskError as exc:
        raise SubmissionError(422, str(exc)) from None
    return source


def check_seed(upload: Upload, limit_bytes: int = MAX_FILE_BYTES) -> str:
    """The seed kernel's source: Python that defines `ModelNew` (the evaluator judges the rest)."""
    label = upload.filename or "the seed kernel"
    source = read_text(upload, "seed kernel", limit_bytes)
    problem = seed_source_problem(source, label)
    if problem:
        raise SubmissionError(422, problem)
    return source


def plan(task: Upload, seed: Upload | None, options: SubmitOptions,
         limit_bytes: int = MAX_FILE_BYTES) -> tuple[RunPlan, str]:
    """Check everything and plan the run as `opforge submit TASK [--seed-kernel SEED] ...` would; nothing written.
    Returns the plan and the task file's name as the job records it."""
    task_source = check_task(task, limit_bytes)
    seed_source = check_seed(seed, limit_bytes) if seed is not None else None
    name = task_name(task.filename)
    with tempfile.TemporaryDirectory(prefix="opforge-upload-") as tmp:
        folder = Path(tmp)
        task_path = folder / f"{name}.py"
        task_path.write_text(task_source, encoding="utf-8")
        seed_path = None
        if seed_source is not None:
            seed_path = folder / "seed.py"
            seed_path.write_text(seed_source, encoding="utf-8")
        if seed_source is None and resolve_coder(options.coder, options.model) != "llm":
            raise SubmissionError(422, "The offline tuner needs a starting kernel: upload a seed kernel (a Python "
                                       "file defining ModelNew), or choose the LLM coder.")
        try:
            planned = plan_run(options.request(str(task_path), None if seed_path is None else str(seed_path)),
                               FORM_NAMES)
        except UsageError as exc:  # a sentence about an uploaded file names it as uploaded, not by its temporary path
            raise SubmissionError(422, str(exc).replace(f"{folder}/", "")) from None
    # The temporary file is gone: the task is known by its name and source only (its path would mislead).
    return replace(planned, task=replace(planned.task, path=None)), task.filename or f"{name}.py"


def queue_job(store: Store, planned: RunPlan, label: str, options: SubmitOptions) -> Submitted:
    """What `opforge submit` does once its run is planned: record the task and the run, then queue the job."""
    try:
        job = queue_run(store, planned, label, options.priority, extra={"via": "http"})
    except (SearchError, TaskError) as exc:
        raise SubmissionError(422, str(exc)) from None
    except StoreError as exc:
        raise SubmissionError(503, str(exc)) from None
    return Submitted(job, planned.task.name, planned.budget.max_candidates)


def submit(store: Store, task: Upload, seed: Upload | None, options: SubmitOptions,
           limit_bytes: int = MAX_FILE_BYTES) -> Submitted:
    planned, label = plan(task, seed, options, limit_bytes)
    return queue_job(store, planned, label, options)
