"""What a run found, for people and for JSON: its best candidates, its Pareto front and the lineage of its best."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluator.task_settings import recorded
from opforge.display import format_bytes, format_speedup
from opforge.run.config import stored_backend
from opforge.run.population import Member, member_from_scored, pareto_front
from opforge.run.progress import format_tokens
from store import ConfirmedSpeedup, LLMCallRecord, LLMUsage, RunRecord, Store

TOP_N = 5
DISAGREE = 0.15  # re-measurements of one kernel further apart than this are called out (a busy machine)
MAX_LINEAGE = 50


def disagreement_cause(spread: float, reference_ms: Sequence[float]) -> str:
    """Why re-measurements of one kernel that differ by `spread` differ, as measured: the reference timed beside the
    kernel in each re-measurement is the yardstick of the machine's own speed. Where it moved by half as much or
    more, the machine moved; where it held, the kernel's own time moved on a machine that did not."""
    if len(reference_ms) < 2:
        return ": the reference's times beside them were not kept, so whether the machine moved is not known"
    moved = max(reference_ms) / min(reference_ms) - 1
    if moved >= spread / 2:
        return (f", and the reference timed beside them moved by {moved:.0%} too: this machine's speed moved between "
                "them (other jobs on its cores, or a host it shares with other machines), so measure again on a quiet "
                "one where you can")
    return (f" while the reference timed beside them held within {moved:.0%}: the machine did not move, the kernel's "
            "own time did (it depends on something that differed between the evaluations), so its figure is only "
            "known to that spread")


@dataclass(frozen=True, slots=True)
class RunCost:
    """What the run spent, in all and per accepted (correct) kernel."""

    usd: float
    tokens_in: int
    tokens_out: int
    worker_s: float
    wall_s: float
    accepted: int
    usage: tuple[LLMUsage, ...]          # LLM calls per role
    best_calls: tuple[LLMCallRecord, ...]  # the calls that wrote or judged the best candidate

    def per_accepted(self) -> dict[str, float] | None:
        if not self.accepted:
            return None
        n = self.accepted
        return {"usd": self.usd / n, "tokens": (self.tokens_in + self.tokens_out) / n, "worker_s": self.worker_s / n,
                "wall_s": self.wall_s / n}

    def to_json(self) -> dict[str, Any]:
        return {"usd": self.usd, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "worker_s": self.worker_s,
                "wall_s": self.wall_s, "accepted": self.accepted, "per_accepted": self.per_accepted(),
                "llm_calls": [{"role": u.role, "calls": u.calls, "by_outcome": dict(u.by_outcome),
                               "tokens_in": u.tokens_in, "tokens_out": u.tokens_out, "usd": u.cost_usd,
                               "latency_s": u.latency_s} for u in self.usage],
                "best_calls": [{"role": c.role, "model": c.model, "outcome": c.outcome, "tokens_in": c.tokens_in,
                                "tokens_out": c.tokens_out, "usd": c.cost_usd} for c in self.best_calls]}

    def text(self) -> list[str]:
        tokens = self.tokens_in + self.tokens_out
        lines = [f"cost: ${self.usd:.4f}, {format_tokens(tokens)} tokens, {self.worker_s:.0f} s of worker time, "
                 f"{self.wall_s:.0f} s wall time; {self.accepted} accepted (correct) kernels"]
        per = self.per_accepted()
        if per is not None:
            lines.append(f"  per accepted kernel: ${per['usd']:.4f}, {format_tokens(round(per['tokens']))} tokens, "
                         f"{per['worker_s']:.1f} s of worker time, {per['wall_s']:.1f} s wall time")
        for u in self.usage:
            outcomes = ", ".join(f"{n} {o}" for o, n in u.by_outcome.items())
            lines.append(f"  {u.role:<16} {u.calls:>4} calls ({outcomes}), {format_tokens(u.tokens_in)} in / "
                         f"{format_tokens(u.tokens_out)} out, ${u.cost_usd:.4f}")
        if self.best_calls:
            usd = sum(c.cost_usd for c in self.best_calls)
            roles = ", ".join(c.role for c in self.best_calls)
            lines.append(f"  the best candidate's own calls: {roles} (${usd:.4f})")
        return lines


