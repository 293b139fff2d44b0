"""manifest.json: for every exported kernel, the evidence behind it, straight from the store.

Per kernel: its task and candidate digests (the files in the package hash to them), and per device it was exported
for, the evaluation: correctness trials and tolerance, timings of kernel and baselines with the timing protocol, the
device with its driver and library versions, peak memory and energy; the verdicts it got on every device; its lineage
from the seed (parents, mutations, the models that wrote each step and what their calls cost) and the run's cost.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from evaluator.result import EvalResult, timing_json
from opforge import __version__
from opforge.export.operators import KernelPlan, OperatorPlan
from opforge.export.selection import Pick
from opforge.run.config import stored_backend
from store import CandidateRecord, EvaluationRecord, RunRecord, ScoredCandidate, Store

FORMAT = "opforge-export/1"
MAX_LINEAGE = 100
PROTOCOL_KEYS = ("trials", "warmup_ms", "max_timing_s", "min_reps", "max_reps", "target_rse", "suspicious_speedup",
                 "timing_recheck_reps", "compile_baseline", "device", "sandbox")
METHOD = ("reference and kernel timed by the same code in random interleaved blocks, each call on fresh inputs; on a "
          "GPU CUDA events around each call after a 256 MiB L2 flush with a device-wide synchronize, on a CPU a "
          "monotonic clock; warm-up by time, repetitions until the relative standard error is under target_rse or "
          "max_timing_s; median and IQR; speedups above suspicious_speedup re-measured by the driver's own clock")


def manifest(store: Store, plans: list[OperatorPlan], package: str, dist_name: str, version: str,
             exported_at: datetime, source: dict[str, Any]) -> dict[str, Any]:
    kernels: dict[str, dict[str, Any]] = {}
    for op in plans:
        for k in op.kernels:
            entry = kernels.get(k.id)
            if entry is None:
                entry = kernels[k.id] = _kernel(store, op, k)
            entry["evaluations"].append(_evaluation(op, k))
    return {
        "format": FORMAT,
        "package": package,
        "distribution": dist_name,
        "version": version,
        "generator": {"name": "opforge", "version": __version__},
        "exported_at": exported_at.isoformat(timespec="seconds"),
        "source": source,
        "operators": [_operator(op) for op in plans],
        "kernels": list(kernels.values()),
    }


def _operator(op: OperatorPlan) -> dict[str, Any]:
    task = op.kernels[0].pick.task
    return {
        "name": op.name,
        "class": op.class_name,
        "task": {"name": task.name, "digest": task.digest, "path": task.path, "file": f"reference/{op.name}.py"},
        "inputs": [{"name": n, "kind": k} for n, k in zip(op.arg_names, op.arg_kinds)],
        "outputs": op.outputs,
        "tuple_output": op.tuple_output,
        "tolerance": op.tolerance,
        "shape_variants": [{"overrides": dict(over), "inputs": list(ins), "outputs": list(outs)}
                           for over, ins, outs in zip(op.report.variants, op.report.inputs, op.report.outputs)],
        "kernels": list(dict.fromkeys(k.id for k in op.kernels)),
    }


def _kernel(store: Store, op: OperatorPlan, k: KernelPlan) -> dict[str, Any]:
    pick = k.pick
    c = pick.candidate
    lineage = _lineage(store, pick)
    models = sorted({m for step in lineage for m in step["models"]})
    return {
        "id": k.id,
        "operator": op.name,
        "file": f"kernels/{k.id}.py",
        "language": k.language,
        "vendored_load_c": k.language == "cpp",  # its file imports the package's _native.load_c, else as evaluated
        "launches": list(k.launches),
        "traced_by_triton_op": k.traceable,
        "candidate": {"id": c.id, "digest": c.digest, "run_id": c.run_id, "origin": c.origin, "note": c.note,
                      "parents": list(c.parents), "generation": c.generation, "island": c.island,
                      "created_at": c.created_at.isoformat(timespec="seconds")},
        "task": {"name": pick.task.name, "digest": pick.task.digest, "file": f"reference/{op.name}.py"},
        "evaluations": [],
        "verdicts": [{"device": d, "status": s} for d, s in pick.verdicts],
        "lineage": lineage,
        "models": models,
        "cost": {"lineage_llm_usd": sum(step["llm"]["usd"] for step in lineage),
                 "lineage_llm_tokens": sum(step["llm"]["tokens"] for step in lineage),
                 "run": _run_cost(pick.run)},
    }


def _evaluation(op: OperatorPlan, k: KernelPlan) -> dict[str, Any]:
    pick = k.pick
    r: EvalResult = pick.evaluation.result
    eval_cfg = dict(pick.run.config.get("eval") or {})
    return {
        "run_id": pick.run.id,
        "evaluation_id": pick.evaluation.id,
        "evaluated_at": pick.evaluation.created_at.isoformat(timespec="seconds"),
        "device": asdict(r.device),
        "status": r.status.value,
        "reason": r.reason,
        "correctness": {"trials": [dict(t) for t in r.trials], "tolerance": op.tolerance,
                        "max_abs_error": r.max_abs_error, "max_rel_error": r.max_rel_error},
        "timing": {"speedup": r.speedup, "speedup_vs_compile": r.speedup_vs_compile, "suspicious": r.suspicious,
                   "remeasured_speedups": list(pick.confirmed.speedups) if pick.confirmed else [],
                   "candidate_ms": timing_json(r.candidate_ms), "reference_ms": timing_json(r.reference_ms),
                   "compiled_reference_ms": timing_json(r.compiled_reference_ms),
                   "protocol": {"method": METHOD, **{key: eval_cfg[key] for key in PROTOCOL_KEYS if key in eval_cfg}}},
        "memory": {"peak_memory_bytes": r.peak_memory_bytes,
                   "reference_peak_memory_bytes": r.reference_peak_memory_bytes},
        "energy": {"energy_j": r.energy_j, "reference_energy_j": r.reference_energy_j, "power_w": r.power_w},
        "profile": dict(r.profile),
        "dispatch": {"buckets": [[_jsonable(spec) for spec in bucket] for bucket in k.buckets]},
    }


def _lineage(store: Store, pick: Pick) -> list[dict[str, Any]]:
    """From the seed to the kernel: each step's candidate, how it was made, its verdict, and its LLM calls."""
    scored: dict[str, ScoredCandidate] = {sc.candidate.digest: sc for sc in pick.history}
    steps: list[dict[str, Any]] = []
    node: CandidateRecord | None = pick.candidate
    seen: set[str] = set()
    while node is not None and node.digest not in seen and len(steps) < MAX_LINEAGE:
        seen.add(node.digest)
        sc = scored.get(node.digest)
        steps.append(_step(store, node, sc.evaluation if sc else None))
        parent = node.parents[0] if node.parents else None
        node = None
        if parent is not None:
            node = scored[parent].candidate if parent in scored else store.find_candidate(pick.task.id, parent)
    return list(reversed(steps))


