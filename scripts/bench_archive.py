"""Does the archive help? Three leaderboard benches of the offline tuner over a suite, same budget per task:

  A: no archive (a fresh store)            -- the first run
  B: may draw on the archive (A's kernels) -- the second run, with the archive
  C: no archive                            -- the second run, without it (the control)

For each task: A's best speedup, then for B and C the evaluations needed to reach it (within --tolerance, CPU
timings are noisy) and their best speedup at the same budget. Prints a Markdown table for docs/PERFORMANCE.md.

    python scripts/bench_archive.py --suite tiny --budget 8 [--db sqlite:///archive-bench.db]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from store import get_store


def bench(db: str, suite: str, budget: int, no_archive: bool, seed: int, timing_s: float) -> int:
    cmd = [sys.executable, "-m", "opforge", "bench", "--suite", suite, "--coder", "tune", "--budget-per-task",
           str(budget), "--db", db, "--runner", "local", "--workers", "2", "--timing-s", str(timing_s),
           "--seed", str(seed), "--json"] + (["--no-archive"] if no_archive else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return int(json.loads(done.stdout.strip().splitlines()[-1])["bench_id"])


def per_task(db: str, bench_id: int) -> dict[str, list[float | None]]:
    """task name -> the speedups of its run's evaluations in the order they were recorded (None: not correct)."""
    store = get_store(db)
    try:
        out = {}
        for run in store.bench_runs(bench_id):
            history = [sc for sc in store.history(run.id) if sc.evaluation is not None]
            history.sort(key=lambda sc: sc.evaluation.id)
            out[store.get_task(run.task_id).name] = [sc.speedup for sc in history]
        return out
    finally:
        store.close()


def reach(speedups: list[float | None], target: float, tolerance: float) -> int | None:
    for i, s in enumerate(speedups, start=1):
        if s is not None and s >= target * (1 - tolerance):
            return i
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="tiny")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--timing-s", type=float, default=0.3)
    ap.add_argument("--tolerance", type=float, default=0.05, help="relative slack when comparing with A's best")
    ap.add_argument("--db", default=None, help="a store URL (default: a fresh SQLite file in a temporary folder)")
    args = ap.parse_args()
    db = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'archive-bench.db'}"
    started = time.time()
    a = bench(db, args.suite, args.budget, no_archive=True, seed=1, timing_s=args.timing_s)
    b = bench(db, args.suite, args.budget, no_archive=False, seed=2, timing_s=args.timing_s)
    c = bench(db, args.suite, args.budget, no_archive=True, seed=2, timing_s=args.timing_s)
    ra, rb, rc = per_task(db, a), per_task(db, b), per_task(db, c)
    print(f"suite {args.suite}, budget {args.budget} per task, tuner, {platform.node()} "
          f"({platform.processor() or platform.machine()}), {time.strftime('%Y-%m-%d')}, "
          f"{time.time() - started:.0f} s\n")
    print("| task | A best | B: evals to A's best | B best | C: evals to A's best | C best |")
    print("|---|---|---|---|---|---|")
    logs = {"b": [], "c": []}
    reached = {"b": [], "c": []}
    for task, speeds in sorted(ra.items()):
        best_a = max((s for s in speeds if s is not None), default=None)
        if best_a is None:
            print(f"| {task} | - | - | - | - | - |")
            continue
        cells = []
        for key, runs in (("b", rb), ("c", rc)):
            s = runs.get(task, [])
            n = reach(s, best_a, args.tolerance)
            best = max((x for x in s if x is not None), default=None)
            reached[key].append(n if n is not None else args.budget + 1)
            if best is not None:
                logs[key].append(math.log(best / best_a))
            cells += [str(n) if n is not None else f">{args.budget}", f"{best:.3g}x" if best else "-"]
        print(f"| {task} | {best_a:.3g}x | " + " | ".join(cells) + " |")
    for key, name in (("b", "B (archive)"), ("c", "C (no archive)")):
        r = reached[key]
        ratio = math.exp(sum(logs[key]) / len(logs[key])) if logs[key] else float("nan")
        print(f"\n{name}: mean evaluations to reach A's best {sum(r) / len(r):.1f} (a miss counts budget+1); "
              f"geometric mean of best / A's best {ratio:.3f}")


if __name__ == "__main__":
    main()