@dataclass(frozen=True, slots=True)
class RunReport:
    run: RunRecord
    task_name: str
    done: int
    budget: int | None
    best: tuple[Member, ...]             # fastest correct first: confirmed ones first, by their confirmed figure
    pareto: tuple[Member, ...]
    lineage: tuple[Member, ...]          # from the seed to the best
    by_status: Mapping[str, int]
    cost: RunCost
    archive: Mapping[str, Any] = field(default_factory=dict)  # what the archive offered (the run's configuration)
    drew_on_archive: tuple[tuple[Member, str], ...] = ()       # candidates that came from it, and how
    confirmed: Mapping[int, ConfirmedSpeedup] = field(default_factory=dict)  # re-measured before the best was named
    measured: Mapping[int, float] = field(default_factory=dict)  # the search's own figure of each confirmed member
    task_settings: tuple[str, ...] = ()  # the `--set NAME=VALUE` the task ran with, read from its stored source

    def confirmation_text(self, m: Member) -> str:
        """How a member's figure was confirmed, in words ("" when it was not re-measured)."""
        c = self.confirmed.get(m.candidate_id or -1)
        if c is None:
            return ""
        if c.speedup is None:
            return f"not confirmed: {len(c.failures)} of {len(c.failures) + len(c.speedups)} re-measurements failed"
        figures = ", ".join(format_speedup(x) for x in c.speedups)
        text = (f"confirmed: median of {len(c.speedups)} re-measurements ({figures}); the search measured "
                f"{format_speedup(self.measured.get(m.candidate_id or -1))}")
        spread = max(c.speedups) / min(c.speedups) - 1
        if spread > DISAGREE:
            text += f"; they differ by {spread:.0%}" + disagreement_cause(spread, c.reference_ms)
        return text

    def archive_lines(self) -> list[str]:
        if not self.archive.get("enabled"):
            return ["archive: not used"]
        seeds = ", ".join(f"#{s['candidate_id']} ({s['task']}, run {s['run_id']}, {format_speedup(s['speedup'])})"
                          for s in self.archive.get("seeds", [])) or "none"
        related = ", ".join(f"#{s['candidate_id']} ({s['task']}, similarity {s['similarity']:.2f})"
                            for s in self.archive.get("inspirations", [])) or "none"
        lines = [f"archive: seeds {seeds}; related kernels offered to the coder {related}"]
        for m, how in self.drew_on_archive:
            lines.append(f"  #{m.candidate_id} {format_speedup(m.speedup)} {m.status or 'pending'}: {how}")
        return lines

    @property
    def task_label(self) -> str:
        """The task's name, with the `--set` settings it ran with (`evaluator.task_settings`)."""
        return f"{self.task_name} (--set {' '.join(self.task_settings)})" if self.task_settings else self.task_name

    @property
    def winner(self) -> Member | None:
        return self.best[0] if self.best else None

    def to_json(self) -> dict[str, Any]:
        r = self.run
        return {"run_id": r.id, "task": self.task_name, "task_settings": list(self.task_settings),
                "status": r.status.value,
                "backend": stored_backend(r.config), "evaluated": self.done, "budget": dict(r.budget), "config": dict(r.config), "worker_s": r.worker_s,
                "created_at": r.created_at.isoformat(), "by_status": dict(self.by_status),
                "best": [member_json(m) for m in self.best], "pareto": [member_json(m) for m in self.pareto],
                "lineage": [member_json(m) for m in self.lineage], "cost": self.cost.to_json(),
                "archive": dict(self.archive),
                "confirmed": {str(cid): {"speedup": c.speedup, "speedups": list(c.speedups),
                                         "failures": list(c.failures), "measured": self.measured.get(cid)}
                              for cid, c in self.confirmed.items()},
                "drew_on_archive": [{"candidate_id": m.candidate_id, "how": how} for m, how in self.drew_on_archive]}

    def text(self) -> str:
        r = self.run
        lines = [f"run {r.id}  task {self.task_label} ({stored_backend(r.config)})  {r.status.value}  "
                 f"{self.done}/{self.budget or '?'} evaluated  "
                 f"best {format_speedup(self.winner.speedup if self.winner else None)}  "
                 f"worker time {r.worker_s:.0f} s  created {r.created_at:%Y-%m-%d %H:%M}",
                 f"  results: {', '.join(f'{n} {s}' for s, n in sorted(self.by_status.items())) or 'none yet'}"]
        lines += ["  " + line for line in self.cost.text()]
        lines += ["  " + line for line in self.archive_lines()]
        if not self.best:
            lines.append("  no correct candidate yet")
            return "\n".join(lines)
        lines += ["", "best candidates", f"  {'id':>6}  {'speedup':>8}  {'gen':>3}  {'isl':>3}  change"]
        lines += [f"  {m.candidate_id:>6}  {format_speedup(m.speedup):>8}  {m.generation:>3}  {m.island:>3}  "
                  f"{_change(m)}" + (f"\n  {'':>6}  {self.confirmation_text(m)}" if self.confirmation_text(m) else "")
                  for m in self.best]
        lines += ["", "pareto front (speedup up; energy, peak memory down)"]
        lines += [f"  #{m.candidate_id:<6} {format_speedup(m.speedup):>8}  energy "
                  f"{'-' if m.energy_j is None else f'{m.energy_j * 1e3:.3f} mJ'}  memory "
                  f"{'-' if m.peak_memory_bytes is None else format_bytes(m.peak_memory_bytes)}"
                  f"{_reference_memory(m)}" for m in self.pareto]
        if self.pareto and all(m.energy_j is None for m in self.pareto):
            lines.append(f"  energy not measured: {_no_energy(self.pareto)}")
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
    return store.run_totals(run_id).evaluated


