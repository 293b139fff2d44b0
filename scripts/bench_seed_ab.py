"""Before and after for native seeds: a seed as it was at a git revision against the working tree's, side by side.

For each task named: the seed file `NAME.cpp.py` from `--before` (default `main`) and the working tree's are both
built and checked against the reference, then timed in the same rounds as the OpenMP copy of the task's bytes
(`copy_like`) and the reference run eagerly, one call of each per round (the two seeds take turns going first), by the evaluator's own timer and OpenMP settings (inputs past a core's L2
read from memory). On a shared machine the rounds see the same load, so the per-round ratio after/before is the figure
to read: its median is printed beside the medians and minima of each side, and so is each seed's per-round ratio
to eager PyTorch (medians of eager / seed). The roofline fraction is the task's least
bytes at the copy bandwidth measured at the start (`evaluator/device/cpu_peaks.py`), as in `scripts/bench_native.py`, and
as there the C heap keeps what it frees (`--heap kept`, `evaluator/worker/heap.py`).

    .venv/bin/python scripts/bench_seed_ab.py --tasks avg_pool2d,swiglu
    .venv/bin/python scripts/bench_seed_ab.py --tasks col_sum --before HEAD~3 --budget-s 6
    .venv/bin/python scripts/bench_seed_ab.py --tasks softmax --march x86-64-v3   # the portable paths (AVX2)

Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

import torch  # noqa: E402

from benchmarks import builtin_task, seed_path  # noqa: E402
from benchmarks.seed_build import MARCH_LEVELS, build_seeds_for  # noqa: E402
from evaluator import load_task  # noqa: E402
from evaluator.device.cpu_peaks import copy_like, measure_cpu_peaks  # noqa: E402
from evaluator.harness_library import local_flush  # noqa: E402
from evaluator.worker.heap import keep_freed_memory  # noqa: E402
from evaluator.measure.task_work import task_work  # noqa: E402
from evaluator.worker.timing import CallTimer  # noqa: E402


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _old_seed(path: Path, revision: str, folder: Path) -> Path:
    relative = path.resolve().relative_to(ROOT)
    source = subprocess.run(["git", "show", f"{revision}:{relative.as_posix()}"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    target = folder / f"before_{path.name}"
    target.write_text(source)
    return target


def _small_copy(task_path: Path, shape: dict, folder: Path) -> Path:
    """A copy of the task file with its INTERPRETER_SHAPE's values appended (what `task_work` counts bytes of)."""
    out = folder / f"small_{task_path.name}"
    out.write_text(task_path.read_text() + "\n" + "".join(f"{k} = {v!r}\n" for k, v in shape.items()))
    return out


