"""Evaluations per minute through the whole run loop (store writes, queue, strategy, runner, evaluator) with an
instant proposer: ready-made candidates (the tuner's neighbours of the seed, computed up front and made distinct by a
comment line) so that proposing costs nothing and the figure measures the loop and the evaluation harness.

    .venv/bin/python scripts/bench_loop.py                         # LocalRunner and RayRunner, 2 workers, 12 each
    .venv/bin/python scripts/bench_loop.py --runners local --evals 20 --task softmax
    .venv/bin/python scripts/bench_loop.py --runners instant --evals 500    # the loop alone, no evaluation

Prints a Markdown table (with the command, the date and the machine) for docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.tuner import neighbours  # noqa: E402
from benchmarks import builtin_task, seed_for  # noqa: E402
from evaluator import Candidate, EvalConfig, EvalResult, Status, Task, load_candidate, load_task  # noqa: E402
from evaluator.result import DeviceInfo, Timing  # noqa: E402
from evaluator.pool import LocalRunner, RayRunner, Runner  # noqa: E402
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Budget, Progress, Search, SearchSettings, start_run  # noqa: E402
from store import get_store  # noqa: E402


class InstantProposer:
    """Hands out precomputed candidates; never does any work."""

    def __init__(self, seed: Candidate, count: int) -> None:
        variants = [src for src, _ in neighbours(seed.source)] or [seed.source]
        self._ready = [Candidate.from_source(f"{variants[i % len(variants)]}\n# bench variant {i}\n", origin="tune",
                                             parents=(seed.digest,), note=f"variant {i}") for i in range(count)]

    async def propose(self, task: Task, parents: list[Candidate], inspirations: list[Candidate],
                      n: int) -> list[Candidate]:
        out, self._ready = self._ready[:n], self._ready[n:]
        return out


class InstantRunner:
    """Synthetic verdicts at once: the loop's own ceiling (store writes, queue, strategy), no evaluation at all."""

    def __init__(self, workers: int) -> None:
        self.capacity = workers

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        future: Future[EvalResult] = Future()
        future.set_result(EvalResult(Status.OK, "synthetic", candidate_ms=Timing(1.0, 0.0, 5),
                                     reference_ms=Timing(1.0, 0.0, 5), device=DeviceInfo("cpu", "synthetic")))
        return future

    def close(self) -> None:
        pass


def make_runner(kind: str, workers: int) -> Runner:
    if kind == "local":
        return LocalRunner(workers)
    if kind == "ray":
        return RayRunner(workers=workers)
    if kind == "instant":
        return InstantRunner(workers)
    raise SystemExit(f"bench_loop: unknown runner {kind!r}; use local, ray or instant")


@dataclass(frozen=True, slots=True)
class Row:
    runner: str
    workers: int
    evals: int
    statuses: str
    wall_s: float
    first_result_s: float
    steady_per_min: float

    @property
    def wall_per_min(self) -> float:
        return 60.0 * self.evals / self.wall_s


def bench(kind: str, task: Task, seed: Candidate, evals: int, workers: int, cfg: EvalConfig) -> Row:
    results_at: list[float] = []
    statuses: dict[str, int] = {}

    def on_progress(p: Progress) -> None:
        if p.event == "result" and p.last is not None:
            results_at.append(time.monotonic())
            statuses[str(p.last.status)] = statuses.get(str(p.last.status), 0) + 1

    with tempfile.TemporaryDirectory() as tmp:
        store = get_store(f"sqlite:///{tmp}/bench.db")
        start = time.monotonic()
        runner = make_runner(kind, workers)
        try:
            budget = Budget(evals)
            run = start_run(store, task, seed, RunConfig(), budget)
            Search(store, run.id, task, Proposing(InstantProposer(seed, 4 * evals)), runner,
                   SearchSettings(cfg, budget), on_progress=on_progress).run()
            end = time.monotonic()
        finally:
            runner.close()
            store.close()
    steady_s = results_at[-1] - results_at[0] if len(results_at) > 1 else float("nan")
    return Row(kind, workers, len(results_at), ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())),
               end - start, results_at[0] - start if results_at else float("nan"),
               60.0 * (len(results_at) - 1) / steady_s if steady_s == steady_s and steady_s > 0 else float("nan"))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import ray
    import torch
    import triton
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, no GPU (Triton interpreted); Python "
            f"{platform.python_version()}, torch {torch.__version__}, triton {triton.__version__}, ray {ray.__version__}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="relu", help="a built-in task name (default relu)")
    parser.add_argument("--evals", type=int, default=12, help="evaluations per runner (default 12)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runners", default="local,ray",
                        help="comma-separated: local, ray, instant (synthetic verdicts: the loop's own ceiling)")
    parser.add_argument("--timing-s", type=float, default=0.3, help="EvalConfig.max_timing_s (default 0.3)")
    args = parser.parse_args()
    task_path = builtin_task(args.task)
    task = load_task(task_path)
    seed_path = seed_for(task_path)
    if seed_path is None:
        parser.error(f"the built-in task {args.task} has no seed kernel")
    seed = load_candidate(seed_path, origin="seed")
    cfg = EvalConfig(max_timing_s=args.timing_s)
    rows = [bench(kind.strip(), task, seed, args.evals, args.workers, cfg) for kind in args.runners.split(",")]

    print(f"Command: `{' '.join(shlex.quote(a) for a in [sys.executable.split('/')[-1], *sys.argv])}`  ")
    print(f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  ")
    print(f"Machine: {machine()}  ")
    print(f"Task: {task.label} with its seed's tuner neighbours; EvalConfig(max_timing_s={args.timing_s:g}), other "
          "settings default  ")
    print()
    print("| runner | workers | evaluations | verdicts | wall s | to first result s | evals/min (wall) | "
          "evals/min (after first result) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.runner} | {r.workers} | {r.evals} | {r.statuses} | {r.wall_s:.1f} | {r.first_result_s:.1f} | "
              f"{r.wall_per_min:.1f} | {r.steady_per_min:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
