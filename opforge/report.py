"""What a run found, for people and for JSON: its best candidates, its Pareto front and the lineage of its best."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opforge.display import format_bytes, format_speedup
from opforge.population import Member, member_from_scored, pareto_front
from store import RunRecord, Store

TOP_N = 5
MAX_LINEAGE = 50


@dataclass(frozen=True, slots=True)
class RunReport:
    run: RunRecord
    task_name: str
    done: int
    budget: int | None
    best: tuple[Member, ...]             # fastest correct first
    pareto: tuple[Member, ...]
    lineage: tuple[Member, ...]          # from the seed to the best
    by_status: Mapping[str, int]

    @property
    def winner(self) -> Member | None:
        return self.best[0] if self.best else None

    def to_json(self) -> dict[str, Any]:
        r = self.run
        return {"run_id": r.id, "task": self.task_name, "status": r.status.value, "evaluated": self.done,
                "budget": dict(r.budget), "config": dict(r.config), "gpu_s": r.gpu_s,
                "created_at": r.created_at.isoformat(), "by_status": dict(self.by_status),
                "best": [member_json(m) for m in self.best], "pareto": [member_json(m) for m in self.pareto],
                "lineage": [member_json(m) for m in self.lineage]}

    def text(self) -> str:
        r = self.run
        lines = [f"run {r.id}  task {self.task_name}  {r.status.value}  {self.done}/{self.budget or '?'} evaluated  "
                 f"best {format_speedup(self.winner.speedup if self.winner else None)}  "
                 f"evaluation time {r.gpu_s:.0f} s  created {r.created_at:%Y-%m-%d %H:%M}",
                 f"  results: {', '.join(f'{n} {s}' for s, n in sorted(self.by_status.items())) or 'none yet'}"]
        if not self.best:
            lines.append("  no correct candidate yet")
            return "\n".join(lines)
        lines += ["", "best candidates", f"  {'id':>6}  {'speedup':>8}  {'gen':>3}  {'isl':>3}  change"]
        lines += [f"  {m.candidate_id:>6}  {format_speedup(m.speedup):>8}  {m.generation:>3}  {m.island:>3}  "
                  f"{_change(m)}" for m in self.best]
        lines += ["", "pareto front (speedup up; energy, peak memory down)"]
        lines += [f"  #{m.candidate_id:<6} {format_speedup(m.speedup):>8}  energy "
                  f"{'-' if m.energy_j is None else f'{m.energy_j * 1e3:.3f} mJ'}  memory "
                  f"{'-' if m.peak_memory_bytes is None else format_bytes(m.peak_memory_bytes)}" for m in self.pareto]
        lines += ["", f"lineage of the best (#{self.winner.candidate_id if self.winner else '?'})"]
        parent_id: int | None = None
        for m in self.lineage:
            via = f"from #{parent_id} by {_change(m)}" if parent_id is not None else _change(m)
            lines.append(f"  #{m.candidate_id:<6} gen {m.generation:<3} {format_speedup(m.speedup):>8}  "
                         f"{m.status or 'pending'}  {via}")
            parent_id = m.candidate_id
        return "\n".join(lines)


def _change(m: Member) -> str:
    c = m.candidate
    return f"{c.origin}: {c.note}" if c.note else c.origin


def member_json(m: Member) -> dict[str, Any]:
    return {"candidate_id": m.candidate_id, "digest": m.digest, "speedup": m.speedup,
            "status": None if m.status is None else str(m.status), "generation": m.generation, "island": m.island,
            "origin": m.candidate.origin, "note": m.candidate.note, "parents": list(m.candidate.parents),
            "candidate_ms": m.candidate_ms, "peak_memory_bytes": m.peak_memory_bytes, "energy_j": m.energy_j}


def run_done(store: Store, run_id: int) -> int:
    """Evaluations the run has finished (its queue items that are done)."""
    return store.run_totals(run_id).queue.get("done", 0)


def run_report(store: Store, run_id: int, top_n: int = TOP_N) -> RunReport:
    run = store.get_run(run_id)
    task = store.get_task(run.task_id)
    members = [member_from_scored(sc) for sc in store.history(run_id)]
    correct = sorted((m for m in members if m.fitness is not None), key=lambda m: -(m.speedup or 0.0))
    by_digest: dict[str, Member | None] = {m.digest: m for m in members}
    lineage: list[Member] = []
    node = correct[0] if correct else None
    while node is not None and len(lineage) < MAX_LINEAGE and node not in lineage:
        lineage.append(node)
        parent = node.candidate.parents[0] if node.candidate.parents else None
        if parent is not None and parent not in by_digest:
            found = store.find_candidate(run.task_id, parent)  # a parent found first by another run
            by_digest[parent] = Member(found.candidate, found.id, found.generation, found.island) if found else None
        node = by_digest.get(parent) if parent else None
    budget = run.budget.get("max_candidates")
    return RunReport(run=run, task_name=task.name, done=run_done(store, run_id),
                     budget=int(budget) if budget is not None else None, best=tuple(correct[:top_n]),
                     pareto=tuple(pareto_front(correct)), lineage=tuple(reversed(lineage)),
                     by_status=dict(Counter(str(m.status) for m in members if not m.pending)))
