"""Benchmark: how the page backing of a task's inputs moves a native seed's time and eager PyTorch's (CPU, issue 36).

In one process, the task's eager model and its native seed (`NAME.cpp.py`) are timed call by call with the
evaluator's timer (cold-cache rule included) on the same input values held in three kinds of memory: PyTorch's own
allocation (the C heap, as in a worker), a private anonymous mapping advised to use 2 MiB pages (MADV_HUGEPAGE), and
one advised not to (MADV_NOHUGEPAGE, 4 KiB pages). The AnonHugePages the process holds are printed before and after:
on a host whose transparent huge pages are `never`, the 2 MiB variant gets none. The evaluator's workers run with
4 KiB pages whatever the host says (evaluator/worker/memory_conditions.py); this shows what that holds fixed.

    .venv/bin/python scripts/bench_pages.py --tasks relu,softmax --rounds 40
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib.util
import mmap
import os
import platform
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

import torch  # noqa: E402

from benchmarks import builtin_task, seed_path  # noqa: E402
from evaluator.harness_library import local_flush  # noqa: E402
from evaluator.worker.heap import keep_freed_memory  # noqa: E402
from evaluator.worker.memory_conditions import host_thp_setting  # noqa: E402
from evaluator.worker.timing import CallTimer  # noqa: E402

MADV_HUGEPAGE, MADV_NOHUGEPAGE = 14, 15
HUGE_BYTES = 2 << 20
_libc = ctypes.CDLL(None)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_mappings: list[mmap.mmap] = []  # kept alive while their tensors are


def mapped_copy(t: torch.Tensor, advice: int, offset: int = 0) -> torch.Tensor:
    """`t`'s values in a private anonymous mapping, 2 MiB aligned, advised `advice` before its first touch; starting
    `offset` bytes past the alignment (`bench_offsets.py`)."""
    size = t.numel() * t.element_size()
    region = mmap.mmap(-1, size + 2 * HUGE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    _mappings.append(region)
    address = ctypes.addressof(ctypes.c_char.from_buffer(region))
    start = -(-address // HUGE_BYTES) * HUGE_BYTES
    _libc.madvise(start, -(-size // HUGE_BYTES) * HUGE_BYTES, advice)
    out = torch.frombuffer((ctypes.c_char * size).from_address(start + offset), dtype=t.dtype).view(t.shape)
    out.copy_(t)  # the first touch, after the advice
    return out


def anon_huge_kib() -> int:
    with open("/proc/self/smaps") as f:
        return sum(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))


def module(path: Path, name: str):  # noqa: ANN201 - a module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(task_name: str, rounds: int) -> None:
    task_path = builtin_task(task_name)
    seed = seed_path(task_path, "cpp")
    assert seed is not None
    task, native_mod = module(task_path, "pages_task"), module(seed, "pages_seed")
    init = task.get_init_inputs()
    model = task.Model(*init).eval()
    native = native_mod.ModelNew(*init)
    native.load_state_dict(model.state_dict())
    base = task.get_inputs()
    variants = {"heap": [x.clone() if isinstance(x, torch.Tensor) else x for x in base],
                "2 MiB": [mapped_copy(x, MADV_HUGEPAGE) if isinstance(x, torch.Tensor) else x for x in base],
                "4 KiB": [mapped_copy(x, MADV_NOHUGEPAGE) if isinstance(x, torch.Tensor) else x for x in base]}
    before = anon_huge_kib()
    timer = CallTimer(torch.device("cpu"), flush=local_flush())
    timer.calibrate()
    times: dict[tuple[str, str], list[float]] = {(k, s): [] for k in variants for s in ("eager", "seed")}
    with torch.no_grad():
        for _ in range(rounds):
            for key, inputs in variants.items():
                for side, fn in (("eager", model), ("seed", native)):
                    times[(key, side)].append(timer.time_call(fn, inputs)[0])
    print(f"\n{task_name}: AnonHugePages {before} kB after the copies, {anon_huge_kib()} kB at the end")
    print("| inputs in | eager ms | seed ms | speedup |")
    print("|---|---|---|---|")
    for key in variants:
        eager, seed_ms = statistics.median(times[(key, "eager")]), statistics.median(times[(key, "seed")])
        print(f"| {key} | {eager:.3f} | {seed_ms:.3f} | {eager / seed_ms:.2f}x |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="relu,softmax", help="comma-separated built-in task names")
    parser.add_argument("--rounds", type=int, default=40, help="calls per side and backing (interleaved)")
    args = parser.parse_args()
    keep_freed_memory()
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores, transparent huge pages {host_thp_setting()}  load average at start: "
          f"{os.getloadavg()[0]:.2f}")
    print(f"command: .venv/bin/python scripts/bench_pages.py --tasks {args.tasks} --rounds {args.rounds}")
    for name in args.tasks.split(","):
        run(name.strip(), args.rounds)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
