"""Benchmark: a plain timing of each built-in native seed against eager PyTorch, beside opforge's figure (CPU).

The plain timing is what anyone would write: in a separate process that imports nothing of the evaluator's timing,
the task's model and its native seed (`NAME.cpp.py`) are called on `--sets` input sets drawn by the task's own
`get_inputs` (cycled, so a set is not in cache from its previous call where the sets outgrow the cache), the two
sides alternated call by call, each call timed with `time.perf_counter`, the median of each side kept. Both sides
wait passively in OpenMP (`OMP_WAIT_POLICY=passive`, as the evaluator's workers do), with as many threads as the
machine has CPUs. Beside it, opforge's figure for the same seed: one evaluation with the default protocol, the first
of a fresh evaluator (its worst case).

Where the two differ, the difference is meant to be chosen, not accidental (docs/EVALUATOR.md, "The memory a timed
call runs in"): opforge evicts inputs of 16 MiB or more from every cache before each call (a plain timing with sets
that outgrow the last-level cache comes close to that; smaller tasks stay cached in both), draws fresh inputs for
every call, and runs each side in a worker of its own with 4 KiB pages and a kept heap. `--evict` also evicts the
plain timing's inputs before each call (a read of a buffer four times the reported last-level cache, no opforge
code), to show how much of a difference is the cache.

    .venv/bin/python scripts/bench_plain.py --tasks relu,softmax,layernorm,matmul_bias
    .venv/bin/python scripts/bench_plain.py                 # every built-in task with a native seed
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PLAIN = r"""
import importlib.util, json, os, statistics, sys, time
import torch

def module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

task_path, seed_path, sets, budget_s, evict = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), \
    sys.argv[5] == "1"
task, seed = module(task_path, "plain_task"), module(seed_path, "plain_seed")
init = task.get_init_inputs()
torch.manual_seed(0)
model = task.Model(*init).eval()
native = seed.ModelNew(*init)
native.load_state_dict(model.state_dict())
inputs = []
for i in range(sets):
    torch.manual_seed(1000 + i)
    inputs.append(task.get_inputs())
llc = 0
cache_dir = "/sys/devices/system/cpu/cpu0/cache"
for index in os.listdir(cache_dir) if os.path.isdir(cache_dir) else []:
    try:
        text = open(f"{cache_dir}/{index}/size").read().strip()
    except OSError:
        continue
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    llc = max(llc, int(text.rstrip("KM")) * scale)
llc = llc or 32 << 20
flush = torch.ones(llc)  # four last-level caches of floats
sides = {"eager": model, "native": native}
times = {k: [] for k in sides}
with torch.no_grad():
    for fn in sides.values():
        for args in inputs:
            fn(*args)  # warm-up: first calls, allocator, OpenMP's pool
    start, i = time.perf_counter(), 0
    while min(len(t) for t in times.values()) < 10 or time.perf_counter() - start < budget_s:
        args = inputs[i % sets]
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]  # alternate which side goes first
        for key in order:
            if evict:
                flush.max()
            t0 = time.perf_counter()
            sides[key](*args)
            times[key].append((time.perf_counter() - t0) * 1e3)
        i += 1
