"""Benchmark: how much the evaluator's figures move from one evaluation of the same kernel to the next (CPU).

Evaluates each named built-in task's native seed (`NAME.cpp.py`) several times with one warm `LocalEvaluator` and the
default timing protocol, and reports, per task, the median time of each side and the speedup for every run and their
coefficients of variation (standard deviation over mean). Issue 16's goal for a quiet machine: under 2%.

Beside it, the same seed and the eager reference timed side by side in this one process, interleaved call by call
with the evaluator's timer and OpenMP settings (as `scripts/bench_native.py` does), so that the evaluator's ratio can
be compared with an in-process one.

    .venv/bin/python scripts/bench_noise.py --tasks relu,softmax --runs 10
    .venv/bin/python scripts/bench_noise.py --tasks softmax --runs 0 --contend 3   # another job on one core
    .venv/bin/python scripts/bench_noise.py --tasks softmax --runs 10 --control-s 2   # the machine's own drift
    .venv/bin/python scripts/bench_noise.py --tasks softmax --runs 0 --windows 12     # a kernel's own drift
    .venv/bin/python scripts/bench_noise.py --tasks relu,softmax --runs 10 --first    # the run's first included

`--samples` prints every timing block's per-call samples for each run (which side a slow stretch fell on).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

from benchmarks import builtin_task, seed_path  # noqa: E402
from evaluator import EvalConfig, LocalEvaluator, load_candidate, load_task  # noqa: E402
from evaluator.worker import memory_conditions  # noqa: E402


def cv_percent(values: list[float]) -> float:
    return 100.0 * statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


BLOCKS: list[tuple[str, list[float]]] = []  # with --samples: (side, the block's per-call ms) of the current evaluation


def record_blocks() -> None:
    """Wrap the driver's timing block so that each block's per-call samples are kept, labelled by side."""
    import evaluator.measure.blocks as measure_mod

    block = measure_mod._block

    def recording(conn, rec, cfg, keep_budget, first, **more):  # noqa: ANN001, ANN003, ANN202 - the wrapped signature
        before = len(rec.samples_ms)
        block(conn, rec, cfg, keep_budget, first, **more)
        BLOCKS.append(("cand" if keep_budget else "ref", rec.samples_ms[before:]))

    measure_mod._block = recording


def print_blocks(run: int, speedup: float) -> None:
    print(f"  run {run}: {speedup:.2f}x")
    for side, samples in BLOCKS:
        print(f"    {side:4s} n={len(samples):3d} median {statistics.median(samples):6.2f} ms  "
              + " ".join(f"{x:.2f}" for x in samples[:40]))
    BLOCKS.clear()


CONTENDED: list[str] = []  # per evaluation whose timing rounds other work shared: the verdict's note about it


def evaluator_runs(task_name: str, runs: int, timing_s: float, samples: bool = False,
                   control_s: float = 0.0, first_too: bool = False) -> tuple[list[tuple[float, float]], list[float]]:
    """(reference median ms, candidate median ms) for each of `runs` warm evaluations of the task's native seed; the
    notes of those whose timing rounds other work on the machine shared go to CONTENDED. With `control_s`, before
    each evaluation, the in-process speedup over that many seconds (`in_process_ms`): the machine's own drift from
    one run to the next, measured without the evaluator."""
    task_path = builtin_task(task_name)
    task = load_task(task_path)
    cand = load_candidate(seed_path(task_path, "cpp"), origin="seed")
    cfg = EvalConfig(device="cpu", max_timing_s=timing_s, profile=False)
    ev = LocalEvaluator()
    try:
        first = ev.evaluate(task, cand, cfg)  # starts the zygotes and fills the build cache
        if not first.ok:
            raise SystemExit(f"{task_name}: the seed was not accepted: {first.status.value}: {first.reason}")
        pairs: list[tuple[float, float]] = []
        if first_too:  # the fresh evaluator's first evaluation counts as a run (issue 36: the fast first ones)
            assert first.reference_ms is not None and first.candidate_ms is not None
            pairs.append((first.reference_ms.median_ms, first.candidate_ms.median_ms))
            runs -= 1
        controls: list[float] = []
        BLOCKS.clear()
        for i in range(runs):
            if control_s > 0:
                eager_ms, seed_ms = in_process_ms(task_name, control_s)
                controls.append(eager_ms / seed_ms)
            r = ev.evaluate(task, cand, cfg)
            if not r.ok:
                raise SystemExit(f"{task_name}: {r.status.value}: {r.reason}")
            pairs.append((r.reference_ms.median_ms, r.candidate_ms.median_ms))
            CONTENDED.extend(n for n in r.reason.split("; ") if n.startswith("other work on the machine"))
            if samples:
                print_blocks(i, pairs[-1][0] / pairs[-1][1])
        return pairs, controls
    finally:
        ev.close()


SPIN = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def _side_by_side(task_name: str):  # noqa: ANN202 - (model, seed module instance, inputs, timer)
    """The task's eager reference and its native seed on the task's own inputs, with the evaluator's timer and
    cold-cache rule, in this process."""
    import importlib.util

    import torch

    def module(path: Path, name: str):  # noqa: ANN202 - a module
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    task_path = builtin_task(task_name)
    task = module(task_path, f"task_{task_path.stem}")
    seed = module(seed_path(task_path, "cpp"), f"seed_{task_path.stem}")
    init = task.get_init_inputs()
    model = task.Model(*init).eval()
    native = seed.ModelNew(*init)
    native.load_state_dict(model.state_dict())
    inputs = task.get_inputs()
    from evaluator.harness_library import local_flush
    from evaluator.worker.timing import CallTimer
    timer = CallTimer(torch.device("cpu"), flush=local_flush())  # the evaluator's timer and cold-cache rule
    timer.calibrate()
    return model, native, inputs, timer


def _interleaved(model, native, inputs, timer, budget_s: float) -> tuple[float, float]:  # noqa: ANN001
    """(eager median ms, seed median ms), the two interleaved call by call for `budget_s` (at least 5 calls each)."""
    ms = _interleaved_calls({"eager": (model, inputs), "native": (native, inputs)}, timer, budget_s)
    return ms["eager"], ms["native"]


def _interleaved_calls(calls: dict, timer, budget_s: float) -> dict[str, float]:  # noqa: ANN001
    """Each call's median ms, the calls (name: (function, inputs)) interleaved one by one for `budget_s` (at least 5
    calls each)."""
    import torch

    times: dict[str, list[float]] = {key: [] for key in calls}
    start = time.perf_counter()
    with torch.no_grad():
        while min(len(t) for t in times.values()) < 5 or time.perf_counter() - start < budget_s:
            for key, (fn, args) in calls.items():
                times[key].append(timer.time_call(fn, args)[0])
    return {key: statistics.median(t) for key, t in times.items()}


def in_process_ms(task_name: str, budget_s: float, contend: bool = False) -> tuple[float, float]:
    """(eager median ms, seed median ms), interleaved call by call in this process on the task's own inputs. With
    `contend`, a busy process pinned to this process's last CPU runs meanwhile (another job on one of the cores)."""
    import subprocess

    model, native, inputs, timer = _side_by_side(task_name)
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(max(os.sched_getaffinity(0)))]) if contend else None
    try:
        time.sleep(0.2 if contend else 0.0)
        return _interleaved(model, native, inputs, timer, budget_s)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def windows(task_name: str, count: int, window_s: float) -> None:
    """The seed and eager PyTorch side by side in this process on the same inputs and buffers throughout, in `count`
    consecutive windows of `window_s`: how much each side's own speed moves over seconds with no evaluator, no fresh
    worker and no fresh buffers (2026-11-28, Zen 4: a softmax seed switched between two speeds 9% apart, each held
    for seconds, while eager stayed within 0.5%). Beside them, where the task's bytes are known, the same bytes
    copied (`copy_like`, bench_native's "of copy" yardstick): the memory bandwidth the machine gave this process in
    each window, and how closely each side's time follows it."""
    from evaluator.device.cpu_peaks import copy_like
    from evaluator.measure.task_work import task_work

    model, native, inputs, timer = _side_by_side(task_name)
    calls = {"eager": (model, inputs), "native": (native, inputs)}
    work = task_work(load_task(builtin_task(task_name)))
    if work is not None:
        copy, source = copy_like(work.min_bytes)
        calls["copy"] = (copy, [source])
    rows = [_interleaved_calls(calls, timer, window_s) for _ in range(count)]
    eager, seed = [r["eager"] for r in rows], [r["native"] for r in rows]
    ratios = [e / n for e, n in zip(eager, seed)]
    print(f"\n{task_name}: {count} windows of {window_s:g} s in one process, same buffers: eager CV "
          f"{cv_percent(eager):.1f}%, seed CV {cv_percent(seed):.1f}%, speedup CV {cv_percent(ratios):.1f}% "
          f"({min(ratios):.2f}-{max(ratios):.2f}x)")
    print("seed ms per window: " + " ".join(f"{x:.2f}" for x in seed))
    print("eager ms per window: " + " ".join(f"{x:.2f}" for x in eager), flush=True)
    if work is not None:
        copied = [r["copy"] for r in rows]
        of_copy = [c / n for c, n in zip(copied, seed)]
        print("copy ms per window: " + " ".join(f"{x:.2f}" for x in copied))
        print(f"copy CV {cv_percent(copied):.1f}%; the seed's time against the copy's (of copy) CV "
              f"{cv_percent(of_copy):.1f}%; correlation with the copy's time over the windows: seed "
              f"{statistics.correlation(seed, copied):+.2f}, eager {statistics.correlation(eager, copied):+.2f}",
              flush=True)


