"""Benchmark: what the driver's clock sees around each timed call beyond the worker's own figure (CPU).

The driver times every timed call from its `go` to the worker's reply; the worker's timer marks lie inside. Each
call's remainder (the driver's wall less the worker's figure) is the harness's own work around the call, the same
code in both roles, so the median remainders of the candidate and the reference differ only by a little for an
honest kernel, while a timer that lags inside calls moves what it takes off into the candidate's remainder
(`evaluator/measure/clock_checks.py`, `call_gap`). This script evaluates honest kernels (and, for contrast, cheats)
with the default timing protocol and prints, per evaluation, that gap as a share of the candidate's claimed call:
the share `CALL_GAP_SHARE` must stay above every honest kernel's and below every lagging timer's.

    .venv/bin/python scripts/bench_remainders.py                       # the default cases, 3 runs each
    .venv/bin/python scripts/bench_remainders.py --runs 5 tests/honest/relu_openmp_c.py
    .venv/bin/python scripts/bench_remainders.py --seeds relu,softmax  # built-in seeds (their `NAME.cpp.py`)
    .venv/bin/python scripts/bench_remainders.py --batch-clock         # also every claim by the driver's batches
    .venv/bin/python scripts/bench_remainders.py --without-code-pages tests/cheats/native_clock_jump_lag_short_calls.py

`--batch-clock` sends every claim through the driver's batch clock (`clock_confirmation.confirm_speedup`, as if
above the suspicious threshold) and prints what it confirmed: the claim over it must stay below
`SHORT_CALL_CLAIM_OVER_CONFIRMED` for honest kernels whose calls the per-call check cannot bound.

`--without-code-pages` switches off the driver's read of the candidate's code pages (`verify/code_pages.py`), which
refuses every jump patched over a library's code: what the clock checks alone hold against such a cheat (a red-team
measurement; the evaluator itself has no such switch).

A case is a candidate file with the test suite's header (`# task: NAME`, a task in tests/tasks; `# config: ...`).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import os
import platform
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

from benchmarks import builtin_task, seed_path  # noqa: E402
from evaluator import EvalConfig, LocalEvaluator, load_candidate, load_task  # noqa: E402
from evaluator.driver import evaluate as evaluate_module  # noqa: E402
from evaluator.measure import blocks, clock_checks, clock_confirmation  # noqa: E402

DEFAULT_CASES = [
    "tests/honest/relu_openmp_c.py",
    "tests/honest/scale_add_avx2.py",
    "tests/honest/poly_iterated_native.py",
    "tests/cheats/native_clock_jump_lag_in_calls.py",
]
DEFAULT_SEEDS = ["relu", "softmax", "layernorm"]
GAPS: list[clock_checks.CallGap] = []
CONFIRMED: list[clock_confirmation.Confirmed] = []


def record_confirmations() -> None:
    """Wrap the driver's confirmation so that what its batch clock confirmed is kept."""
    confirm = clock_confirmation.confirm_speedup

    def recording(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - the wrapped signature
        confirmed = confirm(*args, **kwargs)
        CONFIRMED.append(confirmed)
        return confirmed

    evaluate_module.confirm_speedup = recording  # type: ignore[assignment]  # the name the driver calls


def record_gaps() -> None:
    """Wrap the driver's cross-check so that every evaluation's call gap is kept, whatever the claimed speedup."""
    check = blocks._cross_check

    def recording(ref, cand, device_kind):  # noqa: ANN001, ANN202 - the wrapped signature
        if cand.samples_ms:
            gap = clock_checks.call_gap(ref, cand, statistics.median(cand.samples_ms))
            if gap is not None:
                GAPS.append(gap)
        return check(ref, cand, device_kind)

    blocks._cross_check = recording  # type: ignore[assignment]  # the name the driver's timing calls


def header(path: Path) -> tuple[str, dict[str, object]]:
    """(task name, config overrides) from a case's comment header."""
    task, config = "", {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"^# (task|config):\s*(.*?)\s*$", line)
        if m and m.group(1) == "task":
            task = m.group(2)
        elif m:
            for item in m.group(2).split(","):
                name, _, value = item.partition("=")
                config[name.strip()] = ast.literal_eval(value.strip())
    if not task:
        raise SystemExit(f"{path}: no '# task: NAME' line in its header")
    return task, config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", nargs="*", help="candidate files with a test header (default: a few honest kernels "
                                             "and the lagging-timer cheat)")
    ap.add_argument("--seeds", default=",".join(DEFAULT_SEEDS), help="built-in tasks whose native seed to add "
                                                                     "(comma-separated; '' for none)")
    ap.add_argument("--runs", type=int, default=3, help="evaluations per case (default 3)")
    ap.add_argument("--batch-clock", action="store_true", help="confirm every claim by the driver's batch clock "
                                                                   "and print what it confirmed")
    ap.add_argument("--without-code-pages", action="store_true",
                    help="switch the driver's code-page read off (what the clock checks alone hold; see above)")
    args = ap.parse_args()
    if args.without_code_pages:
        evaluate_module.refuse_written_code = lambda pid: False  # the name the driver calls
    record_gaps()
    if args.batch_clock:
        record_confirmations()
    jobs: list[tuple[str, Path, Path, dict[str, object]]] = []
    for case in args.cases or DEFAULT_CASES:
        path = (ROOT / case) if not Path(case).is_absolute() else Path(case)
        task, config = header(path)
        jobs.append((path.stem, ROOT / "tests" / "tasks" / f"{task}.py", path, config))
    for name in filter(None, args.seeds.split(",")):
        task_path = builtin_task(name)
        jobs.append((f"{name} seed", task_path, seed_path(task_path, "cpp"), {}))
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or 'cpu'}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; CALL_GAP_SHARE {clock_checks.CALL_GAP_SHARE} "
          f"({clock_checks.CALL_GAP_SHARE_NAMED} where outputs are named in memory), "
          f"floor {clock_checks.CALL_GAP_FLOOR_MS} ms")
    batch_head = " batch clock | claim / batch |" if args.batch_clock else ""
    print("| case | run | status | speedup | claimed call ms | gap ms | noise ms | gap / call | share that refuses |"
          + batch_head)
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if args.batch_clock else ""))
    ev = LocalEvaluator()
    try:
        for label, task_path, cand_path, config in jobs:
            task, cand = load_task(task_path), load_candidate(cand_path)
            for run in range(args.runs):
                GAPS.clear()
                CONFIRMED.clear()
                forced = {"suspicious_speedup": 0.0} if args.batch_clock else {}
                r = ev.evaluate(task, cand, EvalConfig(device="cpu", **{**config, **forced}))  # type: ignore[arg-type]
                speed = f"{r.speedup:.2f}x" if r.speedup else "-"
                batch = ""
                if args.batch_clock:
                    c = CONFIRMED[-1] if CONFIRMED else None
                    batch = (f" {c.outer_speedup:.2f}x | {c.speedup / max(c.outer_speedup, 1e-9):.2f} |" if c and
                             c.outer_speedup else " - | - |")
                if not GAPS:
                    print(f"| {label} | {run + 1} | {r.status.value} | {speed} | - | - | - | - | - |{batch}")
                    continue
                g = GAPS[-1]
                # the smallest share of the claimed call that refuses this gap, the floor and noise as they are
                needed = (g.short_ms - clock_checks.CALL_GAP_FLOOR_MS - g.noise_ms) / max(g.cand_ms, 1e-9)
                print(f"| {label} | {run + 1} | {r.status.value} | {speed} | {g.cand_ms:.3f} | {g.short_ms:+.3f} | "
                      f"{g.noise_ms:.3f} | {g.short_ms / max(g.cand_ms, 1e-9):+.1%} | {needed:+.1%} |{batch}", flush=True)
    finally:
        ev.close()


if __name__ == "__main__":
    main()
