"""Self-contained HTML reports of a run or of a suite's leaderboard, with the same data as CSV tables and JSON.

`run_bundle(store, run_id, ...)` and `suite_bundle(store, suite, ...)` read the store and return a `ReportBundle`: the
page (one HTML document, inline CSS and inline SVG charts from opforge/reports/svg_plots.py, no script, nothing fetched),
its tables (file name -> header and rows) and its JSON object. Writing them is the caller's business. The page is
rendered by Jinja2 with autoescape on, so every text from the store (task names, notes, reasons) is escaped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from agents.cpu_facts import measured_cpu_roofline
from opforge.reports import svg_plots
from opforge.display import format_bytes, format_speedup
from opforge.reports.leaderboard import FAST_P, LeaderboardRow, leaderboard
from opforge.reports.roofline import floor_ms, fraction, task_work_of
from opforge.reports.run_summary import run_report
from opforge.run.archive import run_backend
from store import ScoredCandidate, Store

TEMPLATE_DIR = Path(__file__).parent / "templates"
CANDIDATE_COLUMNS = ("evaluation_number", "candidate_id", "digest", "created_at", "generation", "island", "origin",
                     "parents", "note", "status", "reason", "speedup", "candidate_ms", "candidate_iqr_ms",
                     "reference_ms", "max_abs_error", "peak_memory_bytes", "reference_peak_memory_bytes", "energy_j",
                     "reference_energy_j", "device", "backend", "evaluated_at", "suspicious")
TASK_COLUMNS = ("suite", "agent", "device", "backend", "bench_id", "task", "run_id", "correct", "speedup",
                "raw_speedup", "floored", "roofline_fraction", "energy_ratio", "memory_ratio")
LEADERBOARD_COLUMNS = ("suite", "agent", "device", "backend", "bench_id", "attempted", "correct", "correctness_rate",
                       *(f"fast_{p:g}" for p in FAST_P), "geomean_speedup", "mean_roofline_fraction",
                       "mean_energy_ratio", "mean_memory_ratio",
                       "usd", "tokens", "worker_s", "usd_per_correct", "tokens_per_correct", "worker_minutes_per_correct")
NO_ENERGY = ("Energy was not measured on {devices}: opforge meters energy from GPU power telemetry (NVML) and, on a "
             "CPU, from RAPL's counters under /sys/class/powercap, which these evaluations did not have, so there is "
             "no speed vs energy chart here.")
NO_MEMORY = "Peak memory was not measured on {devices}, so there is no speed vs memory chart here."


@dataclass(frozen=True, slots=True)
class ReportBundle:
    html: str
    tables: Mapping[str, tuple[Sequence[str], list[dict[str, Any]]]]  # file name -> (columns, rows)
    data: dict[str, Any] = field(default_factory=dict)                 # report.json


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _energy_mj(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.4g} mJ"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(speedup=format_speedup, energy=_energy_mj, ratio=_ratio,
                       bytes=lambda n: "-" if n is None else format_bytes(n),
                       ms=lambda x: "-" if x is None else f"{x:.4g} ms",
                       pct=lambda x: "-" if x is None else f"{x:.0%}",
                       usd=lambda x: "-" if x is None else f"${x:.4f}",
                       num=lambda x: "-" if x is None else f"{x:.4g}")
    return env


_ENV = _environment()


def _device_list(labels: Sequence[str]) -> list[str]:
    return sorted({d for d in labels if d and d != "unknown"}) or ["unknown device"]


def _header(title: str, what: str, devices: list[str], command: str, store_url: str) -> dict[str, Any]:
    return {"title": title, "what": what, "devices": devices, "command": command, "store": store_url,
            "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


# --- one run ---------------------------------------------------------------------------------------------------------

def candidate_rows(history: Sequence[ScoredCandidate]) -> list[dict[str, Any]]:
    """One row per candidate, in creation order; `evaluation_number` counts evaluations in the order they finished."""
    evaluated = sorted((sc for sc in history if sc.evaluation is not None),
                       key=lambda sc: (sc.evaluation.created_at, sc.evaluation.id))
    number = {sc.candidate.id: i for i, sc in enumerate(evaluated, 1)}
    rows = []
    for sc in history:
        c, ev, r = sc.candidate, sc.evaluation, sc.result
        rows.append({
            "evaluation_number": number.get(c.id), "candidate_id": c.id, "digest": c.digest,
            "created_at": c.created_at.isoformat(), "generation": c.generation, "island": c.island,
            "origin": c.origin, "parents": " ".join(c.parents), "note": c.note,
            "status": None if r is None else r.status.value, "reason": None if r is None else r.reason,
            "speedup": None if r is None else _finite(r.speedup),
            "candidate_ms": None if r is None or r.candidate_ms is None else _finite(r.candidate_ms.median_ms),
            "candidate_iqr_ms": None if r is None or r.candidate_ms is None else _finite(r.candidate_ms.iqr_ms),
            "reference_ms": None if r is None or r.reference_ms is None else _finite(r.reference_ms.median_ms),
            "max_abs_error": None if r is None else _finite(r.max_abs_error),
            "peak_memory_bytes": None if r is None else r.peak_memory_bytes,
            "reference_peak_memory_bytes": None if r is None else r.reference_peak_memory_bytes,
            "energy_j": None if r is None else _finite(r.energy_j),
            "reference_energy_j": None if r is None else _finite(r.reference_energy_j),
            "device": None if r is None else r.device_label,
            "backend": None if r is None else r.backend,
            "evaluated_at": None if ev is None else ev.created_at.isoformat(),
            "suspicious": None if r is None else r.suspicious,
        })
    return rows


def _front_2d(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """(cost, speedup) pairs that no other pair beats on both (less energy or memory, more speed)."""
    front: list[tuple[float, float]] = []
    for e, s in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or s > front[-1][1]:
            front.append((e, s))
    return front


def _run_plots(rows: list[dict[str, Any]], devices: list[str]) -> dict[str, Any]:
    done = sorted((r for r in rows if r["evaluation_number"] is not None), key=lambda r: r["evaluation_number"])
    progress = [svg_plots.Point(r["evaluation_number"], r["speedup"], f"#{r['candidate_id']} {r['status']} "
                                f"{format_speedup(r['speedup'])}: {r['origin']}", r["status"]) for r in done]
    correct = [r for r in rows if r["status"] == "ok" and r["speedup"]]
    plots: dict[str, Any] = {
        "progress": svg_plots.progress_chart(progress, title="search progress: best speedup so far"),
        "distribution": svg_plots.histogram({"correct candidates": [r["speedup"] for r in correct]},
                                            title="speedup of correct candidates"),
        "pareto": None, "pareto_note": None, **_memory_plot(correct, devices)}
    measured = [r for r in correct if r["energy_j"] is not None]
    if not correct:
        plots["pareto_note"] = "No correct candidate yet, so there is nothing to place on a speed vs energy chart."
    elif not measured:
        plots["pareto_note"] = NO_ENERGY.format(devices=", ".join(devices))
    else:
        mj = [(r["energy_j"] * 1e3, r["speedup"]) for r in measured]
        log_x = max(e for e, _ in mj) > 10 * min(e for e, _ in mj) > 0
        plots["pareto"] = svg_plots.scatter(
            {"correct candidates": [svg_plots.Point(e, s, f"#{r['candidate_id']} {format_speedup(s)}, {e:.4g} mJ")
                                    for (e, s), r in zip(mj, measured)]},
            title="speed vs energy", x_label="energy per call (mJ)", y_label="speedup", log_x=log_x,
            front=_front_2d(mj))
    return {k: Markup(v) if isinstance(v, str) and not k.endswith("_note") else v for k, v in plots.items()}


def _memory_plot(correct: list[dict[str, Any]], devices: list[str]) -> dict[str, Any]:
    """Speed vs peak memory of the correct candidates, the front ringed; the reference's peak as a note."""
    measured = [r for r in correct if r["peak_memory_bytes"] is not None]
    if not correct:
        return {"memory": None, "memory_note": "No correct candidate yet, so there is nothing to place on a speed vs "
                                               "memory chart."}
    if not measured:
        return {"memory": None, "memory_note": NO_MEMORY.format(devices=", ".join(devices))}
    mib = [(r["peak_memory_bytes"] / 2**20, r["speedup"]) for r in measured]
    positive = [m for m, _ in mib if m > 0]
    refs = sorted(r["reference_peak_memory_bytes"] for r in measured if r["reference_peak_memory_bytes"] is not None)
    svg = svg_plots.scatter(
        {"correct candidates": [svg_plots.Point(m, s, f"#{r['candidate_id']} {format_speedup(s)}, {m:.4g} MiB")
                                for (m, s), r in zip(mib, measured)]},
        title="speed vs peak memory", x_label="peak memory of a call (MiB)", y_label="speedup",
        log_x=bool(positive) and len(positive) == len(mib) and max(positive) > 10 * min(positive),
        front=_front_2d(mib))
    note = (f"The reference (PyTorch) took {refs[len(refs) // 2] / 2**20:.4g} MiB a call (median of its "
            f"{len(refs)} measurements)." if refs else None)
    return {"memory": svg, "memory_note": note}


