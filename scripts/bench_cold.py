"""Benchmark: a cold `opforge eval` against a naive one-process checker on the same files (not a test; figures go to
docs/PERFORMANCE.md).

The naive checker is what a KernelBench-style script does: one Python process imports torch (and Triton), executes
the task and the candidate files in itself, builds both models from one seed, checks one call with `allclose` and
times ten calls of each with `perf_counter`. It has no isolation, no second process, no probes: the floor that a
trusted evaluator's cold start is compared with. The two commands alternate, A then B, so that drifting load falls
on both; medians and their ratio are printed.

    .venv/bin/python scripts/bench_cold.py [--task T.py] [--candidate C.py] [--runs 5] [--base OTHER_CHECKOUT]

With `--base`, a second checkout's `opforge eval` (e.g. `git worktree add ../base main`) runs in each round too, in
alternating order, so that a change is compared with its base under the same load. The CPU time of each command's
whole process tree (its reaped children) is printed beside the wall: on a shared machine the wall also holds waits
for other evaluations' timed phases (the device lock is machine-wide), the CPU time does not. The minor page faults
of the tree are printed too: on a VM a fresh page can cost 2-12 us (docs/PERFORMANCE-HISTORY.md, 2026-11-25).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

NAIVE = r"""
import os, sys, time, types
import torch
task_path, cand_path = sys.argv[1], sys.argv[2]
cand_src = open(cand_path).read()
if "triton" in cand_src:
    import triton  # noqa: F401 - imported by the candidate; counted like the evaluator's zygotes count it
def load(path, name):
    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(open(path).read(), path, "exec"), module.__dict__)
    return module
task, cand = load(task_path, "task"), load(cand_path, "candidate")
torch.manual_seed(0)
ref = task.Model(*task.get_init_inputs())
torch.manual_seed(0)
new = cand.ModelNew(*task.get_init_inputs())
new.load_state_dict(ref.state_dict(), strict=False)
inputs = task.get_inputs()
with torch.no_grad():
    expected, got = ref(*inputs), new(*inputs)
    ok = torch.allclose(expected, got, atol=1e-4, rtol=1e-4)
    def time_of(model):
        times = []
        for _ in range(10):
            t0 = time.perf_counter(); model(*inputs); times.append(time.perf_counter() - t0)
        return sorted(times)[5]
    print(f"naive: ok={ok} speedup={time_of(ref) / time_of(new):.3f}")
"""


def run(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the process tree, its minor page faults, the last line printed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({done.returncode}): {(done.stderr or done.stdout)[-800:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, after.ru_minflt - before.ru_minflt, done.stdout.strip().splitlines()[-1][:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="benchmarks/tiny/softmax.py")
    parser.add_argument("--candidate", default="benchmarks/tiny/softmax.seed.py")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--base", type=Path, default=None,
                        help="another opforge checkout whose `opforge eval` alternates with this one's")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if "triton" in Path(ROOT / args.candidate).read_text():
        env["TRITON_INTERPRET"] = "1"  # on a machine without a GPU, as the evaluator does
    naive_cmd = [sys.executable, "-c", NAIVE, args.task, args.candidate]
    opforge_cmd = [sys.executable, "-m", "opforge.cli", "eval", str(ROOT / args.task), str(ROOT / args.candidate),
                   "--json"]
    checkouts = {"opforge eval": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    walls: dict[str, list[float]] = {"naive": [], **{k: [] for k in checkouts}}
    cpus: dict[str, list[float]] = {k: [] for k in walls}
    faults: dict[str, list[int]] = {k: [] for k in walls}
    for i in range(args.runs):
        wall, cpu, fault, line = run(naive_cmd, env)
        walls["naive"].append(wall)
        cpus["naive"].append(cpu)
        faults["naive"].append(fault)
        order = list(checkouts) if i % 2 == 0 else list(reversed(checkouts))
        for name in order:
            wall, cpu, fault, _ = run(opforge_cmd, {**env, "PYTHONPATH": str(checkouts[name])}, checkouts[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
            faults[name].append(fault)
        print(f"run {i + 1}: naive {walls['naive'][-1]:.2f} s ({line}); " + "; ".join(
            f"{name} {walls[name][-1]:.2f} s (CPU {cpus[name][-1]:.2f} s)" for name in checkouts), flush=True)
    n_med = statistics.median(walls["naive"])
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"command: .venv/bin/python scripts/bench_cold.py --task {args.task} --candidate {args.candidate} "
          f"--runs {args.runs}" + (f" --base {args.base}" if args.base else ""))
    print(f"naive checker: median {n_med:.2f} s (min {min(walls['naive']):.2f}), CPU "
          f"{statistics.median(cpus['naive']):.2f} s, {statistics.median(faults['naive']):.0f} page faults")
    for name in checkouts:
        o_med = statistics.median(walls[name])
        print(f"cold {'opforge eval' if name == 'opforge eval' else name + ' opforge eval'}: median {o_med:.2f} s "
              f"(min {min(walls[name]):.2f}), CPU {statistics.median(cpus[name]):.2f} s, "
              f"{statistics.median(faults[name]):.0f} page faults; ratio of medians {o_med / n_med:.2f}x")


if __name__ == "__main__":
    main()
