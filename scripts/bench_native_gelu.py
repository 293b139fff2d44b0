"""A native GELU (tanh) candidate against PyTorch on benchmarks/tiny/gelu_tanh.py, through the full evaluator.

    PYTHONPATH=. .venv/bin/python scripts/bench_native_gelu.py [--evals 3] [--elements 4194304]

Runs `evaluate` (sandboxed workers, the build stage, the interleaved timing protocol) several times on the task's
benchmark shape and prints each speedup with its medians, then times the same library, ATen's fused gelu and the
expression as composite eager ops side by side in this process on a larger tensor. One JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CANDIDATE = r'''
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK 16384
/* tanh(u) = 1 - 2 / (1 + exp(2u)): with -ffast-math gcc vectorizes expf through glibc's libmvec */
void gelu_tanh(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t end = b + BLOCK < n ? b + BLOCK : n;
        #pragma omp simd
        for (int64_t i = b; i < end; ++i) {
            float v = x[i];
            float u = 0.7978845608f * (v + 0.044715f * v * v * v);
            u = fminf(fmaxf(u, -15.0f), 15.0f);
            out[i] = 0.5f * v * (2.0f - 2.0f / (1.0f + expf(2.0f * u)));
        }
    }
}
"""
lib = load_c("gelu_tanh_bench", SOURCE, functions=["gelu_tanh"],
             flags=["-O3", "-march=native", "-fopenmp", "-ffast-math"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
'''


def _median_ms(fn, reps: int = 50) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=3)
    parser.add_argument("--elements", type=int, default=4 * 2**20)
    args = parser.parse_args()
    from evaluator import Candidate, EvalConfig, load_task
    from evaluator import evaluate
    task = load_task(ROOT / "benchmarks" / "tiny" / "gelu_tanh.py")
    evals = []
    for _ in range(args.evals):
        r = evaluate(task, Candidate.from_source(CANDIDATE), EvalConfig(device="cpu"))
        evals.append({"status": r.status.value, "backend": r.backend, "speedup": r.speedup,
                      "candidate_ms": r.candidate_ms.median_ms if r.candidate_ms else None,
                      "reference_ms": r.reference_ms.median_ms if r.reference_ms else None})
    # Side by side in one process, on a tensor well beyond the last-level cache.
    with tempfile.TemporaryDirectory() as d:
        path = Path(d, "gelu_candidate.py")
        path.write_text(CANDIDATE)
        namespace: dict = {}
        exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own candidate text
    lib = namespace["lib"]
    x = torch.randn(args.elements) * 3
    out = torch.empty_like(x)

    def composite():
        return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

    native_ms = _median_ms(lambda: lib.gelu_tanh(x, out, x.numel()))
    aten_ms = _median_ms(lambda: torch.nn.functional.gelu(x, approximate="tanh"))
    composite_ms = _median_ms(composite)
    error = (out - torch.nn.functional.gelu(x, approximate="tanh")).abs().max().item()
    print(json.dumps({"threads": torch.get_num_threads(), "evaluations": evals,
                      "speedups": [e["speedup"] for e in evals],
                      "side_by_side": {"elements": args.elements, "native_ms": round(native_ms, 4),
                                       "aten_gelu_ms": round(aten_ms, 4), "composite_eager_ms": round(composite_ms, 4),
                                       "native_over_aten": round(aten_ms / native_ms, 2),
                                       "native_over_composite": round(composite_ms / native_ms, 2),
                                       "max_abs_error": error}}, indent=1))


if __name__ == "__main__":
    main()
