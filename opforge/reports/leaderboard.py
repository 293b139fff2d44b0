"""The leaderboard: how good each agent configuration is at writing kernels for a suite, on each device and backend.

One row per (agent configuration, device, backend) from the newest bench of that triple on the suite: native CPU
kernels (`cpp`) and GPU kernels (`triton`, `cuda`) never share a row, nor replace each other's. For every task the bench
attempted, its run's best kernel counts, as the run reports it: where the run confirmed its fastest kernels
(opforge/run/confirm.py), the best confirmed one at its median re-measurement, never a single lucky verdict; a
kernel whose re-measurement came back wrong counts only if nothing else is correct; else the fastest correct verdict:

- correctness rate: tasks with a correct kernel / tasks attempted;
- fast_p (KernelBench's definition): the fraction of all attempted tasks whose kernel is correct and more than p times
  faster than the PyTorch reference, for p = 0, 1, 1.5, 2;
- geometric-mean speedup over all attempted tasks, a task without a correct kernel counting 1.0 (the reference is
  kept), and each kernel's time floored at the task's roofline minimum on that device (least bytes at the memory
  bandwidth, least FLOPs at peak throughput), so one impossible time cannot inflate the mean;
- each kernel's fraction of that roofline (the bound's time / the measured time), and their mean. A GPU's peaks
  come from its datasheet (`agents/device_facts.py`); a CPU's are measured once per device and kept in the store
  (`evaluator/device/cpu_peaks.py`, `Store.device_peaks`); a device with neither has no roofline (`reports/roofline.py`);
- mean energy and peak memory of the kernels relative to the reference's (where both were measured: on GPUs);
- dollars, tokens and worker-minutes per correct kernel (all the bench's LLM calls and worker time, divided).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agents.cpu_facts import measured_cpu_roofline
from evaluator.result import EvalResult, Status, Timing
from evaluator.measure.task_work import TaskWork
from evaluator.verify.torch_rule import RULE_STRICT, rule_name
from opforge.reports.roofline import floor_ms, fraction, task_work_of
from store import BenchRecord, ConfirmationRecord, Store

FAST_P = (0.0, 1.0, 1.5, 2.0)


@dataclass(frozen=True, slots=True)
class TaskScore:
    task: str
    run_id: int
    correct: bool
    speedup: float | None          # floored at the roofline; None when not correct
    raw_speedup: float | None      # as measured
    floored: bool                  # the roofline floor changed this task's time
    energy_ratio: float | None
    memory_ratio: float | None
    roofline_fraction: float | None = None  # the roofline bound's share of the kernel's time (1.0: at the bound)
    backend: str | None = None              # of the task's best kernel


@dataclass(frozen=True, slots=True)
class LeaderboardRow:
    agent: str
    device: str
    suite: str
    bench_id: int
    attempted: int
    correct: int
    fast_p: dict[str, float]
    geomean_speedup: float | None
    mean_energy_ratio: float | None
    mean_memory_ratio: float | None
    usd: float
    tokens: int
    worker_s: float
    archive: bool = False           # the bench could draw on earlier runs' kernels
    backend: str = "triton"         # triton | cuda | cpp: the kernels the bench was asked for (or, for older benches,
                                    # the most common backend of its tasks' best kernels)
    mean_roofline_fraction: float | None = None
    torch_rule: str = RULE_STRICT    # the rule for PyTorch inside its kernels that the bench's evaluations ran under
    tasks: tuple[TaskScore, ...] = field(default=(), repr=False)

    @property
    def correctness_rate(self) -> float:
        return self.correct / self.attempted if self.attempted else 0.0

    def per_correct(self) -> dict[str, float | None]:
        n = self.correct
        return {"usd": self.usd / n if n else None, "tokens": self.tokens / n if n else None,
                "worker_minutes": self.worker_s / 60 / n if n else None}

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "tasks"}
        out["correctness_rate"] = self.correctness_rate
        out["per_correct"] = self.per_correct()
        out["tasks"] = [asdict(t) for t in self.tasks]
        return out


def _device_of(results: Sequence[EvalResult]) -> str:
    names = [r.device.name for r in results if r.device.name and r.device.name != "unknown"]
    return max(set(names), key=names.count) if names else "unknown"


def _backend_of(bench: BenchRecord, best: Sequence[EvalResult | None]) -> str:
    """The bench's backend: as configured, else (older benches) the most common among its tasks' best kernels."""
    configured = bench.config.get("backend")
    if configured:
        return str(configured)
    named = [r.backend for r in best if r is not None and r.backend]
    return max(set(named), key=named.count) if named else "triton"


def _score(task: str, run_id: int, best: EvalResult | None, bound_ms: float | None) -> TaskScore:
    if best is None or best.speedup is None or best.candidate_ms is None or best.reference_ms is None:
        return TaskScore(task, run_id, False, None, None, False, None, None)
    t = best.candidate_ms.median_ms
    if best.device.kind == "cpu" and best.backend == "triton":
        bound_ms = None  # interpreted, and timed on the task's INTERPRETER_SHAPE: not the size its work was counted at
    floored = bound_ms is not None and t < bound_ms
    speedup = best.reference_ms.median_ms / (bound_ms if floored else t)
    energy = (best.energy_j / best.reference_energy_j
              if best.energy_j is not None and best.reference_energy_j else None)
    memory = (best.peak_memory_bytes / best.reference_peak_memory_bytes
              if best.peak_memory_bytes is not None and best.reference_peak_memory_bytes else None)
    return TaskScore(task, run_id, True, speedup, best.speedup, floored, energy, memory,
                     roofline_fraction=fraction(bound_ms, t), backend=best.backend)


def reported_best(verdicts: dict[int, EvalResult], confirmations: Sequence[ConfirmationRecord]
                  ) -> EvalResult | None:
    """A run's best as it reports it (see the module's notes), per candidate id: a confirmed kernel's verdict carries
    the timings of its median re-measurement (the lower middle one for an even count), so its speedup, time and
    roofline fraction are those of a re-measurement, not of the search's pick."""
    correct = {cid: r for cid, r in verdicts.items() if r.status == Status.OK and r.speedup is not None}
    remeasured: dict[int, list[ConfirmationRecord]] = {}
    for rec in confirmations:
        remeasured.setdefault(rec.candidate_id, []).append(rec)
    confirmed: list[EvalResult] = []
    for cid, recs in remeasured.items():
        ok = sorted((r for r in recs if r.status == Status.OK and r.speedup and r.reference_ms and r.candidate_ms),
                    key=lambda r: r.speedup or 0.0)
        if cid in correct and ok and len(ok) == len(recs):
            mid = ok[(len(ok) - 1) // 2]
            assert mid.reference_ms is not None and mid.candidate_ms is not None
            confirmed.append(dataclasses.replace(correct[cid], reference_ms=Timing(mid.reference_ms, 0.0, len(ok)),
                                                 candidate_ms=Timing(mid.candidate_ms, 0.0, len(ok))))
    unconfirmed = [r for cid, r in correct.items() if cid not in remeasured]
    failed = [r for cid, r in correct.items() if cid in remeasured]
    for pool in (confirmed, unconfirmed, failed):
        if pool:
            return max(pool, key=lambda r: r.speedup or 0.0)
    return None


def bench_row(store: Store, bench: BenchRecord) -> LeaderboardRow:
    """Score one bench: each task's best correct kernel, then the suite-level figures."""
    scored: list[tuple[str, int, EvalResult | None, TaskWork | None]] = []
    results: list[EvalResult] = []
    usd = worker_s = 0.0
    tokens = 0
    for run in store.bench_runs(bench.id):
        task = store.get_task(run.task_id)
        verdicts = {sc.candidate.id: sc.result for sc in store.history(run.id) if sc.result is not None}
        results += verdicts.values()
        best = reported_best(verdicts, store.confirmations(run.id))
        work = task_work_of(task)
        scored.append((task.name, run.id, best, work))
        usd += run.cost_usd
        tokens += run.tokens_in + run.tokens_out
        worker_s += run.worker_s
    device = _device_of(results)
    backend = _backend_of(bench, [best for _, _, best, _ in scored])
    cpu = measured_cpu_roofline(store, device)
    tasks = tuple(_score(name, run_id, best, floor_ms(work, device, best.backend if best else backend, cpu))
                  for name, run_id, best, work in scored)
    n = len(tasks)
    ok = [t for t in tasks if t.correct]
    fast = {f"{p:g}": (sum(1 for t in ok if (t.speedup or 0.0) > p) / n if n else 0.0) for p in FAST_P}
    geomean = math.exp(sum(math.log(t.speedup) if t.correct and t.speedup else 0.0 for t in tasks) / n) if n else None
    energies = [t.energy_ratio for t in ok if t.energy_ratio is not None]
    memories = [t.memory_ratio for t in ok if t.memory_ratio is not None]
    fractions = [t.roofline_fraction for t in ok if t.roofline_fraction is not None]
    return LeaderboardRow(agent=bench.agent, device=device, suite=bench.suite, bench_id=bench.id, attempted=n,
                          correct=len(ok), fast_p=fast, geomean_speedup=geomean,
                          mean_energy_ratio=sum(energies) / len(energies) if energies else None,
                          mean_memory_ratio=sum(memories) / len(memories) if memories else None,
                          usd=usd, tokens=tokens, worker_s=worker_s, archive=bool(bench.config.get("use_archive")),
                          backend=backend, mean_roofline_fraction=sum(fractions) / len(fractions) if fractions else None,
                          torch_rule=bench_torch_rule(bench.config), tasks=tasks)


def bench_torch_rule(config: Mapping[str, Any]) -> str:
    """The rule for PyTorch inside a candidate that a bench ran under (`evaluator.verify.torch_rule`), from its stored
    evaluation settings: a bench stored before the rule existed had the strict one, the only one then."""
    settings = config.get("eval") or {}
    return rule_name(bool(settings.get("allow_torch")), bool(settings.get("kernels_only", True)))


def leaderboard(store: Store, suite: str | None = None) -> list[LeaderboardRow]:
    """The newest bench of each (suite, agent, device, backend), best geometric-mean speedup first."""
    newest: dict[tuple[str, str, str, str], LeaderboardRow] = {}
    for bench in store.list_benches(suite):
        row = bench_row(store, bench)
        if row.attempted:
            newest[(row.suite, row.agent, row.device, row.backend)] = row  # benches come oldest first
    return sorted(newest.values(), key=lambda r: (r.suite, -(r.geomean_speedup or 0.0), -r.correct))