def _step(store: Store, c: CandidateRecord, ev: EvaluationRecord | None) -> dict[str, Any]:
    calls = store.llm_calls(c.run_id, c.id) if c.run_id is not None else []
    models = {call.model for call in calls}
    if c.origin.startswith("llm:"):
        models.add(c.origin.removeprefix("llm:"))
    return {
        "candidate_id": c.id, "digest": c.digest, "origin": c.origin, "note": c.note, "parents": list(c.parents),
        "generation": c.generation,
        "status": None if ev is None else ev.result.status.value,
        "speedup": None if ev is None else ev.result.speedup,
        "device": None if ev is None else ev.result.device.name,
        "models": sorted(models),
        "llm": {"calls": len(calls), "roles": sorted({call.role for call in calls}),
                "usd": sum(call.cost_usd for call in calls),
                "tokens": sum(call.tokens_in + call.tokens_out for call in calls)},
    }


def _run_cost(run: RunRecord) -> dict[str, Any]:
    return {"run_id": run.id, "usd": run.cost_usd, "tokens_in": run.tokens_in, "tokens_out": run.tokens_out,
            "worker_s": run.worker_s, "wall_s": run.wall_s, "evaluated": run.evaluated,
            "coder": run.config.get("coder"), "backend": stored_backend(run.config),
            "models": {k: v for k, v in dict(run.config.get("llm") or {}).items() if k in ("model", "judge_model")}}


def _jsonable(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: [list(d) for d in v] if k == "dims" else v for k, v in spec.items()}