def _kernels(store: Store, report: Any, devices: list[str]) -> dict[str, Any]:
    """Which kernels the run wrote and where they ran: its backend (as configured, else its best kernel's), the
    devices of its verdicts, and its best kernel's fraction of the task's roofline bound where that is known."""
    winner = report.winner
    result = winner.result if winner is not None else None
    backend = run_backend(report.run.config) or (result.backend if result is not None else None)
    bound = fraction_of = None
    if result is not None and winner.candidate_ms:
        work = task_work_of(store.get_task(report.run.task_id))
        cpu = measured_cpu_roofline(store, result.device.name)
        bound = floor_ms(work, result.device.name, result.backend or backend, cpu)
        fraction_of = fraction(bound, winner.candidate_ms)
    return {"backend": backend or "unknown", "devices": devices, "roofline_ms": _finite(bound),
            "roofline_fraction": _finite(fraction_of)}


def run_bundle(store: Store, run_id: int, command: str) -> ReportBundle:
    """Everything about one run; raises StoreError when the store has no such run."""
    report = run_report(store, run_id)
    history = store.history(run_id)
    rows = candidate_rows(history)
    devices = _device_list([r["device"] for r in rows if r["device"]])
    lineage, parent = [], None
    for m in report.lineage:
        lineage.append({"member": m, "parent": parent})
        parent = m.candidate_id
    header = _header(f"run {run_id}: {report.task_name}", f"optimisation run {run_id} of task {report.task_name}",
                     devices, command, store.url)
    summary = report.to_json()
    kernels = _kernels(store, report, devices)
    summary["kernels"] = kernels
    html = _ENV.get_template("run.html.j2").render(
        header=header, report=report, summary=summary, lineage=lineage, candidates=rows, kernels=kernels,
        config=json.dumps(summary["config"], sort_keys=True, indent=2),
        plots=_run_plots(rows, devices))
    data = {"kind": "run", **{k: v for k, v in header.items() if k != "title"}, "run": summary, "candidates": rows}
    return ReportBundle(html, {"candidates.csv": (CANDIDATE_COLUMNS, rows)}, data)