print(json.dumps({k: statistics.median(v) for k, v in times.items()} | {"calls": len(times["eager"])}))
"""


def plain_ms(task_path: Path, seed: Path, sets: int, budget_s: float, evict: bool,
             kept_heap: bool = False) -> dict[str, float]:
    """The plain timing, in a fresh process: {"eager": ms, "native": ms, "calls": n}. `kept_heap`: the child's glibc
    heap keeps what it frees, as opforge's workers' does (glibc's own environment settings, no opforge code)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "passive", "OMP_NUM_THREADS": str(os.cpu_count() or 1),
           "PYTHONPATH": str(ROOT)}
    if kept_heap:
        env |= {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(2**31 - 1)}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-c", PLAIN, str(task_path), str(seed), str(sets), str(budget_s),
                           "1" if evict else "0"], capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{task_path.stem}: the plain timing failed: {proc.stderr.strip()[-400:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def opforge_ms(task_path: Path, seed: Path) -> tuple[float, float, str]:
    """(reference median ms, candidate median ms, the verdict's memory conditions) of one evaluation in a fresh
    evaluator."""
    from evaluator import EvalConfig, LocalEvaluator, load_candidate, load_task
    ev = LocalEvaluator()
    try:
        r = ev.evaluate(load_task(task_path), load_candidate(seed, origin="seed"),
                        EvalConfig(device="cpu", profile=False))
    finally:
        ev.close()
    if not r.ok or r.reference_ms is None or r.candidate_ms is None:
        raise SystemExit(f"{task_path.stem}: opforge did not accept the seed: {r.status.value}: {r.reason}")
    return r.reference_ms.median_ms, r.candidate_ms.median_ms, r.device.memory or ""


def main() -> int:
    from evaluator.sandbox.zygote_env import openmp_environment
    os.environ.update(openmp_environment())  # this process drives evaluations: the workers' settings
    from benchmarks import builtin_task, seed_path, suite_tasks
    from evaluator.worker.heap import keep_freed_memory
    from evaluator.worker.memory_conditions import host_thp_setting

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="", help="comma-separated built-in task names (default: every built-in "
                                                     "task with a native seed)")
    parser.add_argument("--sets", type=int, default=3, help="input sets cycled in the plain timing (3)")
    parser.add_argument("--budget-s", type=float, default=2.0, help="the plain timing's seconds per task (2)")
    parser.add_argument("--evict", action="store_true", help="also evict the plain timing's inputs before each call")
    parser.add_argument("--kept-heap", action="store_true",
                        help="the plain process keeps its C heap as opforge's workers do (no fresh pages per output)")
    args = parser.parse_args()
    keep_freed_memory()
    tasks = [builtin_task(t.strip()) for t in args.tasks.split(",") if t.strip()] if args.tasks else \
        [t for t in suite_tasks("all") if seed_path(t, "cpp") is not None]
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores, transparent huge pages {host_thp_setting()}  load average at start: "
          f"{os.getloadavg()[0]:.2f}")
    print(f"command: .venv/bin/python scripts/bench_plain.py --tasks {args.tasks or '(all)'} --sets {args.sets} "
          f"--budget-s {args.budget_s}" + (" --evict" if args.evict else "")
          + (" --kept-heap" if args.kept_heap else ""))
    print("| task | plain eager ms | plain seed ms | plain speedup | opforge reference ms | opforge seed ms "
          "| opforge speedup | opforge / plain |")
    print("|---|---|---|---|---|---|---|---|")
    memory = ""
    ratios = []
    for task_path in tasks:
        seed = seed_path(task_path, "cpp")
        assert seed is not None
        plain = plain_ms(task_path, seed, args.sets, args.budget_s, args.evict, args.kept_heap)
        ref_ms, cand_ms, memory = opforge_ms(task_path, seed)
        plain_x, opforge_x = plain["eager"] / plain["native"], ref_ms / cand_ms
        ratios.append(opforge_x / plain_x)
        print(f"| {task_path.parent.name}/{task_path.stem} | {plain['eager']:.3f} | {plain['native']:.3f} "
              f"| {plain_x:.2f}x | {ref_ms:.3f} | {cand_ms:.3f} | {opforge_x:.2f}x | {opforge_x / plain_x:.2f} |",
              flush=True)
    if ratios:
        within = sum(abs(r - 1) <= 0.10 for r in ratios)
        print(f"opforge's speedup within 10% of the plain one for {within} of {len(ratios)} tasks (opforge / plain "
              f"{min(ratios):.2f}-{max(ratios):.2f}, median {statistics.median(ratios):.2f})")
    print(f"opforge's memory conditions: {memory}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
