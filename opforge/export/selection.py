"""Which kernels an export takes: per task and device, the fastest correct candidate of the given runs.

"Fastest" in the order the run reports its candidates (`opforge show`, `run_summary.confirmed_first`): those it
re-measured before reporting its best come first, ranked and held to --min-speedup by their confirmed figure on that
device (`store.confirmations.confirmed_speedups`: the re-measurements' median), not by the search's figure, which was
picked for being high (a kernel the search read at 1.01x and three re-measurements at 0.80-0.88x is a 0.84x kernel);
then the rest by the search's figure. A candidate is refused, with the reason, when any of its verdicts in the store
(on any device), or any of its re-measurements, is not `ok`: a kernel that failed somewhere is not shipped anywhere.
A run without any correct candidate stops the export; a run whose kernels are all refused or below --min-speedup is
left out with a note, and when that leaves nothing the export stops with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from evaluator.result import Status
from opforge.display import format_speedup
from store import (CandidateRecord, ConfirmedSpeedup, EvaluationRecord, RunRecord, ScoredCandidate, Store,
                   StoreError, TaskRecord)
from store.confirmations import confirmed_speedups


class ExportError(Exception):
    """An export that cannot be made: one readable sentence saying why and what to do."""


@dataclass(frozen=True, slots=True)
class Pick:
    """One kernel to export: a candidate, its verdict on one device, and where it came from."""

    task: TaskRecord
    run: RunRecord
    candidate: CandidateRecord
    evaluation: EvaluationRecord
    verdicts: tuple[tuple[str, str], ...]  # (device name, status) of every verdict the store holds for it
    history: tuple[ScoredCandidate, ...]   # the run's candidates (for the lineage)
    confirmed: ConfirmedSpeedup | None = None  # its re-measurements on this device, where the run took any

    @property
    def device(self) -> str:
        return self.evaluation.result.device.name

    @property
    def speedup(self) -> float:
        """The figure the run reports for it: its re-measurements' median where it was re-measured, else its
        verdict's."""
        return _figure(self.evaluation, self.confirmed)


def _figure(ev: EvaluationRecord, confirmed: ConfirmedSpeedup | None) -> float:
    figure = confirmed.speedup if confirmed is not None else None
    return figure if figure is not None else (ev.result.speedup or 0.0)


@dataclass(frozen=True, slots=True)
class Selection:
    picks: tuple[Pick, ...]
    notes: tuple[str, ...]  # refused candidates, kernels slower than the reference


def select(store: Store, run_ids: list[int], min_speedup: float | None = None) -> Selection:
    runs = [_run(store, rid) for rid in dict.fromkeys(run_ids)]
    by_task: dict[int, list[RunRecord]] = defaultdict(list)
    for run in runs:
        by_task[run.task_id].append(run)
    picks: list[Pick] = []
    notes: list[str] = []
    left_out: list[str] = []
    for task_id, task_runs in by_task.items():
        task = store.get_task(task_id)
        devices = _devices(store, task_id)
        best: dict[str, Pick] = {}
        for run in task_runs:
            eligible, why_none = _eligible(store, task, run, devices, min_speedup, notes)
            if why_none is not None:
                left_out.append(why_none)
            for pick in eligible:
                if pick.device not in best or pick.speedup > best[pick.device].speedup:
                    best[pick.device] = pick
        picks += sorted(best.values(), key=lambda p: -p.speedup)
    if not picks:
        raise ExportError(left_out[0] if len(left_out) == 1 else
                          "Nothing to export: " + " ".join(left_out))
    notes += [f"left out: {why}" for why in left_out]
    for pick in picks:
        if pick.speedup < 1.0:
            notes.append(f"run {pick.run.id} ({pick.task.name}): the kernel exported for {pick.device} is "
                         f"{format_speedup(pick.speedup)} the reference's speed there (slower); use --min-speedup 1 "
                         f"to leave such kernels out")
    return Selection(tuple(picks), tuple(dict.fromkeys(notes)))


def _run(store: Store, run_id: int) -> RunRecord:
    try:
        return store.get_run(run_id)
    except StoreError:
        raise ExportError(f"The store {store.url} has no run {run_id}; `opforge runs` lists the runs it has.") from None


def _devices(store: Store, task_id: int) -> set[str]:
    """Every device name a verdict on this task was recorded for, by any run."""
    names: set[str] = set()
    for run in store.list_runs(task_id):
        names.update(sc.result.device.name for sc in store.history(run.id) if sc.result is not None)
    return names


def _eligible(store: Store, task: TaskRecord, run: RunRecord, devices: set[str], min_speedup: float | None,
              notes: list[str]) -> tuple[list[Pick], str | None]:
    """The run's best passing candidate per device, or why it has none; raises when the run has no correct one."""
    history = tuple(store.history(run.id))
    verdicts: dict[int, list[tuple[str, EvaluationRecord]]] = defaultdict(list)
    for device in sorted(devices):
        for sc in store.history(run.id, device):
            if sc.evaluation is not None:
                verdicts[sc.candidate.id].append((device, sc.evaluation))
    remeasured = store.confirmations(run.id)
    by_device = {d: confirmed_speedups(r for r in remeasured if r.device_name == d) for d in devices}
    correct = [(sc.candidate, ev, by_device.get(ev.result.device.name, {}).get(sc.candidate.id))
               for sc in history for _, ev in verdicts[sc.candidate.id]
               if ev.result.status == Status.OK and ev.result.speedup is not None]
    if not correct:
        raise ExportError(f"Run {run.id} ({task.name}) has no correct candidate to export (its verdicts: "
                          f"{_status_counts(history)}); run it further or leave it out.")
    correct.sort(key=lambda c: (c[2] is None, -_figure(c[1], c[2])))  # as the run reports them (confirmed_first)
    chosen: dict[str, Pick] = {}
    below = refused = 0
    for cand, ev, confirmed in correct:
        device = ev.result.device.name
        if device in chosen:
            continue
        bad = [(d, e) for d, e in verdicts[cand.id] if e.result.status != Status.OK]
        if bad:
            d, e = bad[0]
            notes.append(f"run {run.id} ({task.name}): refused candidate #{cand.id}: its evaluation on {d} was "
                         f"{e.result.status.value} ({e.result.reason})")
            refused += 1
            continue
        if confirmed is not None and confirmed.failures:
            notes.append(f"run {run.id} ({task.name}): refused candidate #{cand.id}: a re-measurement of it on "
                         f"{device} was {confirmed.failures[0]}")
            refused += 1
            continue
        if min_speedup is not None and _figure(ev, confirmed) < min_speedup:
            below += 1
            continue
        chosen[device] = Pick(task, run, cand, ev, tuple((d, e.result.status.value) for d, e in verdicts[cand.id]),
                              history, confirmed)
    if chosen:
        return list(chosen.values()), None
    fastest = format_speedup(_figure(correct[0][1], correct[0][2]))
    if below and min_speedup is not None:
        return [], (f"Run {run.id} ({task.name}) has no kernel at --min-speedup {min_speedup:g} (its fastest correct "
                    f"kernel is {fastest}, as the run reports it); lower --min-speedup or leave the run out.")
    return [], (f"Run {run.id} ({task.name}): every correct candidate failed its evaluation on some device ({refused} "
                f"refused), so none can be exported; see `opforge show {run.id}`.")


def _status_counts(history: tuple[ScoredCandidate, ...]) -> str:
    counts: dict[str, int] = defaultdict(int)
    for sc in history:
        counts[sc.result.status.value if sc.result is not None else "not evaluated"] += 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none yet"
