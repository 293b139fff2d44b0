"""Leaderboard benches: one agent configuration optimising every task of a suite, tasks in parallel on one pool.

A bench is a row in the store and one run per task (`runs.bench_id`), each an ordinary run with its own budget, so a
bench resumes like a run: tasks whose run is finished are kept, unfinished runs continue, missing ones start. The
evaluation pool is shared: each task's search gets a share of its capacity, so no task starves another.
"""

from __future__ import annotations

import fnmatch
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from benchmarks import kernelbench, list_suites, suite_tasks
from evaluator import Candidate, CandidateFileError, EvalConfig, EvalResult, Task, TaskError, load_candidate, load_task
from evaluator.driver.pool import Runner
from opforge.display import format_speedup
from opforge.run.bench_config import BenchConfig
from opforge.run.config import RunConfigError, resolve_backend
from opforge.run.confirm import confirmation_owed
from opforge.run.launch import confirm_policy, run_config, search_for_run
from opforge.run.peaks import ensure_cpu_peaks
from opforge.run.plan import builtin_seed
from opforge.run.search import Progress, SearchError
from opforge.run.start import Budget, ensure_task_work, start_run
from opforge.run.shapes import with_derived_shapes
from store import BenchRecord, RunRecord, RunStatus, Store, StoreError

FINISHED = (RunStatus.DONE, RunStatus.FAILED)


@dataclass(frozen=True, slots=True)
class BenchTask:
    path: Path
    label: str  # "tiny/softmax", "level1/19_ReLU"


def agent_label(config: Mapping[str, Any]) -> str:
    """A short name for an agent configuration: "tune", "llm:MODEL", "llm:MODEL+judge:J", "...:cuda" or "...:cpp", and
    "+archive" when it may draw on earlier runs' kernels (its score is then not its own alone)."""
    archive_mark = "+archive" if config.get("use_archive") else ""
    if config.get("coder", "tune") != "llm":
        return "tune" + _backend_mark(config) + archive_mark
    llm = config.get("llm", {})
    label = f"llm:{llm.get('model')}"
    judge = llm.get("judge_model")
    label += "+nojudge" if not judge else ("" if judge == llm.get("model") else f"+judge:{judge}")
    return label + _backend_mark(config) + archive_mark


def _backend_mark(config: Mapping[str, Any]) -> str:
    backend = config.get("backend") or config.get("llm", {}).get("backend") or "triton"  # older benches: in llm
    return "" if backend == "triton" else f":{backend}"


def bench_backend(choice: str, tasks: Sequence[BenchTask], coder: str, cuda_available: bool) -> str:
    """One backend for the whole bench (its leaderboard entry compares like with like). `auto` on a machine without
    a GPU is native CPU kernels where every task has a native seed kernel (or the LLM coder writes them), else the
    tasks' Triton seed kernels under the interpreter."""
    backend = resolve_backend(choice, cuda_available)
    if choice == "auto" and backend == "cpp" and coder != "llm":
        if any(builtin_seed(t.path, "cpp") is None for t in tasks):
            return "triton"
    return backend


def bench_tasks(suite: str, pattern: str | None = None) -> list[BenchTask]:
    """The suite's tasks (a built-in name, a folder, or a KernelBench checkout with level folders), filtered by a
    shell pattern on their labels or names (`soft*`, `level1/*`, `*matmul*`)."""
    if suite in list_suites():
        tasks = [BenchTask(p, f"{p.parent.name}/{p.stem}") for p in suite_tasks(suite)]  # "all" spans folders
    else:
        tasks = _folder_tasks(Path(suite).expanduser())
    if pattern:
        tasks = [t for t in tasks if fnmatch.fnmatch(t.label, pattern) or fnmatch.fnmatch(t.path.stem, pattern)]
        if not tasks:
            raise ValueError(f"No task of the suite {suite} matches {pattern!r}.")
    return tasks


def _folder_tasks(folder: Path) -> list[BenchTask]:
    if not folder.exists():
        raise ValueError(f"{folder!s} is neither a built-in suite ({', '.join(list_suites())}) nor a folder of task "
                         "files.")
    return [BenchTask(p.path, p.label) for p in kernelbench.problems(folder)]


class RunnerShare:
    """A slice of a shared runner's capacity for one task's search."""

    def __init__(self, runner: Runner, capacity: int) -> None:
        self._runner, self._capacity = runner, max(1, capacity)

    @property
    def capacity(self) -> int:
        return self._capacity

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        return self._runner.submit(task, candidate, cfg)

    def notices(self) -> list[str]:
        return getattr(self._runner, "notices", lambda: [])()

    def waiting_reason(self) -> str | None:
        return getattr(self._runner, "waiting_reason", lambda: None)()

    def close(self) -> None:  # the bench owns the runner
        pass


@dataclass
class TaskState:
    label: str
    run_id: int | None = None
    done: int = 0
    budget: int = 0
    best: float | None = None
    status: str = "waiting"  # waiting | running | done | failed
    note: str = ""


@dataclass
class BenchOutcome:
    bench: BenchRecord
    tasks: list[TaskState] = field(default_factory=list)


