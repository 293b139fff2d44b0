"""Rows to records and EvalResult to typed columns (JSON only for the device, the profile and the trials)."""

from __future__ import annotations

import math
from dataclasses import asdict
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Sequence

from evaluator.result import DeviceInfo, EvalResult, Status, Timing
from store.records import (
    BenchRecord,
    CandidateRecord,
    DevicePeaks,
    EvaluationRecord,
    JobRecord,
    JobState,
    LLMCallRecord,
    RunRecord,
    RunStatus,
    TaskRecord,
)
from store.rows import BenchRow, CandidateRow, DevicePeakRow, EvaluationRow, JobRow, LLMCallRow, RunRow, TaskRow


def aware(ts: datetime) -> datetime:
    """SQLite hands back naive timestamps; every timestamp the store writes is UTC."""
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def task_record(row: TaskRow) -> TaskRecord:
    return TaskRecord(row.id, row.name, row.source, row.digest, row.path, aware(row.created_at), row.flops,
                      row.min_bytes, None if row.ops is None else tuple(row.ops))


def bench_record(row: BenchRow) -> BenchRecord:
    return BenchRecord(row.id, row.suite, row.agent, MappingProxyType(dict(row.config)), RunStatus(row.status),
                       aware(row.created_at), aware(row.updated_at))


def run_record(row: RunRow) -> RunRecord:
    return RunRecord(
        id=row.id,
        task_id=row.task_id,
        bench_id=row.bench_id,
        status=RunStatus(row.status),
        config=MappingProxyType(dict(row.config)),
        budget=MappingProxyType(dict(row.budget)),
        evaluated=row.evaluated,
        worker_s=row.worker_s,
        cost_usd=row.cost_usd,
        tokens_in=row.tokens_in or 0,
        tokens_out=row.tokens_out or 0,
        wall_s=row.wall_s or 0.0,
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
    )



def _maybe_aware(ts: datetime | None) -> datetime | None:
    return None if ts is None else aware(ts)


def job_record(row: JobRow) -> JobRecord:
    return JobRecord(
        id=row.id,
        task_id=row.task_id,
        run_id=row.run_id,
        state=JobState(row.state),
        priority=row.priority,
        requires=row.requires,
        config=MappingProxyType(dict(row.config)),
        worker=row.worker,
        lease_expires_at=_maybe_aware(row.lease_expires_at),
        heartbeat_at=_maybe_aware(row.heartbeat_at),
        attempts=row.attempts or 0,
        error=row.error or "",
        created_at=aware(row.created_at),
        started_at=_maybe_aware(row.started_at),
        finished_at=_maybe_aware(row.finished_at),
        updated_at=aware(row.updated_at),
    )

CANDIDATE_COLUMNS = tuple(CandidateRow.__table__.c[name] for name in (
    "id", "task_id", "run_id", "source", "digest", "parents", "generation", "island", "origin", "note", "created_at"))


def candidate_record(row: CandidateRow) -> CandidateRecord:
    return candidate_from_values(tuple(getattr(row, c.key) for c in CANDIDATE_COLUMNS))


def candidate_from_values(values: Sequence[Any]) -> CandidateRecord:
    """From the values of CANDIDATE_COLUMNS, in order (a plain result row: tuple access is fast)."""
    cid, task_id, run_id, source, digest, parents, generation, island, origin, note, created_at = values
    return CandidateRecord(cid, task_id, run_id, source, digest, tuple(parents), generation, island, origin, note,
                           aware(created_at))


def llm_call_record(row: LLMCallRow) -> LLMCallRecord:
    return LLMCallRecord(
        row.id, row.run_id, row.candidate_id, row.role, row.model, row.prompt, row.reply,
        row.tokens_in, row.tokens_out, row.latency_s, row.cost_usd, aware(row.created_at),
        row.candidate_digest, row.outcome, row.problem, row.attempts,
    )


def _timing_columns(prefix: str, t: Timing | None) -> dict[str, Any]:
    return {f"{prefix}_median_ms": None if t is None else t.median_ms, f"{prefix}_iqr_ms": None if t is None else t.iqr_ms,
            f"{prefix}_reps": None if t is None else t.reps, f"{prefix}_se_ms": None if t is None else t.se_ms}


