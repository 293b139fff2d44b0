"""Benchmark: a cold `opforge eval` against a naive one-process checker on the same files (not a test; figures go to
docs/PERFORMANCE.md).

The naive checker is what a KernelBench-style script does: one Python process imports torch (and Triton), executes
the task and the candidate files in itself, builds both models from one seed, checks one call with `allclose` and
times ten calls of each with `perf_counter`. It has no isolation, no second process, no probes: the floor that a
trusted evaluator's cold start is compared with. The two commands alternate, A then B, so that drifting load falls
on both; medians and their ratio are printed.

    .venv/bin/python scripts/bench_cold.py [--task T.py] [--candidate C.py] [--runs 5]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
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


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({done.returncode}): {(done.stderr or done.stdout)[-800:]}")
    return wall, done.stdout.strip().splitlines()[-1][:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="benchmarks/tiny/softmax.py")
    parser.add_argument("--candidate", default="benchmarks/tiny/softmax.seed.py")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if "triton" in Path(ROOT / args.candidate).read_text():
        env["TRITON_INTERPRET"] = "1"  # on a machine without a GPU, as the evaluator does
    naive_cmd = [sys.executable, "-c", NAIVE, args.task, args.candidate]
    opforge_cmd = [sys.executable, "-m", "opforge.cli", "eval", args.task, args.candidate, "--json"]
    naive, ours = [], []
    for i in range(args.runs):
        wall, line = run(naive_cmd, env)
        naive.append(wall)
        wall, out = run(opforge_cmd, env)
        ours.append(wall)
        print(f"run {i + 1}: naive {naive[-1]:.2f} s ({line}); opforge eval {ours[-1]:.2f} s", flush=True)
    n_med, o_med = statistics.median(naive), statistics.median(ours)
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"command: .venv/bin/python scripts/bench_cold.py --task {args.task} --candidate {args.candidate} "
          f"--runs {args.runs}")
    print(f"naive checker: median {n_med:.2f} s (min {min(naive):.2f}); cold opforge eval: median {o_med:.2f} s "
          f"(min {min(ours):.2f}); ratio of medians {o_med / n_med:.2f}x")


if __name__ == "__main__":
    main()
