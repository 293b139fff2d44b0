"""Benchmark: the evaluator's own overhead per evaluation on CPU (not a test; figures go to docs/PERFORMANCE.md).

A trivially small task (ReLU over 64 floats) and an honest Triton candidate, so that nearly all of an evaluation's
wall time is the harness itself: policy check, forking the two workers, loading task and candidate, the correctness
trials and probes, the interleaved timing protocol's messages, the rechecks and tear-down. Overhead is reported as
wall time minus the time spent inside the timed calls themselves (median x reps for each side, plus warm-up).

    .venv/bin/python scripts/bench_harness.py [--evaluations 10] [--sandbox auto|bwrap|process] [--backend triton|cpp]

`--backend cpp` evaluates a native C ReLU (`load_c`, built once by the build stage and cached) instead of the
interpreted Triton one: the call itself then costs microseconds, so the figure is the harness alone.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import tempfile
import time
from pathlib import Path

from evaluator import Candidate, EvalConfig, LocalEvaluator, load_task
from evaluator.worker.heap import keep_freed_memory

TASK = """import torch
import torch.nn as nn
N = 64
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""
CANDIDATE = """import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, tl.maximum(tl.load(x + offs, mask=mask), 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y
"""


NATIVE_CANDIDATE = """import torch
import torch.nn as nn
from evaluator.native import load_c

lib = load_c("relu64", r\"\"\"
#include <stdint.h>
void relu(const float* restrict x, float* restrict y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
\"\"\", functions=["relu"], flags=["-O3", "-march=native"])

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=10)
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "process"))
    parser.add_argument("--backend", default="triton", choices=("triton", "cpp"),
                        help="the candidate: an interpreted Triton ReLU, or a native C one")
    parser.add_argument("--timing-s", type=float, default=0.2, help="each side's timing cap (EvalConfig.max_timing_s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "relu64.py"
        path.write_text(TASK)
        task = load_task(path)
    cand = Candidate.from_source(NATIVE_CANDIDATE if args.backend == "cpp" else CANDIDATE)
    cfg = EvalConfig(device="cpu", max_timing_s=args.timing_s, warmup_ms=5.0, profile=False, sandbox=args.sandbox)
    keep_freed_memory()  # as opforge's own driving processes do (evaluator/worker/heap.py)
    ev = LocalEvaluator(sandbox=args.sandbox)
    t0 = time.perf_counter()
    first = ev.evaluate(task, cand, cfg)
    cold_s = time.perf_counter() - t0
    assert first.ok, first.reason
    walls, timed, overheads = [], [], []
    for _ in range(args.evaluations):
        t0 = time.perf_counter()
        r = ev.evaluate(task, cand, cfg)
        wall = time.perf_counter() - t0
        assert r.ok, r.reason
        inside = (r.candidate_ms.median_ms * r.candidate_ms.reps + r.reference_ms.median_ms * r.reference_ms.reps
                  + cfg.warmup_ms * 2) / 1e3
        walls.append(wall)
        timed.append(inside)
        overheads.append(wall - inside)
    isolation = ev._zygote("cpu", "candidate", args.sandbox).isolation
    ev.close()
    print(f"date: {datetime.date.today()}  machine: {platform.node()} {platform.machine()}, "
          f"{__import__('os').cpu_count()} cores  isolation: {isolation}")
    print(f"command: .venv/bin/python scripts/bench_harness.py --evaluations {args.evaluations} "
          f"--sandbox {args.sandbox} --timing-s {args.timing_s} --backend {args.backend}")
    print(f"first evaluation (starts both zygotes): {cold_s:.2f} s")
    print(f"warm evaluations: n={len(walls)}  wall median {statistics.median(walls):.3f} s  "
          f"inside timed calls median {statistics.median(timed):.3f} s  "
          f"harness overhead median {statistics.median(overheads):.3f} s (min {min(overheads):.3f}, "
          f"max {max(overheads):.3f})")


if __name__ == "__main__":
    main()
