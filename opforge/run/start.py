"""What a run starts with: its budget, and its record in the store with generation 0 (the seed and, with the archive,
the task's fastest earlier kernels) queued first. The run loop that follows is `search.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluator.candidate import Candidate
from evaluator.measure.task_work import task_work
from evaluator.task import Task
from opforge.run import archive
from opforge.run.config import RunConfig
from store import RunRecord, Store, TaskRecord


@dataclass(frozen=True, slots=True)
class Budget:
    max_candidates: int
    time_limit_s: float | None = None   # wall time of one invocation (a resumed run gets it again)
    worker_s: float | None = None       # seconds workers were busy: submit to verdict per candidate, summed
    usd: float | None = None            # LLM dollars over the whole run (resumes included)
    tokens: int | None = None           # LLM tokens, in and out, over the whole run

    def __post_init__(self) -> None:
        if self.max_candidates < 1:
            raise ValueError(f"the budget must allow at least one candidate, not {self.max_candidates}")

    def to_json(self) -> dict[str, Any]:
        return {"max_candidates": self.max_candidates, "time_limit_s": self.time_limit_s, "worker_s": self.worker_s,
                "usd": self.usd, "tokens": self.tokens}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "Budget":
        return Budget(int(data["max_candidates"]), data.get("time_limit_s"), data.get("worker_s", data.get("gpu_s")),
                      data.get("usd"), data.get("tokens"))  # "gpu_s": the key before store revision 0006



def start_run(store: Store, task: Task, seed: Candidate | None, config: RunConfig, budget: Budget,
              bench_id: int | None = None, use_archive: bool = False, device: str | None = None) -> RunRecord:
    """Record the task, a new run and its seed kernel (generation 0, queued first); without a seed the proposer's
    first round writes kernels from the reference. With `use_archive`, the task's fastest earlier kernels join
    generation 0 and related tasks' kernels are noted as inspirations (see `opforge.run.archive`).

    Generation 0 never outgrows the budget: the seed comes first, then as many archived kernels (fastest first) as
    the budget leaves room for; the run's configuration names only those it took."""
    task_record = store.add_task(task)
    offer = None
    if use_archive:
        task_record = ensure_task_work(store, task_record, task)
        offer = archive.find(store, task_record, device, backend=archive.run_backend(config))
    seeds = _fit_budget(([seed] if seed is not None else []) + (archive.seed_candidates(offer) if offer else []),
                        budget.max_candidates)
    if offer is not None:
        offer = archive.only_seeds(offer, {c.digest for c in seeds})
    if offer is not None:
        config = config.with_archive(offer.to_json())
    run = store.create_run(task_record.id, config.to_json(), budget.to_json(), bench_id=bench_id)
    ids: list[int] = []
    for i, candidate in enumerate(seeds):
        record, _ = store.add_candidate(run.id, task_record.id, candidate, generation=0, island=i)
        if record.id not in ids:
            ids.append(record.id)
    if ids:
        store.enqueue(run.id, ids)
    return run


def _fit_budget(seeds: Sequence[Candidate], max_candidates: int) -> list[Candidate]:
    """The first `max_candidates` distinct kernels (by source digest) of `seeds`, in order."""
    out: dict[str, Candidate] = {}
    for candidate in seeds:
        if len(out) >= max_candidates:
            break
        out.setdefault(candidate.digest, candidate)
    return list(out.values())


def ensure_task_work(store: Store, record: TaskRecord, task: Task) -> TaskRecord:
    """The task's record with its work and compute ops counted (once per task and store)."""
    if record.ops is not None and record.flops is not None:
        return record
    work = task_work(task)
    if work is None:
        return record
    return store.set_task_work(record.id, work.flops, work.min_bytes, work.ops)
