"""Evaluations per minute through the whole run loop (store writes, queue, strategy, runner, evaluator) with an
instant proposer: ready-made candidates (the tuner's neighbours of the seed, computed up front and made distinct by a
comment line) so that proposing costs nothing and the figure measures the loop and the evaluation harness.

    .venv/bin/python scripts/bench_loop.py                         # LocalRunner and RayRunner, 2 workers, 12 each
    .venv/bin/python scripts/bench_loop.py --runners local --evals 20 --task softmax
    .venv/bin/python scripts/bench_loop.py --runners instant --evals 500    # the loop alone, no evaluation
    .venv/bin/python scripts/bench_loop.py --runners local --backend cpp --shape small --evals 40

`--backend cpp` evaluates the task's native seed and its tuner neighbours; `--shape small` runs the task at its
`INTERPRETER_SHAPE` (small kernels: the harness, not the kernel, is then the cost). For the local runner the table
also gives the timed phase's fill: the share of the wall time during which an evaluation held the machine's timed
phase (`evaluator/device/lock.py`), i.e. how busy the loop keeps the timing resource.

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
from benchmarks import builtin_task, seed_path  # noqa: E402
from evaluator import Candidate, EvalConfig, EvalResult, Status, Task, load_candidate, load_task  # noqa: E402
from evaluator.result import DeviceInfo, Timing  # noqa: E402
from evaluator.driver.evaluate import LocalEvaluator  # noqa: E402
from evaluator.worker.heap import keep_freed_memory  # noqa: E402
from evaluator.driver.pool import LocalRunner, Runner  # noqa: E402
from evaluator.driver.ray_runner import RayRunner  # noqa: E402
from opforge.run.config import RunConfig
from opforge.run.proposals import Proposing
from opforge.run.search import Progress, Search, SearchSettings  # noqa: E402
from opforge.run.start import Budget, start_run  # noqa: E402
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


class PhaseClock:
    """Adds up the time evaluations held the device's timed phase (the lock's observer: start and end events)."""

    def __init__(self) -> None:
        self.held_s = 0.0
        self._since: float | None = None

    def __call__(self, event: str, key: str, what: str) -> None:
        now = time.monotonic()
        if event == "start":
            self._since = now
        elif self._since is not None:
            self.held_s += now - self._since
            self._since = None


def make_runner(kind: str, workers: int, phases: PhaseClock) -> Runner:
    if kind == "local":
        keep_freed_memory()  # as `opforge optimize --runner local` does (evaluator/worker/heap.py)
        return LocalRunner(workers, evaluator=LocalEvaluator(phase_observer=phases))
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
    timed_fill: float | None  # share of the wall time the timed phase was held (local runner only)

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

    phases = PhaseClock()
    with tempfile.TemporaryDirectory() as tmp:
        store = get_store(f"sqlite:///{tmp}/bench.db")
        start = time.monotonic()
        runner = make_runner(kind, workers, phases)
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
               60.0 * (len(results_at) - 1) / steady_s if steady_s == steady_s and steady_s > 0 else float("nan"),
               phases.held_s / (end - start) if kind == "local" else None)


def small_task(task_path: Path, folder: Path) -> Path:
    """A copy of the task whose module values are its INTERPRETER_SHAPE's (appended: `get_inputs` reads them late)."""
    from evaluator.worker.task_runtime import TaskRuntime
    source = task_path.read_text()
    shape = getattr(TaskRuntime(source, task_path.stem, "cpu", True).module, "INTERPRETER_SHAPE", None) or {}
    out = folder / task_path.name
    out.write_text(source + "\n" + "".join(f"{k} = {v!r}\n" for k, v in shape.items()))
    return out


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
    parser.add_argument("--timing-s", type=float, default=EvalConfig().max_timing_s,
                        help="EvalConfig.max_timing_s (default: the evaluator's own)")
    parser.add_argument("--backend", default="triton", choices=("triton", "cpp"),
                        help="whose seed (and tuner neighbours) to evaluate: Triton (interpreted here) or native C")
    parser.add_argument("--shape", default="task", choices=("task", "small"),
                        help="small: the task at its INTERPRETER_SHAPE (small kernels), whatever the backend")
    args = parser.parse_args()
    task_path = builtin_task(args.task)
    with tempfile.TemporaryDirectory() as tmp:
        task = load_task(small_task(task_path, Path(tmp)) if args.shape == "small" else task_path)
    seed_file = seed_path(task_path, args.backend)
    if seed_file is None:
        parser.error(f"the built-in task {args.task} has no {args.backend} seed kernel")
    seed = load_candidate(seed_file, origin="seed")
    cfg = EvalConfig(max_timing_s=args.timing_s)
    rows = [bench(kind.strip(), task, seed, args.evals, args.workers, cfg) for kind in args.runners.split(",")]

    print(f"Command: `{' '.join(shlex.quote(a) for a in [sys.executable.split('/')[-1], *sys.argv])}`  ")
    print(f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  ")
    print(f"Machine: {machine()}  ")
    print(f"Task: {task.label} ({args.shape} shape) with its {args.backend} seed's tuner neighbours; "
          f"EvalConfig(max_timing_s={args.timing_s:g}), other settings default; load average at the end "
          f"{os.getloadavg()[0]:.1f}  ")
    print()
    print("| runner | workers | evaluations | verdicts | wall s | to first result s | evals/min (wall) | "
          "evals/min (after first result) | timed phase's fill |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        fill = f"{100 * r.timed_fill:.0f}%" if r.timed_fill is not None else "-"
        print(f"| {r.runner} | {r.workers} | {r.evals} | {r.statuses} | {r.wall_s:.1f} | {r.first_result_s:.1f} | "
              f"{r.wall_per_min:.1f} | {r.steady_per_min:.1f} | {fill} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
