"""How long drawing a task's fresh inputs takes: PyTorch's own draws against the fast draws' library
(`evaluator/worker/fast_draws.py`), side by side in shuffled rounds, with the workers' OpenMP settings and thread count.

Every timed call of an evaluation draws fresh inputs, so at a native benchmark size the draw is part of each call's
wall time (not of its timed time): it decides how many calls fit in a side's time cap. Timed here: 8 million
standard normals and uniforms (a 1984x4096 float32 tensor, the softmax task's input), a built-in task's whole
`get_inputs` through `TaskRuntime.inputs` (the task's own arithmetic included, e.g. softmax's `* 4.0`), and the
second distribution's value-by-value redraw (the normal and large-magnitude trials).

    .venv/bin/python scripts/bench_draws.py --rounds 15 --tasks softmax,relu

Prints a Markdown table of medians and minima in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

import torch  # noqa: E402

from evaluator.worker import heap  # noqa: E402
from evaluator.worker.fast_draws import FastDraws  # noqa: E402
from evaluator import harness_library  # noqa: E402
from evaluator.worker.task_runtime import TaskRuntime, _redraw  # noqa: E402

VALUES = 1984 * 4096


def cases(draws: FastDraws, tasks: list[str]) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """name -> (PyTorch's way, the library's way), each drawing once."""
    out = torch.empty(VALUES)
    x = torch.randn(VALUES) * 4.0
    gen = torch.Generator().manual_seed(1)
    table: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "8M normals": (lambda: torch.randn(VALUES), lambda: draws.fill("normal", out)),
        "8M uniforms": (lambda: torch.rand(VALUES), lambda: draws.fill("uniform", out)),
        "redraw of 8M values": (lambda: _redraw(x, gen, 4.0), lambda: draws.redraw(x, gen, 4.0)),
    }
    for name in tasks:
        source = (ROOT / "benchmarks" / "tiny" / f"{name}.py").read_text()
        plain, fast = TaskRuntime(source, name, "cpu"), TaskRuntime(source, name, "cpu", draws=draws)
        seeds = iter(range(1 << 30))
        table[f"{name}: the task's inputs"] = (lambda p=plain: p.inputs(0, next(seeds)),
                                               lambda f=fast: f.inputs(0, next(seeds)))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="timed draws of each way, interleaved (default 15)")
    parser.add_argument("--tasks", default="softmax,relu", help="built-in tasks (benchmarks/tiny) whose inputs to draw")
    args = parser.parse_args()
    text = harness_library.library_text()
    if text is None:
        raise SystemExit("bench_draws: the harness's native library did not build here (no C compiler?)")
    heap.keep_freed_memory()  # as in a worker: no fresh pages per draw
    table = cases(FastDraws(harness_library.load(text)), [t for t in args.tasks.split(",") if t])
    times: dict[tuple[str, int], list[float]] = {(name, way): [] for name in table for way in (0, 1)}
    for fns in table.values():  # once each, untimed: first-use set-up and the heap's first pages
        fns[0]()
        fns[1]()
    for _ in range(args.rounds):
        order = [(name, way) for name in table for way in (0, 1)]
        random.shuffle(order)
        for name, way in order:
            start = time.perf_counter()
            table[name][way]()
            times[(name, way)].append((time.perf_counter() - start) * 1e3)
    load = os.getloadavg()[0]
    print(f"date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {os.uname().machine}, "
          f"{os.cpu_count()} cores, {torch.get_num_threads()} threads  load average {load:.2f}")
    print(f"command: .venv/bin/python scripts/bench_draws.py --rounds {args.rounds} --tasks {args.tasks}\n")
    print("| draw | PyTorch ms (median, min) | fast draws ms (median, min) | ratio of medians |")
    print("|---|---|---|---|")
    for name in table:
        a, b = times[(name, 0)], times[(name, 1)]
        print(f"| {name} | {statistics.median(a):.1f} ({min(a):.1f}) | {statistics.median(b):.1f} ({min(b):.1f}) | "
              f"{statistics.median(a) / statistics.median(b):.1f}x |")


if __name__ == "__main__":
    main()