class BenchPrinter:
    """One progress line for the whole bench (rewritten on a terminal); a line per finished task otherwise."""

    def __init__(self, bench_id: int, states: Sequence[TaskState], stream: TextIO | None = None) -> None:
        self.bench_id, self.states = bench_id, states
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.usd = 0.0

    def line(self) -> str:
        finished = sum(s.status in ("done", "failed") for s in self.states)
        running = [s for s in self.states if s.status == "running"]
        solved = sum(s.best is not None for s in self.states)
        done = sum(s.done for s in self.states)
        budget = sum(s.budget for s in self.states)
        now = ", ".join(f"{s.label.rsplit('/', 1)[-1]} {s.done}/{s.budget}" for s in running[:3])
        return (f"bench {self.bench_id}: {finished}/{len(self.states)} tasks finished, {solved} solved | "
                f"{done}/{budget} evaluated | running: {now or '-'} | {time.monotonic() - self._started:.0f} s")

    def update(self, state: TaskState, p: Progress | None = None, finished: bool = False) -> None:
        with self._lock:
            if p is not None:
                state.done, state.best = p.done, p.best_speedup
            if self.tty:
                self.stream.write("\r\x1b[K" + self.line()[:160])
            elif finished:
                self.stream.write(f"{state.label}: {state.status}, best {format_speedup(state.best)} "
                                  f"({state.done}/{state.budget} evaluated){'; ' + state.note if state.note else ''}\n")
            self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def run_bench(store: Store, bench: BenchRecord, runner: Runner, parallel: int,
              llm_base_url: str | None = None, stream: TextIO | None = None) -> BenchOutcome:
    """Optimise every task of the bench that is not finished, `parallel` tasks at a time."""
    config = BenchConfig.from_json(bench.config, f"bench {bench.id}")
    tasks = bench_tasks(bench.suite, config.tasks)
    existing: dict[int, RunRecord] = {r.task_id: r for r in store.bench_runs(bench.id)}
    states = [TaskState(t.label, budget=config.budget_per_task) for t in tasks]
    printer = BenchPrinter(bench.id, states, stream)
    share = max(1, runner.capacity // max(1, parallel))
    store.set_bench_status(bench.id, RunStatus.RUNNING)
    ensure_cpu_peaks(store, config.device)  # the roofline of kernels timed on this CPU, once per device

    def one(t: BenchTask, state: TaskState) -> None:
        try:
            task = with_derived_shapes(load_task(t.path)).task  # a task without SHAPES: derived variants too
            record = ensure_task_work(store, store.add_task(task), task)
            run = existing.get(record.id)
            if run is None:
                run = _start(store, bench, config, task, t.path)
            state.run_id = run.id
            owed = confirmation_owed(store, run.id, confirm_policy(run_config(run)))  # stopped while re-measuring its fastest
            if run.status in FINISHED or (run.evaluated >= state.budget and not owed):
                state.status, state.done = run.status.value, run.evaluated
                state.best = store.run_totals(run.id).best_speedup
                return
            state.status = "running"
            printer.update(state)
            search = search_for_run(store, run, task, RunnerShare(runner, share), llm_base_url=llm_base_url,
                                    on_progress=lambda p: printer.update(state, p))
            outcome = search.run()
            state.status, state.note = outcome.status.value, outcome.stop_reason
        except (TaskError, SearchError, CandidateFileError, StoreError, RunConfigError) as exc:
            state.status, state.note = "failed", str(exc)
            if state.run_id is not None:
                store.set_run_status(state.run_id, RunStatus.FAILED)
        finally:
            if state.status == "running":  # an unexpected error: the bench goes on, the run can be resumed
                state.status = "interrupted"
            printer.update(state, finished=True)

    try:
        with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="opforge-bench") as pool:
            for f in [pool.submit(one, t, s) for t, s in zip(tasks, states)]:
                f.result()
    except KeyboardInterrupt:
        store.set_bench_status(bench.id, RunStatus.INTERRUPTED)
        raise
    finally:
        printer.finish()
    interrupted = any(s.status == "interrupted" for s in states)
    bench = store.set_bench_status(bench.id, RunStatus.INTERRUPTED if interrupted else RunStatus.DONE)
    return BenchOutcome(bench, states)


def _start(store: Store, bench: BenchRecord, bench_config: BenchConfig, task: Task, path: Path) -> RunRecord:
    config = bench_config.run
    budget = Budget(bench_config.budget_per_task, usd=bench_config.max_usd, tokens=bench_config.max_tokens)
    seed: Candidate | None = None
    from_scratch = config.llm is not None and config.llm.from_scratch
    seed_path = builtin_seed(path, config.backend)
    if seed_path is not None and not from_scratch:
        seed = load_candidate(seed_path, origin="seed")
    run = start_run(store, task, seed, config, budget, bench_id=bench.id, use_archive=bench_config.use_archive,
                    device=bench_config.device)
    if seed is None and config.coder != "llm":
        store.set_run_status(run.id, RunStatus.FAILED)
        raise SearchError(f"{task.label} has no seed kernel for the {config.backend} backend, and the offline tuner "
                          "cannot write one (use --coder llm).")
    return run
