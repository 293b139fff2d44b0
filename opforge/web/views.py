"""What the pages and the API show, read from the store: jobs, runs (progress, best kernels, the search over time,
the Pareto front), candidates and the leaderboard, as JSON-ready dicts and inline SVG charts.

Unknown ids raise `NotFound`; any other store failure stays a StoreError (the app answers 503).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from evaluator.result import EvalResult
from opforge.reports import svg_plots
from opforge.reports.jobs import job_rows
from opforge.run.config import stored_backend
from opforge.display import format_bytes, format_speedup
from opforge.reports.html import candidate_rows
from opforge.reports.leaderboard import leaderboard
from opforge.run.population import Member
from opforge.reports.run_summary import RunReport, member_json, run_report
from store import CandidateRecord, EvaluationRecord, JobState, RunRecord, Store, UnknownId

T = TypeVar("T")
MAX_LISTED = 500  # newest jobs and runs on a page or in a list answer


class NotFound(Exception):
    """An id the store does not hold; the message says which (HTTP 404)."""


class Conflict(Exception):
    """A request the store's state does not allow now, e.g. cancelling a finished job (HTTP 409)."""


def found(fetch: Callable[[], T], what: str, ident: int) -> T:
    """`fetch()`, with the store's unknown id of this kind turned into NotFound (the store's sentence names the
    database: not shown)."""
    try:
        return fetch()
    except UnknownId as exc:
        if exc.what == what:
            raise NotFound(f"There is no {what} with id {ident} in this store.") from None
        raise


def clean(value: Any) -> Any:
    """JSON-safe: non-finite floats become None (JSON has no NaN), tuples lists, mappings dicts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


# --- jobs --------------------------------------------------------------------------------------------------------------

def jobs(store: Store, states: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The newest jobs first, as `opforge jobs --json` describes them."""
    records = store.list_jobs([JobState(s) for s in states] if states else None)[-MAX_LISTED:]
    return clean(list(reversed(job_rows(store, records))))


def job(store: Store, job_id: int) -> dict[str, Any]:
    record = found(lambda: store.get_job(job_id), "job", job_id)
    [row] = job_rows(store, [record])
    row["finished"] = record.state.finished
    return clean(row)


# --- runs --------------------------------------------------------------------------------------------------------------

def runs(store: Store) -> list[dict[str, Any]]:
    """The newest runs first, with their task, progress and best speedup."""
    names: dict[int, str] = {}
    out = []
    for run in reversed(store.list_runs()[-MAX_LISTED:]):
        if run.task_id not in names:
            names[run.task_id] = store.get_task(run.task_id).name
        totals = store.run_totals(run.id)
        out.append(_run_json(run, names[run.task_id], totals.evaluated, totals.best_speedup))
    return clean(out)


def _run_json(run: RunRecord, task: str, done: int, best: float | None) -> dict[str, Any]:
    return {"run_id": run.id, "task": task, "status": run.status.value, "evaluated": done,
            "budget": run.budget.get("max_candidates"), "best_speedup": best, "bench_id": run.bench_id,
            "coder": run.config.get("coder"), "backend": stored_backend(run.config),
            "created_at": run.created_at.isoformat(timespec="seconds"),
            "updated_at": run.updated_at.isoformat(timespec="seconds")}


def report(store: Store, run_id: int) -> RunReport:
    return found(lambda: run_report(store, run_id), "run", run_id)


def run_json(store: Store, run_id: int) -> dict[str, Any]:
    """`opforge show --json`'s object, with the run's job (if it was submitted to the queue)."""
    rep = report(store, run_id)
    out = rep.to_json()
    out["job_id"] = next((j.id for j in store.list_jobs() if j.run_id == run_id), None)
    return clean(out)


def best_kernel(store: Store, run_id: int) -> dict[str, Any]:
    """The run's fastest correct kernel: its source and the evaluation that measured it (and any other devices')."""
    rep = report(store, run_id)
    if rep.winner is None or rep.winner.candidate_id is None:
        raise NotFound(f"Run {run_id} has no correct kernel yet ({rep.done} of {rep.budget or '?'} evaluated); "
                       "try again when it has.")
    m = rep.winner
    return clean({"run_id": run_id, "task": rep.task_name, "candidate": member_json(m) | {"source": m.candidate.source},
                  "evaluation": m.result.to_json() if m.result is not None else None,
                  "evaluations": [e.result.to_json() | {"evaluation_id": e.id, "run_id": e.run_id}
                                  for e in store.evaluations_of(m.candidate_id)]})


def candidate(store: Store, candidate_id: int) -> tuple[CandidateRecord, list[EvaluationRecord]]:
    """A candidate and its verdicts, one per device it was measured on."""
    return found(lambda: store.get_candidate(candidate_id), "candidate", candidate_id), store.evaluations_of(candidate_id)


