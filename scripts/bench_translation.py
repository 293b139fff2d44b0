"""Does starting a native CPU run from the store's GPU kernel change its outcome? A MECHANICS CHECK under a scripted
model (tests/fake_llm_server.py), not a measure of any model's quality: the scripted "model" answers the translate
prompt with a faithful C translation of the Triton seed (blocked, OpenMP, SIMD, the seed's overflow-free tanh) and the
from-scratch prompt with the plain scalar loop a first attempt often is. What this measures is that the pipeline
carries a translation through: the request is made, the translated kernel is built and timed natively, the tuner
sweeps it, and the lineage records it; the speedups are real measurements of those two scripted kernels.

  1. a tuner run leaves the task's Triton seed, checked under Triton's interpreter, in a fresh store;
  2. translated: `--coder llm --backend cpp --from-scratch` may draw on the store (the coder is offered the Triton
     kernel to translate);
  3. from scratch: the same with `--no-archive` (nothing offered).
Both LLM runs have the same budget and the tuner's neighbours per request. Prints a Markdown table.

    python scripts/bench_translation.py [--task benchmarks/tiny/gelu_tanh.py] [--budget 6]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_llm_server import FakeLLMServer, Rule, reply  # noqa: E402

from store import get_store  # noqa: E402

TRANSLATED = r'''import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#define BLOCK_SIZE 4096
void gelu_tanh(const float* restrict x, float* restrict out, int64_t n) {
    int64_t programs = (n + BLOCK_SIZE - 1) / BLOCK_SIZE;   /* the Triton grid: one iteration per program */
    #pragma omp parallel for schedule(static)
    for (int64_t pid = 0; pid < programs; ++pid) {
        int64_t start = pid * BLOCK_SIZE, end = start + BLOCK_SIZE < n ? start + BLOCK_SIZE : n;
        #pragma omp simd                                       /* the program's lanes: one SIMD loop */
        for (int64_t i = start; i < end; ++i) {
            float v = x[i];
            float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
            float e = expf(-2.0f * fabsf(inner));
            float t = (1.0f - e) / (1.0f + e);
            out[i] = 0.5f * v * (1.0f + (inner >= 0.0f ? t : -t));
        }
    }
}
"""
lib = load_c("gelu_tanh_translated", SOURCE, functions=["gelu_tanh"],
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

SCRATCH = r'''import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <math.h>
#include <stdint.h>
void gelu_tanh(const float* x, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        out[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    }
}
"""
lib = load_c("gelu_tanh_scratch", SOURCE, functions=["gelu_tanh"], flags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.gelu_tanh(x, out, x.numel())
        return out
'''


def code(source: str) -> object:
    return reply(f"```python\n{source}```", prompt_tokens=1500, completion_tokens=600)


def optimize(db: str, task: Path, args: list[str], env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "opforge", "optimize", str(task), *args, "--runner", "local",
                           "--db", db, "--json"], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"opforge optimize failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def outcome(db: str, run_id: int) -> dict:
    store = get_store(db)
    try:
        history = sorted((sc for sc in store.history(run_id) if sc.evaluation is not None),
                         key=lambda sc: sc.evaluation.id)
        speedups = [sc.speedup for sc in history]
        first_ok = next((i for i, s in enumerate(speedups, start=1) if s is not None), None)
        translated = [sc for sc in history if sc.candidate.note.startswith("translate ")]
        return {"best": max((s for s in speedups if s is not None), default=None), "first_ok": first_ok,
                "evaluated": len(history), "translated": len(translated),
                "calls": len(store.llm_calls(run_id))}
    finally:
        store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", type=Path, default=ROOT / "benchmarks" / "tiny" / "gelu_tanh.py")
    ap.add_argument("--budget", type=int, default=6)
    ap.add_argument("--timing-s", type=float, default=1.0)
    ap.add_argument("--db", help="a store URL (default: a fresh SQLite file in a temporary directory)")
    args = ap.parse_args()
    triton_seed = args.task.with_name(args.task.name.removesuffix(".py") + ".seed.py")
    workdir = Path(tempfile.mkdtemp(prefix="opforge-translation-"))
    db = args.db or f"sqlite:///{workdir / 'translation.db'}"
    env = {**os.environ, "OPFORGE_NATIVE_BUILD_CACHE": str(workdir / "native-cache")}
    common = ["--timing-s", str(args.timing_s), "--workers", "1"]
    started = time.time()
    optimize(db, args.task, ["--coder", "tune", "--seed-kernel", str(triton_seed), "--budget", "1", *common], env)
    rows = {}
    for label, extra in (("translated from the Triton kernel", []), ("from scratch", ["--no-archive"])):
        rules = [Rule("You are translating a GPU kernel into a native CPU kernel", [code(TRANSLATED)]),
                 Rule("You are writing a fast native CPU kernel", [code(SCRATCH)]),
                 Rule("You are improving a native CPU kernel", [code(SCRATCH)])]
        with FakeLLMServer(rules=rules) as server:
            summary = optimize(db, args.task, ["--coder", "llm", "--backend", "cpp", "--from-scratch", "--model",
                                               "scripted", "--llm-base-url", server.base_url, "--no-judge",
                                               "--budget", str(args.budget), *common, *extra], env)
        rows[label] = outcome(db, summary["run_id"])
    print(f"<!-- {' '.join(sys.argv)} | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs | {time.time() - started:.0f} s -->")
    print("| start | best speedup over eager | first correct at evaluation | evaluated | translated | LLM calls |")
    print("|---|---|---|---|---|---|")
    for label, r in rows.items():
        best = f"{r['best']:.2f}x" if r["best"] is not None else "none"
        print(f"| {label} | {best} | {r['first_ok'] or '-'} | {r['evaluated']} | {r['translated']} | {r['calls']} |")


if __name__ == "__main__":
    main()
