"""Benchmark: whether a native seed's time (and eager PyTorch's) depends on where in a page its inputs start (CPU,
issue 36).

A kernel's input and output are each one large block; a CPU can treat two addresses that agree in their low 12 bits as
possibly the same (4K aliasing: a load waits on an unrelated store), and a cache set's or a prefetcher's behaviour can
follow the same bits. The heap places a block at an offset within a page that depends on what was allocated before:
the same in every call of one worker that keeps its heap, but not between two workers. So if the offset matters, one
kernel reads two speeds in two evaluations and one speed within each, as issue 36 saw.

In one process, the task's inputs are copied to `--offsets` byte offsets within a page (in one anonymous mapping of
4 KiB pages), and its eager model and native seed (`NAME.cpp.py`) are timed call by call with the evaluator's timer
(cold-cache rule included), the offsets interleaved round by round. The output's own offset, where the seed's first
call put it, is printed beside.

    .venv/bin/python scripts/bench_offsets.py --tasks softmax,layernorm --rounds 30
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # both sides' OpenMP as in the workers: before libgomp loads with torch

import torch  # noqa: E402
from bench_pages import MADV_NOHUGEPAGE, mapped_copy, module  # noqa: E402  (this folder: the same mapping, offset)

from benchmarks import builtin_task, seed_path  # noqa: E402
from evaluator.harness_library import local_flush  # noqa: E402
from evaluator.worker.heap import keep_freed_memory  # noqa: E402
from evaluator.worker.timing import CallTimer  # noqa: E402

PAGE = 4096


def placed(t: torch.Tensor, offset: int) -> torch.Tensor:
    """`t`'s values in a fresh anonymous mapping of 4 KiB pages, starting `offset` bytes into a page."""
    return mapped_copy(t, MADV_NOHUGEPAGE, offset)


def run(task_name: str, offsets: list[int], rounds: int) -> None:
    task_path = builtin_task(task_name)
    seed = seed_path(task_path, "cpp")
    assert seed is not None, f"{task_name} has no native seed"
    task, native_mod = module(task_path, "offsets_task"), module(seed, "offsets_seed")
    init = task.get_init_inputs()
    model = task.Model(*init).eval()
    native = native_mod.ModelNew(*init)
    native.load_state_dict(model.state_dict())
    base = task.get_inputs()
    variants = {o: [placed(x, o) if isinstance(x, torch.Tensor) else x for x in base] for o in offsets}
    timer = CallTimer(torch.device("cpu"), flush=local_flush())
    timer.calibrate()
    times: dict[tuple[int, str], list[float]] = {(o, s): [] for o in offsets for s in ("eager", "seed")}
    out_offsets: dict[int, int] = {}
    with torch.no_grad():
        for o, inputs in variants.items():
            out = native(*inputs)
            out_offsets[o] = out.data_ptr() % PAGE if isinstance(out, torch.Tensor) else -1
        for _ in range(rounds):
            for o, inputs in variants.items():
                for side, fn in (("eager", model), ("seed", native)):
                    times[(o, side)].append(timer.time_call(fn, inputs)[0])
    print(f"\n{task_name}: inputs at each offset within a page, the seed's output where its first call put it")
    print("| input offset | output offset | eager ms | seed ms (IQR) | speedup |")
    print("|---|---|---|---|---|")
    for o in offsets:
        eager, seeds = statistics.median(times[(o, "eager")]), times[(o, "seed")]
        q = statistics.quantiles(seeds, n=4)
        seed_ms = statistics.median(seeds)
        print(f"| {o} | {out_offsets[o]} | {eager:.3f} | {seed_ms:.3f} ({q[0]:.3f}-{q[2]:.3f}) | "
              f"{eager / seed_ms:.2f}x |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="softmax,layernorm", help="comma-separated built-in task names")
    parser.add_argument("--offsets", default="0,64,1024,2048,3072,4032",
                        help="byte offsets within a page for the inputs (multiples of 64: PyTorch's alignment)")
    parser.add_argument("--rounds", type=int, default=30, help="calls per side and offset (interleaved)")
    args = parser.parse_args()
    offsets = [int(o) for o in args.offsets.split(",")]
    if any(o < 0 or o >= PAGE or o % 64 for o in offsets):
        parser.error(f"--offsets must be multiples of 64 below {PAGE}, not {args.offsets}")
    keep_freed_memory()
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores  load average at start: {os.getloadavg()[0]:.2f}")
    print(f"command: .venv/bin/python scripts/bench_offsets.py --tasks {args.tasks} --offsets {args.offsets} "
          f"--rounds {args.rounds}")
    for name in args.tasks.split(","):
        run(name.strip(), offsets, args.rounds)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
