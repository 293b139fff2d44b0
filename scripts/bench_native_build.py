"""Build times of native CPU kernels: load_c (cold, and a cache hit in a fresh process) against load_inline with
cpp_sources only (torch's headers), with and without its precompiled header (use_pch); with --stage, a CPU
load_inline extension through the evaluator's build stage (the sandboxed builder and the build cache: cold for each
optimisation level of --stage-levels, and a cache hit in a fresh process: key, lookup, the bytes, the worker's import).

    PYTHONPATH=. .venv/bin/python scripts/bench_native_build.py [--reps 3] [--skip-load-inline] [--skip-pch] [--stage]

Each cold build compiles a source no earlier build has seen (a fresh constant), in a fresh cache or build folder, in
its own process, so nothing is reused that a first build would not have. Prints one JSON object of medians.

use_pch writes its precompiled header (about 800 MB) next to torch's own headers, inside the Python installation;
this script removes it (and its .sign file) when it is done, so the installation is left as it was.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

GELU_C = r"""
#include <math.h>
#include <stdint.h>
#define SALT %(salt)d
void gelu(const float* restrict x, float* restrict out, int64_t n) {
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i], u = 0.7978845608f * (v + 0.044715f * v * v * v);
        out[i] = 0.5f * v * (1.0f + tanhf(u)) + 0.0f * SALT;
    }
}
"""
GELU_CPP = r"""
#include <torch/extension.h>
torch::Tensor gelu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        float v = in[i], u = 0.7978845608f * (v + 0.044715f * v * v * v);
        o[i] = 0.5f * v * (1.0f + tanhf(u)) + 0.0f * %(salt)d;
    }
    return out;
}
"""

LOAD_C = """
import sys, time
t0 = time.perf_counter()
from evaluator.native import load_c
t1 = time.perf_counter()
load_c("gelu", sys.argv[1], ["gelu"], ["-O3", "-march=native", "-fopenmp"])
print(time.perf_counter() - t1)
"""
LOAD_INLINE = """
import sys, time
from torch.utils.cpp_extension import load_inline
t0 = time.perf_counter()
load_inline("gelu_%s" % sys.argv[2], [sys.argv[1]], functions=["gelu"], with_cuda=False,
            extra_cflags=["-O3"], use_pch=sys.argv[3] == "pch")
print(time.perf_counter() - t0)
"""

# The build stage's two sides in one process, timed after the imports: the driver's key, lookup (or the sandboxed
# build, on a miss) and the bytes it sends; the worker's write into its folder and import of the extension.
STAGE = """
import sys, time
import torch
from evaluator.build.cache import BuildCache
from evaluator.build.cpu_extension import CpuExtensionSpec
from evaluator.build.cpu_extension_build import toolchain
from evaluator.build.cuda import load_extension
cache = BuildCache.open(sys.argv[2])
spec = CpuExtensionSpec.from_call("gelu_stage", [sys.argv[1]], {"functions": ["gelu"], "extra_cflags": sys.argv[3:]})
t0 = time.perf_counter()
verdict = cache.get_or_build(spec, toolchain(), isolation="auto", timeout_s=900, context="bench")
ext = load_extension(spec.name, verdict.artifact.read_bytes())
took = time.perf_counter() - t0
assert verdict.status == "linked" and ext.gelu(torch.ones(4)).shape == (4,), verdict
print(verdict.cached, took)
"""


def _run(code: str, args: list[str], env: dict[str, str]) -> float:
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1].split()[-1])


def _run_stage(args: list[str], env: dict[str, str], cached: bool) -> float:
    out = subprocess.run([sys.executable, "-c", STAGE, *args], env=env, capture_output=True, text=True, check=True)
    hit, took = out.stdout.strip().splitlines()[-1].split()
    assert hit == str(cached), f"expected a {'hit' if cached else 'miss'}: {out.stdout}"
    return float(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--skip-load-inline", action="store_true")
    parser.add_argument("--skip-pch", action="store_true", help="load_inline without use_pch only (use_pch writes "
                                                                    "800 MB into torch's include folder)")
    parser.add_argument("--stage", action="store_true", help="also time the build stage's CPU extension builds")
    parser.add_argument("--stage-levels", default="-O0,-O2,-O3", help="extra_cflags levels for the stage's builds")
    args = parser.parse_args()
    env = dict(os.environ)
    results: dict[str, list[float]] = {"load_c_cold_s": [], "load_c_cached_s": []}
    for rep in range(args.reps):
        with tempfile.TemporaryDirectory() as cache:
            env["OPFORGE_NATIVE_BUILD_CACHE"] = cache
            source = GELU_C % {"salt": rep + int(time.time())}
            results["load_c_cold_s"].append(_run(LOAD_C, [source], env))
            results["load_c_cached_s"].append(_run(LOAD_C, [source], env))
    if args.stage:
        for rep in range(args.reps):
            for level in args.stage_levels.split(","):
                with tempfile.TemporaryDirectory() as cache:
                    source = GELU_CPP % {"salt": rep + int(time.time())}
                    cold = _run_stage([source, cache, level], env, cached=False)
                    hit = _run_stage([source, cache, level], env, cached=True)
                    results.setdefault(f"stage_cold{level}_s", []).append(cold)
                    results.setdefault(f"stage_hit{level}_s", []).append(hit)
            with tempfile.TemporaryDirectory() as ext:  # side by side: load_inline's own build, -O3, in a process
                env["TORCH_EXTENSIONS_DIR"] = ext
                source = GELU_CPP % {"salt": rep + int(time.time())}
                results.setdefault("private_load_inline-O3_s", []).append(
                    _run(LOAD_INLINE, [source, uuid.uuid4().hex[:8], "nopch"], env))
    if not args.skip_load_inline:
        for mode in ("nopch",) if args.skip_pch else ("nopch", "pch"):
            results[f"load_inline_cpu_{mode}_s"] = []
            with tempfile.TemporaryDirectory() as ext:
                env["TORCH_EXTENSIONS_DIR"] = ext
                if mode == "pch":  # the first build makes the precompiled header; later ones reuse it
                    results["load_inline_cpu_pch_first_s"] = [
                        _run(LOAD_INLINE, [GELU_CPP % {"salt": 0}, uuid.uuid4().hex[:8], mode], env)]
                for rep in range(args.reps):
                    tag = uuid.uuid4().hex[:8]
                    results[f"load_inline_cpu_{mode}_s"].append(
                        _run(LOAD_INLINE, [GELU_CPP % {"salt": rep + 1}, tag, mode], env))
    if not args.skip_load_inline and not args.skip_pch:
        from torch.utils import cpp_extension
        header = Path(cpp_extension.include_paths()[0], "torch", "extension.h")
        for made in (header.with_name("extension.h.gch"), header.with_name("extension.h.sign")):
            made.unlink(missing_ok=True)
    print(json.dumps({k: {"median": round(statistics.median(v), 3), "runs": [round(x, 3) for x in v]}
                      for k, v in results.items()}, indent=1))


if __name__ == "__main__":
    main()