def candidate_json(store: Store, candidate_id: int) -> dict[str, Any]:
    c, records = candidate(store, candidate_id)
    evaluations = [e.result.to_json() | {"evaluation_id": e.id, "run_id": e.run_id,
                                         "created_at": e.created_at.isoformat(timespec="seconds")} for e in records]
    return clean({"candidate_id": c.id, "task_id": c.task_id, "run_id": c.run_id, "digest": c.digest,
                  "origin": c.origin, "note": c.note, "parents": list(c.parents), "generation": c.generation,
                  "island": c.island, "created_at": c.created_at.isoformat(timespec="seconds"), "source": c.source,
                  "evaluations": evaluations})


# --- a run's charts ----------------------------------------------------------------------------------------------------

def run_plots(store: Store, rep: RunReport) -> dict[str, str | None]:
    """The search over time (each evaluation, and the best so far) and the Pareto front of the correct kernels."""
    rows = candidate_rows(store.history(rep.run.id))
    done = sorted((r for r in rows if r["evaluation_number"] is not None), key=lambda r: r["evaluation_number"])
    progress = svg_plots.progress_chart(
        [svg_plots.Point(r["evaluation_number"], r["speedup"], f"#{r['candidate_id']} {r['status']} "
                         f"{format_speedup(r['speedup'])}: {r['origin']}", r["status"]) for r in done],
        title="the search over time: speedup of each evaluation, and the best so far")
    return {"progress": progress, **pareto_plot(rep.pareto, [m for m in rep.best])}


def pareto_plot(front: Sequence[Member], best: Sequence[Member]) -> dict[str, str | None]:
    """Speed against energy (where metered, on GPUs), else against peak memory; None and a note when neither was."""
    if not best:
        return {"pareto": None, "pareto_note": "No correct kernel yet: the Pareto front is empty."}
    for attr, label, scale, unit in (("energy_j", "energy per call (mJ)", 1e3, " mJ"),
                                     ("peak_memory_bytes", "peak memory (MiB)", 1 / 2**20, " MiB")):
        pts = [m for m in {id(m): m for m in [*best, *front]}.values() if getattr(m, attr) is not None and m.speedup]
        if not pts:
            continue
        on_front = {id(m) for m in front}
        series = {name: [svg_plots.Point(getattr(m, attr) * scale, m.speedup,
                                         f"#{m.candidate_id} {format_speedup(m.speedup)}, "
                                         f"{getattr(m, attr) * scale:.4g}{unit}") for m in pts if keep(m)]
                  for name, keep in (("on the front", lambda m: id(m) in on_front),
                                     ("dominated", lambda m: id(m) not in on_front))}
        line = sorted((getattr(m, attr) * scale, m.speedup) for m in front if getattr(m, attr) is not None)
        svg = svg_plots.scatter({k: v for k, v in series.items() if v}, title=f"Pareto front: speed vs {attr[:6]}",
                                x_label=label, y_label="speedup", front=line)
        return {"pareto": svg, "pareto_note": None}
    return {"pareto": None, "pareto_note": "Neither energy nor peak memory was measured on this device (energy comes "
                                           "from GPU power telemetry or a CPU's RAPL counters): the front is the "
                                           "fastest kernel alone."}


def result_facts(result: EvalResult | None) -> list[tuple[str, str]]:
    """An evaluation as label/value pairs for a page."""
    if result is None:
        return [("status", "not evaluated yet")]
    facts = [("status", result.status.value), ("reason", result.reason), ("speedup", format_speedup(result.speedup))]
    for label, t in (("kernel time", result.candidate_ms), ("reference time", result.reference_ms)):
        if t is not None:
            facts.append((label, f"{t.median_ms:.4g} ms median, IQR {t.iqr_ms:.3g} ms, {t.reps} repetitions"))
    if result.max_abs_error is not None:
        facts.append(("max abs error", f"{result.max_abs_error:.3g}"))
    if result.peak_memory_bytes is not None:
        facts.append(("peak memory", format_bytes(result.peak_memory_bytes)))
    if result.reference_peak_memory_bytes is not None:
        facts.append(("reference peak memory", format_bytes(result.reference_peak_memory_bytes)))
    if result.energy_j is not None:
        facts.append(("energy per call", f"{result.energy_j * 1e3:.4g} mJ"))
    facts.append(("device", result.device_label))
    if result.suspicious:
        facts.append(("suspicious", "yes: re-measured by the driver's clock"))
    return facts


# --- leaderboard -------------------------------------------------------------------------------------------------------

def leaderboard_json(store: Store, suite: str | None = None) -> list[dict[str, Any]]:
    return clean([row.to_json() for row in leaderboard(store, suite)])


def suites(store: Store) -> list[str]:
    return sorted({b.suite for b in store.list_benches()})