def run_report(store: Store, run_id: int, top_n: int = TOP_N) -> RunReport:
    run = store.get_run(run_id)
    task = store.get_task(run.task_id)
    members = [member_from_scored(sc) for sc in store.history(run_id)]
    measured_order = sorted((m for m in members if m.fitness is not None), key=lambda m: -(m.speedup or 0.0))
    confirmed = store.confirmed(run_id)
    correct = confirmed_first(measured_order, confirmed)
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
    winner = correct[0] if correct else None
    best_calls = store.llm_calls(run_id, winner.candidate_id) if winner and winner.candidate_id is not None else []
    cost = RunCost(usd=run.cost_usd, tokens_in=run.tokens_in, tokens_out=run.tokens_out, worker_s=run.worker_s,
                   wall_s=run.wall_s, accepted=len(correct), usage=tuple(store.llm_usage(run_id)),
                   best_calls=tuple(best_calls))
    offered = dict(run.config.get("archive") or {})
    return RunReport(run=run, task_name=task.name, task_settings=recorded(task.source), done=run_done(store, run_id),
                     budget=int(budget) if budget is not None else None, best=tuple(correct[:top_n]),
                     pareto=tuple(pareto_front(correct)), lineage=tuple(reversed(lineage)),
                     by_status=dict(Counter(str(m.status) for m in members if not m.pending)), cost=cost,
                     archive=offered, drew_on_archive=tuple(_drew_on_archive(members, offered)),
                     confirmed=confirmed,
                     measured={m.candidate_id: m.speedup for m in measured_order
                               if m.candidate_id in confirmed and m.speedup is not None})


def confirmed_first(correct: Sequence[Member], confirmed: Mapping[int, ConfirmedSpeedup]) -> list[Member]:
    """The run's correct members, best first, as the run reports them: those whose re-measurements confirmed a figure
    come first, by that figure (which replaces their speedup); then the rest as measured; last, those a re-measurement
    did not confirm (it came back incorrect or failed) (opforge/run/confirm.py)."""
    figures = {cid: c.speedup for cid, c in confirmed.items() if c.speedup is not None}
    good = [dataclasses.replace(m, speedup=figures[m.candidate_id]) for m in correct
            if m.candidate_id is not None and m.candidate_id in figures]
    failed = [m for m in correct if m.candidate_id in confirmed and m.candidate_id not in figures]
    taken = {m.candidate_id for m in good + failed}
    return (sorted(good, key=lambda m: -(m.speedup or 0.0)) + [m for m in correct if m.candidate_id not in taken]
            + failed)


def _drew_on_archive(members: list[Member], offered: Mapping[str, Any]) -> list[tuple[Member, str]]:
    """The run's candidates that are archived kernels (seeds) or were written with an archived kernel in view."""
    seeds = {s["digest"]: s for s in offered.get("seeds", [])}
    related = {s["digest"]: s for s in offered.get("inspirations", [])}
    out = []
    for m in members:
        if m.digest in seeds:
            s = seeds[m.digest]
            out.append((m, f"an archived kernel of this task (run {s['run_id']}), seeded into generation 0"))
            continue
        from_seed = [seeds[d] for d in m.candidate.parents if d in seeds]
        used = [related[d] for d in m.candidate.parents if d in related]
        if from_seed:
            out.append((m, f"a child of the archived #{from_seed[0]['candidate_id']} ({m.candidate.origin})"))
        elif used:
            out.append((m, "written with " + ", ".join(f"#{u['candidate_id']} ({u['task']})" for u in used)
                        + " from the archive in view"))
    return out


def _reference_memory(m: Member) -> str:
    ref = m.result.reference_peak_memory_bytes if m.result is not None else None
    return "" if ref is None else f" (reference {format_bytes(ref)})"


def _no_energy(front: Sequence[Member]) -> str:
    """Why no energy figure, once: on a CPU, what this machine's RAPL lacks; on a GPU, NVML."""
    kinds = {m.result.device.kind for m in front if m.result is not None and m.result.device is not None}
    if kinds <= {"cpu"}:
        from evaluator.measure.cpu_energy import absence
        return absence() or "RAPL's counters were not readable when these kernels were evaluated"
    return "the GPU's energy counter (NVML) could not be read"