def contention(task_name: str, rounds: int) -> None:
    """The seed and eager PyTorch side by side in this process, as the machine is and with one core taken by a busy
    process, in alternating rounds: how another job on the machine moves the speedup."""
    print(f"\n{task_name}: in-process, as the machine is / with one CPU taken by a busy process")
    print("| round | eager ms | seed ms | speedup | eager ms, one CPU taken | seed ms, one CPU taken | speedup |")
    print("|---|---|---|---|---|---|---|")
    for i in range(rounds):
        quiet = in_process_ms(task_name, budget_s=1.5)
        taken = in_process_ms(task_name, budget_s=1.5, contend=True)
        print(f"| {i} | {quiet[0]:.2f} | {quiet[1]:.2f} | {quiet[0] / quiet[1]:.2f}x | {taken[0]:.2f} | {taken[1]:.2f} "
              f"| {taken[0] / taken[1]:.2f}x |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="relu,softmax", help="comma-separated built-in task names")
    parser.add_argument("--runs", type=int, default=10, help="warm evaluations per task")
    parser.add_argument("--timing-s", type=float, default=EvalConfig().max_timing_s,
                        help="each side's timing cap per evaluation (EvalConfig.max_timing_s)")
    parser.add_argument("--contend", type=int, default=0, metavar="ROUNDS",
                        help="then, per task, ROUNDS in-process rounds as the machine is and with one CPU taken by a "
                             "busy process (what another job on the machine does to the speedup)")
    parser.add_argument("--control-s", type=float, default=0.0, metavar="S",
                        help="before each evaluation, also time eager and the seed in this process for S seconds, and "
                             "report that in-process speedup's CV over the runs: the machine's own drift between "
                             "runs, the floor under the evaluator's CV")
    parser.add_argument("--windows", type=int, default=0, metavar="N",
                        help="then, per task, N consecutive in-process windows of --window-s on the same buffers: "
                             "each side's own drift over seconds, without the evaluator")
    parser.add_argument("--window-s", type=float, default=1.5, help="the length of one --windows window (1.5 s)")
    parser.add_argument("--first", action="store_true",
                        help="count the fresh evaluator's first evaluation (fresh zygotes, cold build cache) as the "
                             "first of --runs, instead of leaving it out")
    parser.add_argument("--samples", action="store_true",
                        help="also print every timing block's per-call samples (ms), side by side, for each run")
    args = parser.parse_args()
    memory_conditions.apply()  # the workers' memory conditions (and kept heap): in-process timings run under them too
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores  load average at start: {os.getloadavg()[0]:.2f}")
    print(f"command: .venv/bin/python scripts/bench_noise.py --tasks {args.tasks} --runs {args.runs} "
          f"--timing-s {args.timing_s}" + (f" --contend {args.contend}" if args.contend else "")
          + (f" --control-s {args.control_s}" if args.control_s else "") + (" --first" if args.first else "")
          + (f" --windows {args.windows} --window-s {args.window_s}" if args.windows else ""))
    print("| task | runs | reference ms (CV) | candidate ms (CV) | speedup median (CV, min-max) "
          "| in-process eager ms | in-process seed ms | in-process speedup |")
    print("|---|---|---|---|---|---|---|---|")
    if args.samples:
        record_blocks()
    contended, controlled = [], []
    for name in args.tasks.split(",") if args.runs > 0 else []:
        CONTENDED.clear()
        pairs, controls = evaluator_runs(name.strip(), args.runs, args.timing_s, args.samples, args.control_s,
                                         args.first)
        if controls:
            controlled.append(f"{name}: in-process speedup before each run {statistics.median(controls):.2f}x "
                              f"(CV {cv_percent(controls):.1f}%, {min(controls):.2f}-{max(controls):.2f}), over "
                              f"{args.control_s:g} s each")
        left_out = sum("left out" in n for n in CONTENDED)
        contended.append(f"{name}: {len(CONTENDED)} of {len(pairs)} evaluations had timing rounds that other work "
                         f"shared ({left_out} of them timed from their quiet rounds alone)")
        refs, cands = [p[0] for p in pairs], [p[1] for p in pairs]
        speedups = [r / c for r, c in pairs]
        eager_ms, seed_ms = in_process_ms(name.strip(), budget_s=3.0)
        print(f"| {name} | {len(pairs)} | {statistics.median(refs):.2f} ({cv_percent(refs):.1f}%) "
              f"| {statistics.median(cands):.2f} ({cv_percent(cands):.1f}%) "
              f"| {statistics.median(speedups):.2f}x ({cv_percent(speedups):.1f}%, {min(speedups):.2f}-"
              f"{max(speedups):.2f}) | {eager_ms:.2f} | {seed_ms:.2f} | {eager_ms / seed_ms:.2f}x |", flush=True)
    for line in contended + controlled:
        print(line)
    for name in args.tasks.split(",") if args.contend else []:
        contention(name.strip(), args.contend)
    for name in args.tasks.split(",") if args.windows else []:
        windows(name.strip(), args.windows, args.window_s)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
