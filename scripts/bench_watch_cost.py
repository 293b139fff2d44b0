"""Benchmark: what the worker's call watch (PyTorch's profiler recording every ATen operator,
`evaluator.worker.observer.CallObserver`) adds to a reference's eager forward, per task (CPU).

The candidate's timed calls run under the watch; until 2026-11-29 the reference's did too, and this is what it cost
them: the forward timed bare and inside the watch (the watch started before the start mark and stopped after the
end mark, as in the worker), interleaved call by call in one process with the workers' OpenMP settings, the median
of each, the difference, and the ATen operators the profiler records in one forward (so the cost per operator).

    .venv/bin/python scripts/bench_watch_cost.py --tasks relu,softmax,layernorm,transformer_block
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import KINETO_QUIET, openmp_environment  # noqa: E402  (imports no torch)

os.environ.update(openmp_environment())  # before torch loads libgomp
os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)

import torch  # noqa: E402

from benchmarks import builtin_task  # noqa: E402
from evaluator.worker.observer import CallObserver  # noqa: E402


def watch_cost(task_name: str, calls: int) -> tuple[float, float, int]:
    """(bare ms, watched ms, ATen operators recorded a forward) of the task's eager forward."""
    spec = importlib.util.spec_from_file_location(f"watch_cost_{task_name}", builtin_task(task_name))
    assert spec is not None and spec.loader is not None
    task = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(task)
    model = task.Model(*task.get_init_inputs()).eval()
    inputs = task.get_inputs()
    bare: list[float] = []
    watched: list[float] = []
    with torch.no_grad():
        for _ in range(5):
            model(*inputs)
        for i in range(calls):
            for side in ((bare, watched) if i % 2 == 0 else (watched, bare)):
                # As in the worker: the watch starts before the timer's start mark and stops after its end mark, so
                # only its record of each operator lies between them.
                with CallObserver() if side is watched else contextlib.nullcontext():
                    t0 = time.perf_counter()
                    model(*inputs)
                    side.append((time.perf_counter() - t0) * 1e3)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            model(*inputs)
    ops = sum(1 for e in prof.events() if e.name.startswith("aten::"))
    return statistics.median(bare), statistics.median(watched), ops


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="relu,softmax,layernorm,transformer_block",
                        help="comma-separated built-in task names")
    parser.add_argument("--calls", type=int, default=200, help="forwards of each kind per task (200)")
    args = parser.parse_args()
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores  load average at start: {os.getloadavg()[0]:.2f}")
    print(f"command: .venv/bin/python scripts/bench_watch_cost.py --tasks {args.tasks} --calls {args.calls}")
    print("| task | bare ms | watched ms | added | ATen operators a forward | us an operator |")
    print("|---|---|---|---|---|---|")
    for name in (t.strip() for t in args.tasks.split(",") if t.strip()):
        bare, watched, ops = watch_cost(name, args.calls)
        print(f"| {name} | {bare:.3f} | {watched:.3f} | {watched - bare:+.3f} ms ({(watched / bare - 1) * 100:+.1f}%) "
              f"| {ops} | {(watched - bare) * 1e3 / max(ops, 1):.1f} |", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