# --- a suite's leaderboard -------------------------------------------------------------------------------------------

def _label(row: LeaderboardRow, several_devices: bool) -> str:
    return f"{row.agent} ({row.backend}) on {row.device}" if several_devices else row.agent


def leaderboard_rows(rows: Sequence[LeaderboardRow]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        per = r.per_correct()
        out.append({"suite": r.suite, "agent": r.agent, "device": r.device, "backend": r.backend,
                    "bench_id": r.bench_id,
                    "attempted": r.attempted, "correct": r.correct, "correctness_rate": r.correctness_rate,
                    **{f"fast_{k}": v for k, v in r.fast_p.items()}, "geomean_speedup": _finite(r.geomean_speedup),
                    "mean_roofline_fraction": _finite(r.mean_roofline_fraction),
                    "mean_energy_ratio": r.mean_energy_ratio, "mean_memory_ratio": r.mean_memory_ratio,
                    "usd": r.usd, "tokens": r.tokens, "worker_s": r.worker_s, "usd_per_correct": per["usd"],
                    "tokens_per_correct": per["tokens"], "worker_minutes_per_correct": per["worker_minutes"]})
    return out


def task_rows(rows: Sequence[LeaderboardRow]) -> list[dict[str, Any]]:
    return [{"suite": r.suite, "agent": r.agent, "device": r.device, "backend": r.backend, "bench_id": r.bench_id,
             "task": t.task, "run_id": t.run_id, "correct": t.correct, "speedup": _finite(t.speedup),
             "raw_speedup": _finite(t.raw_speedup), "floored": t.floored,
             "roofline_fraction": _finite(t.roofline_fraction), "energy_ratio": t.energy_ratio,
             "memory_ratio": t.memory_ratio} for r in rows for t in r.tasks]


def _suite_plots(rows: Sequence[LeaderboardRow], labels: list[str], tasks: list[str],
                 devices: list[str]) -> dict[str, Any]:
    by_task = [{t.task: t for t in r.tasks} for r in rows]
    speedups = {lab: [(s[t].speedup if t in s else None) for t in tasks] for lab, s in zip(labels, by_task)}
    plots: dict[str, Any] = {
        "per_task": svg_plots.grouped_bars(tasks, speedups, title="speedup per task (best correct kernel)",
                                           missing="no correct kernel"),
        "distribution": svg_plots.histogram({lab: [t.speedup for t in r.tasks if t.correct and t.speedup]
                                             for lab, r in zip(labels, rows)}, title="speedup of the tasks' kernels"),
        "energy": None, "energy_note": None}
    energy = {lab: [svg_plots.Point(t.energy_ratio, t.speedup, f"{t.task}: {format_speedup(t.speedup)}, energy "
                                    f"{t.energy_ratio:.2f}x the reference's")
                    for t in r.tasks if t.correct and t.speedup and t.energy_ratio is not None]
              for lab, r in zip(labels, rows)}
    if any(energy.values()):
        ratios = [p.x for ps in energy.values() for p in ps]
        plots["energy"] = svg_plots.scatter(energy, title="speed vs energy per task",
                                            x_label="energy per call relative to the reference", y_label="speedup",
                                            log_x=max(ratios) > 10 * min(ratios) > 0, x_unit="x")
    else:
        plots["energy_note"] = NO_ENERGY.format(devices=", ".join(devices))
    return {k: Markup(v) if isinstance(v, str) and k != "energy_note" else v for k, v in plots.items()}


def suite_bundle(store: Store, suite: str, command: str) -> ReportBundle | None:
    """A suite's leaderboard (the newest bench of each agent and device); None when it has no bench with a task."""
    rows = leaderboard(store, suite)
    if not rows:
        return None
    several = len({(r.device, r.backend) for r in rows}) > 1
    labels = [_label(r, several) for r in rows]
    tasks = list(dict.fromkeys(t.task for r in rows for t in r.tasks))
    devices = _device_list([r.device for r in rows])
    header = _header(f"suite {suite}", f"leaderboard of suite {suite}: {len(rows)} agent configuration(s), "
                     f"{len(tasks)} task(s)", devices, command, store.url)
    board, per_task = leaderboard_rows(rows), task_rows(rows)
    cells = [{t.task: t for t in r.tasks} for r in rows]
    html = _ENV.get_template("suite.html.j2").render(
        header=header, rows=rows, labels=labels, board=board, tasks=tasks, cells=cells,
        fast_p=[f"{p:g}" for p in FAST_P], plots=_suite_plots(rows, labels, tasks, devices))
    data = {"kind": "suite", "suite": suite, **{k: v for k, v in header.items() if k != "title"},
            "rows": [r.to_json() for r in rows]}
    return ReportBundle(html, {"leaderboard.csv": (LEADERBOARD_COLUMNS, board), "tasks.csv": (TASK_COLUMNS, per_task)},
                        data)
