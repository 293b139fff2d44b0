"""A bench's configuration, typed: the run configuration every task's run starts with, and what only a bench has.

The store keeps it as one flat JSON object (`benches.config`: the run's keys beside the bench's own), which the
leaderboard reads; `BenchConfig.from_json` reads it back typed, unknown keys an error, as `RunConfig` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opforge.run.config import RunConfig, RunConfigError

BENCH_KEYS = ("tasks", "budget_per_task", "max_usd", "max_tokens", "use_archive", "device")  # not a run's settings


@dataclass(frozen=True, slots=True)
class BenchConfig:
    run: RunConfig                  # each task's run starts with this (its archive offer is decided per run)
    budget_per_task: int
    tasks: str | None = None        # a shell pattern on the suite's task labels; None: every task
    max_usd: float | None = None
    max_tokens: int | None = None
    use_archive: bool = True
    device: str | None = None       # the machine the bench's kernels are timed on (its roofline peaks)

    def __post_init__(self) -> None:
        if self.budget_per_task < 1:
            raise RunConfigError(f"a bench evaluates at least one candidate per task, not {self.budget_per_task}")

    def to_json(self) -> dict[str, Any]:
        out = self.run.to_json()
        out.pop("archive")
        out.update({"tasks": self.tasks, "budget_per_task": self.budget_per_task, "max_usd": self.max_usd,
                    "max_tokens": self.max_tokens, "use_archive": self.use_archive, "device": self.device})
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any], where: str = "the bench") -> "BenchConfig":
        """The stored configuration, typed; `where` names it in errors ("bench 3")."""
        run = RunConfig.from_json({k: v for k, v in data.items() if k not in BENCH_KEYS}, where)
        if data.get("budget_per_task") is None:
            raise RunConfigError(f"{where}'s configuration has no budget_per_task; start a new bench.")
        try:
            return BenchConfig(run=run, budget_per_task=int(data["budget_per_task"]), tasks=data.get("tasks"),
                               max_usd=data.get("max_usd"), max_tokens=data.get("max_tokens"),
                               use_archive=bool(data.get("use_archive", False)), device=data.get("device"))
        except RunConfigError as exc:
            raise RunConfigError(f"{where}'s configuration cannot be used: {exc}.") from None
