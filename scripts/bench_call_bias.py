"""Benchmark: what the harness adds inside a tiny native kernel's timed marks, against the reference's (issue 18).

Each round runs one warm evaluation of `bench_harness.py`'s task (ReLU over 64 floats) and its native candidate, then
times the same two calls bare in this process with the evaluator's own timer (`CallTimer`, the workers' OpenMP
settings, a fresh input and the pool's wake before each call). A side's excess is its median in the evaluation minus
its bare median; the bias is the candidate's excess minus the reference's: what a native candidate's figure carries
that the reference's does not. Not a test; figures go to docs/PERFORMANCE.md.

    PYTHONPATH=. .venv/bin/python scripts/bench_call_bias.py [--rounds 8] [--sandbox auto|bwrap|process]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from evaluator.sandbox import zygote_env

os.environ.update(zygote_env.openmp_environment())  # before torch loads libgomp, as in the workers

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_harness  # noqa: E402

from evaluator import Candidate, EvalConfig, LocalEvaluator, load_task
from evaluator.worker import timing  # noqa: E402


def bare_median_us(timer: timing.CallTimer, fn: object, calls: int = 400) -> float:
    samples = []
    for _ in range(calls):
        x = torch.randn(64)
        timer.evict([x])
        timer.wake()
        samples.append(timer.time_call(fn, [x], evicted=True)[0] * 1e3)  # type: ignore[arg-type]
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "process"))
    args = parser.parse_args()
    namespace: dict[str, object] = {}
    exec(bench_harness.NATIVE_CANDIDATE, namespace)  # the candidate, built by load_c outside the evaluator
    candidate_model = namespace["ModelNew"]()  # type: ignore[operator]
    timer = timing.CallTimer(torch.device("cpu"))
    timer.calibrate()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "relu64.py"
        path.write_text(bench_harness.TASK)
        task = load_task(path)
    candidate = Candidate.from_source(bench_harness.NATIVE_CANDIDATE)
    cfg = EvalConfig(device="cpu", max_timing_s=0.2, warmup_ms=5.0, profile=False, sandbox=args.sandbox)
    evaluator = LocalEvaluator(sandbox=args.sandbox)
    first = evaluator.evaluate(task, candidate, cfg)
    assert first.ok, first.reason
    rows = []
    for _ in range(args.rounds):
        r = evaluator.evaluate(task, candidate, cfg)
        assert r.ok and r.candidate_ms and r.reference_ms, r.reason
        rows.append((r.candidate_ms.median_ms * 1e3, r.reference_ms.median_ms * 1e3,
                     bare_median_us(timer, candidate_model), bare_median_us(timer, torch.relu)))
    evaluator.close()
    cand, ref, cand_bare, ref_bare = (statistics.median(column) for column in zip(*rows))
    print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds, medians of each side's median (us):")
    print(f"  candidate: evaluated {cand:.1f}, bare {cand_bare:.1f}, excess {cand - cand_bare:.1f}")
    print(f"  reference: evaluated {ref:.1f}, bare {ref_bare:.1f}, excess {ref - ref_bare:.1f}")
    print(f"  bias (candidate's excess - reference's): {(cand - cand_bare) - (ref - ref_bare):.1f} us")


if __name__ == "__main__":
    main()