def measure(name: str, revision: str, budget_s: float, copy_gbps: float, folder: Path, small: bool = False) -> dict:
    task_path = builtin_task(name)
    task = _module(task_path, f"task_{name}")
    shape = dict(getattr(task, "INTERPRETER_SHAPE", None) or {}) if small else {}
    for key, value in shape.items():  # the task's small shape: get_inputs reads these module values when called
        setattr(task, key, value)
    new_path = seed_path(task_path, "cpp")
    seeds = {"before": _module(_old_seed(new_path, revision, folder), f"before_{name}"),
             "after": _module(new_path, f"after_{name}")}
    tol = {"atol": 1e-4, "rtol": 1e-4, **(getattr(task, "TOLERANCE", None) or {})}
    init = task.get_init_inputs()
    model = task.Model(*init).eval()
    torch.manual_seed(1)
    inputs = task.get_inputs()
    work = task_work(load_task(_small_copy(task_path, shape, folder) if shape else task_path))
    if work is None:
        raise SystemExit(f"{name}: the task's bytes could not be counted")
    copy, source = copy_like(work.min_bytes)
    with torch.no_grad():
        expected = model(*inputs)
        calls, correct = {}, {}
        for key, seed in seeds.items():
            candidate = seed.ModelNew(*init)
            candidate.load_state_dict(model.state_dict())
            got = candidate(*inputs)
            pairs = list(zip(got, expected)) if isinstance(expected, tuple) else [(got, expected)]  # row_max: 2
            correct[key] = all(g.shape == e.shape and (torch.allclose(g, e, **tol) if e.is_floating_point()
                                                       else torch.equal(g, e)) for g, e in pairs)
            calls[key] = (candidate, inputs)
        calls["copy"] = (copy, [source])
        calls["eager"] = (model, inputs)
        timer = CallTimer(torch.device("cpu"), flush=local_flush())
        timer.calibrate()
        times: dict[str, list[float]] = {k: [] for k in calls}
        start, rounds = time.perf_counter(), 0
        while rounds < 10 or (time.perf_counter() - start < budget_s and rounds < 400):
            order = ["before", "after", "copy", "eager"] if rounds % 2 == 0 else ["after", "before", "eager", "copy"]
            for key in order:  # alternating which seed goes first: the first call of a round measured ~7% slower
                fn, args = calls[key]
                times[key].append(timer.time_call(fn, args)[0])
            rounds += 1
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "task": f"{task_path.parent.name}/{name}" + (f" ({', '.join(f'{k}={v}' for k, v in shape.items())})"
                                                     if shape else ""),
        "correct": correct, "rounds": rounds, "median": median,
        "min": {k: min(v) for k, v in times.items()},
        "paired": statistics.median(b / a for b, a in zip(times["before"], times["after"])),
        "over_eager": {k: statistics.median(e / t for e, t in zip(times["eager"], times[k]))
                       for k in ("before", "after")},
        "roofline_ms": work.min_bytes / (copy_gbps * 1e9) * 1e3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", required=True, help="comma-separated built-in task names")
    parser.add_argument("--before", default="main", help="the git revision whose seeds are 'before' (default main)")
    parser.add_argument("--budget-s", type=float, default=4.0, help="timing budget per task (default 4 s)")
    parser.add_argument("--shape", default="task", choices=("task", "small"),
                        help="small: each task at its INTERPRETER_SHAPE (as `scripts/bench_loop.py --shape small`)")
    parser.add_argument("--heap", choices=("kept", "glibc"), default="kept",
                        help="kept (default): the C heap keeps freed memory (evaluator/worker/heap.py); glibc: its defaults")
    parser.add_argument("--march", metavar="LEVEL", choices=MARCH_LEVELS,
                        help="build both seeds for LEVEL instead of this CPU (-march=native); x86-64-v3 on a CPU with "
                             "AVX-512 times the portable paths that a CPU without it runs")
    args = parser.parse_args()
    if args.march:
        build_seeds_for(args.march)
    kept = args.heap == "kept" and keep_freed_memory()
    load = os.getloadavg()
    peaks = measure_cpu_peaks()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(n.strip(), args.before, args.budget_s, peaks.copy_gbps, Path(tmp), args.shape == "small")
                for n in args.tasks.split(",")]
    print(f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`  ")
    print(f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; load average {load[0]:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end  ")
    print(f"Measured copy peak: {peaks.copy_gbps:.1f} GB/s ({peaks.threads} threads); heap "
          f"{'kept' if kept else 'glibc defaults'}  ")
    print()
    print("| task | correct (before, after) | before ms | after ms | copy ms | eager ms | speedup, per round (median "
          "of before / after) | over eager, per round (before, after) | of copy (before, after) | roofline (before, "
          "after) | minima ms (before, after, copy) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        m, lo, roof = r["median"], r["min"], r["roofline_ms"]
        ok = ", ".join("yes" if r["correct"][k] else "NO" for k in ("before", "after"))
        eager = r["over_eager"]
        print(f"| {r['task']} | {ok} | {m['before']:.2f} | {m['after']:.2f} | {m['copy']:.2f} | {m['eager']:.2f} | "
              f"{r['paired']:.2f}x | {eager['before']:.2f}x, {eager['after']:.2f}x | "
              f"{m['copy'] / m['before']:.0%}, {m['copy'] / m['after']:.0%} | "
              f"{roof / m['before']:.0%}, {roof / m['after']:.0%} | "
              f"{lo['before']:.2f}, {lo['after']:.2f}, {lo['copy']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