def result_columns(result: EvalResult) -> dict[str, Any]:
    return {
        "status": result.status.value,
        "reason": result.reason,
        **_timing_columns("candidate", result.candidate_ms),
        **_timing_columns("reference", result.reference_ms),
        **_timing_columns("compiled_reference", result.compiled_reference_ms),
        "speedup": result.speedup,
        "max_abs_error": result.max_abs_error,
        "max_rel_error": result.max_rel_error,
        "peak_memory_bytes": result.peak_memory_bytes,
        "reference_peak_memory_bytes": result.reference_peak_memory_bytes,
        "energy_j": result.energy_j,
        "reference_energy_j": result.reference_energy_j,
        "power_w": result.power_w,
        "suspicious": result.suspicious,
        "device_kind": result.device.kind,
        "device_name": result.device.name,
        "device": asdict(result.device),
        "backend": result.backend,
        "torch_rule": result.torch_rule,
        "torch_share": result.torch_share,
        "profile": dict(result.profile),
        "trials": [dict(t) for t in result.trials],
        "log": result.log,
    }


def _timing(median: float | None, iqr: float | None, reps: int | None, se: float | None) -> Timing | None:
    # `reps` marks presence: SQLite stores a NaN float as NULL, so the floats alone cannot. A NULL standard error is
    # a verdict stored before the store kept it, or a timing too short to have one.
    if reps is None:
        return None
    return Timing(median_ms=math.nan if median is None else median, iqr_ms=math.nan if iqr is None else iqr, reps=reps,
                  se_ms=se)


EVALUATION_COLUMNS = tuple(EvaluationRow.__table__.c[name] for name in (
    "id", "candidate_id", "task_id", "run_id", "created_at", "status", "reason",
    "candidate_median_ms", "candidate_iqr_ms", "candidate_reps", "reference_median_ms", "reference_iqr_ms",
    "reference_reps", "max_abs_error", "max_rel_error", "peak_memory_bytes", "reference_peak_memory_bytes",
    "energy_j", "power_w", "profile", "device", "log", "suspicious", "trials", "reference_energy_j",
    "compiled_reference_median_ms", "compiled_reference_iqr_ms", "compiled_reference_reps", "backend",
    "candidate_se_ms", "reference_se_ms", "compiled_reference_se_ms", "torch_rule", "torch_share"))


def evaluation_from_values(values: Sequence[Any]) -> EvaluationRecord:
    """From the values of EVALUATION_COLUMNS, in order."""
    (eid, candidate_id, task_id, run_id, created_at, status, reason, c_med, c_iqr, c_reps, r_med, r_iqr, r_reps,
     max_abs, max_rel, peak, ref_peak, energy_j, power_w, profile, device, log, suspicious, trials,
     ref_energy_j, k_med, k_iqr, k_reps, backend, c_se, r_se, k_se, torch_rule, torch_share) = values
    result = EvalResult(
        status=Status(status),
        reason=reason,
        candidate_ms=_timing(c_med, c_iqr, c_reps, c_se),
        reference_ms=_timing(r_med, r_iqr, r_reps, r_se),
        compiled_reference_ms=_timing(k_med, k_iqr, k_reps, k_se),
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        peak_memory_bytes=peak,
        reference_peak_memory_bytes=ref_peak,
        energy_j=energy_j,
        reference_energy_j=ref_energy_j,
        power_w=power_w,
        profile=MappingProxyType(profile),
        device=DeviceInfo(**device),
        backend=backend,
        log=log,
        suspicious=bool(suspicious),
        trials=tuple(trials),
        torch_rule=torch_rule,
        torch_share=torch_share,
    )
    return EvaluationRecord(eid, candidate_id, task_id, run_id, result, aware(created_at))


def device_peaks_record(row: DevicePeakRow) -> DevicePeaks:
    return DevicePeaks(row.device, row.copy_gbps, row.peak_gflops, row.threads, aware(row.measured_at), row.method)
