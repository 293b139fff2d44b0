"""The built-in suites' native C seeds against eager PyTorch and torch.compile, and against this CPU's roofline.

For every built-in task (or those named): the reference `Model` eagerly, `torch.compile(Model)` (Inductor's C++
backend; its compile time is not counted) and the native seed `NAME.cpp.py`, timed side by side in one process,
interleaved round by round at the task's own (native-scale) benchmark shape, medians reported, with the evaluator's
OpenMP settings (passive waiting) and its timer (inputs past a core's L2 read from memory, not from a cache that just
held them). Each seed's output is checked against the reference first (the task's tolerance). The roofline is the task's least work
(`evaluator/measure/task_work.py`: bytes moved once, FLOPs from PyTorch's counter) at this CPU's measured copy bandwidth and
peak FP32 FLOP/s (`evaluator/device/cpu_peaks.py`). Beside it, "of copy" times the same OpenMP copy moving the task's bytes
(`copy_like`) in the same rounds as the kernels: a side-by-side yardstick for memory-bound tasks, measured under the
same load and allocator state as the seed, where the peak is a best-of taken once at the start. "over eager", "over
compile" and "of copy" are medians of the per-round ratios (both sides of a round see the same load); the ms
columns are each side's median. Build time per seed
is the cold build of its `load_c` call in an empty cache. The C heap keeps what it frees (`--heap kept`, the default;
`evaluator/worker/heap.py`): in one process, eager PyTorch's freed temporaries otherwise decide whether the seed's and the
copy's outputs are fresh pages, which cost more than the memory traffic the roofline counts; each side's median page
faults a call are printed beside its time.

    .venv/bin/python scripts/bench_native.py                         # every built-in task
    .venv/bin/python scripts/bench_native.py --tasks relu,softmax --no-compile
    .venv/bin/python scripts/bench_native.py --tuner tiny --budget 6 # also the tuner over a suite, via `opforge bench`
    .venv/bin/python scripts/bench_native.py --march x86-64-v3       # the seeds as a CPU without AVX-512 runs them

`--march LEVEL` builds every seed with `-march=LEVEL` in place of its `-march=native`: on a machine with AVX-512,
`x86-64-v3` (AVX2 and FMA) times the portable paths that a CPU without AVX-512 runs, at this machine's memory
bandwidth and clock (a proxy for such a CPU, not a measurement of one).

Prints a Markdown section (command, date, machine, tables, geometric means) for docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluator.sandbox.zygote_env import openmp_environment  # noqa: E402  (light: imports no torch)

os.environ.update(openmp_environment())  # the workers' OpenMP settings, before torch loads libgomp

import torch  # noqa: E402

from benchmarks import builtin_task, seed_path, suite_tasks  # noqa: E402
from benchmarks.seed_build import MARCH_LEVELS, build_seeds_for  # noqa: E402
from evaluator import load_task  # noqa: E402
from evaluator.device.cpu_peaks import CpuPeaks, copy_like, measure_cpu_peaks  # noqa: E402
from evaluator.harness_library import local_flush  # noqa: E402
from evaluator.worker.heap import keep_freed_memory, minor_faults  # noqa: E402
from evaluator.build.native_build import CACHE_ENV  # noqa: E402
from evaluator.measure.task_work import task_work  # noqa: E402
from evaluator.worker.timing import CallTimer  # noqa: E402


@dataclass(frozen=True, slots=True)
class Row:
    task: str
    correct: bool
    eager_ms: float
    compiled_ms: float | None
    native_ms: float
    build_s: float
    roofline_ms: float | None
    memory_bound: bool
    copy_ms: float | None = None  # the same bytes copied, timed beside the seed (median)
    faults: dict[str, float] = field(default_factory=dict)  # median minor page faults a timed call, by side
    per_round: dict[str, float] = field(default_factory=dict)  # median over rounds of a side's time / the seed's

    # The ratios are medians of per-round ratios where the rounds were timed (a load that comes and goes moves both
    # sides of a round alike), else ratios of the medians.

    @property
    def over_eager(self) -> float:
        return self.per_round.get("eager", self.eager_ms / self.native_ms)

    @property
    def over_compiled(self) -> float | None:
        return self.per_round.get("compiled", self.compiled_ms / self.native_ms) if self.compiled_ms else None

    @property
    def fraction(self) -> float | None:
        return self.roofline_ms / self.native_ms if self.roofline_ms else None

    @property
    def of_copy(self) -> float | None:
        return self.per_round.get("copy", self.copy_ms / self.native_ms) if self.copy_ms else None


def _module(path: Path, name: str):  # noqa: ANN202 - a module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outputs(value) -> list[torch.Tensor]:  # noqa: ANN001
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _close(out, ref, tol: dict) -> bool:  # noqa: ANN001
    outs, refs = _outputs(out), _outputs(ref)
    return len(outs) == len(refs) and all(
        a.shape == b.shape and a.dtype == b.dtype
        and (torch.allclose(a, b, **tol) if b.is_floating_point() else torch.equal(a, b))
        for a, b in zip(outs, refs))


def _interleaved_ms(calls: dict[str, tuple], budget_s: float,
                    min_rounds: int = 5) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Median ms per call of each (function, arguments), timed round by round (one call of each per round) until the
    budget, by the evaluator's own timer: the same cold-cache rule before each call as in an evaluation; the median
    minor page faults of each one's timed calls (eviction included); and the median over rounds of each one's time
    over the native seed's in the same round (the sides of a round share the machine's load of that moment)."""
    timer = CallTimer(torch.device("cpu"), flush=local_flush())
    timer.calibrate()
    times: dict[str, list[float]] = {k: [] for k in calls}
    faults: dict[str, list[int]] = {k: [] for k in calls}
    start = time.perf_counter()
    rounds = 0
    order = list(calls)
    while rounds < min_rounds or time.perf_counter() - start < budget_s:
        random.shuffle(order)  # a fixed order measured the first side of each round ~7% slower (a seed against itself)
        for key in order:
            fn, args = calls[key]
            before = minor_faults()
            times[key].append(timer.time_call(fn, args)[0])
            faults[key].append(minor_faults() - before)
        rounds += 1
        if rounds >= 200:
            break
    per_round = {k: statistics.median(t / n for t, n in zip(v, times["native"])) for k, v in times.items()
                 if k != "native"} if "native" in times else {}
    return ({k: statistics.median(v) for k, v in times.items()},
            {k: statistics.median(v) for k, v in faults.items()}, per_round)


def measure_task(task_path: Path, peaks: CpuPeaks, compile_too: bool, budget_s: float) -> Row:
    task = _module(task_path, f"task_{task_path.stem}")
    tol = {"atol": 1e-4, "rtol": 1e-4, **(getattr(task, "TOLERANCE", None) or {})}
    start = time.perf_counter()
    seed = _module(seed_path(task_path, "cpp"), f"seed_{task_path.stem}")  # load_c builds here (cold cache)
    build_s = time.perf_counter() - start
    init = task.get_init_inputs()
    torch.manual_seed(0)
    model = task.Model(*init).eval()
    torch.manual_seed(0)
    native = seed.ModelNew(*init)
    native.load_state_dict(model.state_dict())
    torch.manual_seed(1)
    inputs = task.get_inputs()
    work = task_work(load_task(task_path))
    calls: dict[str, tuple] = {}
    with torch.no_grad():
        correct = _close(native(*inputs), model(*inputs), tol)
        calls = {"eager": (model, inputs), "native": (native, inputs)}
        if compile_too:
            compiled = torch.compile(model)
            compiled(*inputs)  # compile outside the timing
            compiled(*inputs)
            calls["compiled"] = (compiled, inputs)
        if work is not None:
            copy, source = copy_like(work.min_bytes)
            calls["copy"] = (copy, [source])  # its input is an argument: the timer's cold-cache rule applies alike
        ms, faults, per_round = _interleaved_ms(calls, budget_s)
    roofline_ms = mem_ms = None
    if work is not None:
        mem_ms = work.min_bytes / (peaks.copy_gbps * 1e9) * 1e3
        roofline_ms = work.roofline_ms(peaks.copy_gbps, peaks.peak_gflops / 1e3)
    return Row(f"{task_path.parent.name}/{task_path.stem}", correct, ms["eager"], ms.get("compiled"), ms["native"],
               build_s, roofline_ms, mem_ms is not None and mem_ms >= (roofline_ms or 0.0), ms.get("copy"), faults, per_round)


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def run_tuner(suite: str, budget: int, timing_s: float) -> dict:
    """`opforge bench` with the offline tuner and the native seeds over a suite; its summary and wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'bench.db'}"
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "opforge", "bench", "--suite", suite, "--backend", "cpp",
                               "--coder", "tune", "--budget-per-task", str(budget), "--timing-s", str(timing_s),
                               "--runner", "local", "--no-archive", "--json", "--db", db],
                              capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall_s = time.perf_counter() - start
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:], "wall_s": wall_s}
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        board = subprocess.run([sys.executable, "-m", "opforge", "leaderboard", "--suite", suite, "--json",
                                "--db", db], capture_output=True, text=True, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
        rows = json.loads(board.stdout)["rows"] if board.returncode == 0 else []
        return {"summary": summary, "wall_s": wall_s, "leaderboard": rows[0] if rows else None}


def print_tuner(suite: str, tuner: dict, budget: int, timing_s: float, seeds: dict[str, Row]) -> None:
    """The tuner's bench over `suite`: per task its best kernel's speedup over eager and fraction of the roofline, as
    the pipeline measured them (the evaluator's own protocol, in its workers), beside this script's figures for the
    seed. "over compile" is derived: the tuner's speedup over eager times eager's time over torch.compile's, both
    measured side by side in this script's run, so it carries two runs' noise."""
    print()
    if "error" in tuner:
        print(f"Tuner over {suite} failed after {tuner['wall_s']:.0f} s:\n```\n{tuner['error']}\n```")
        return
    done = sum(t["evaluated"] for t in tuner["summary"]["tasks"])
    board = tuner["leaderboard"] or {}
    print(f"Tuner (`opforge bench --suite {suite} --backend cpp --coder tune --budget-per-task {budget} --timing-s "
          f"{timing_s:g} --runner local`): {done} evaluations in {tuner['wall_s']:.0f} s = "
          f"{60 * done / tuner['wall_s']:.1f} evaluations/min; leaderboard geomean "
          f"{_x(board.get('geomean_speedup'))} over eager, mean roofline fraction "
          f"{'-' if board.get('mean_roofline_fraction') is None else format(board['mean_roofline_fraction'], '.0%')}")
    print()
    print("| task | evaluated | best over eager | its roofline | derived over compile | seed over eager (this "
          "script) | seed roofline (this script) |")
    print("|---|---|---|---|---|---|---|")
    fractions = {f"{suite}/{t['task']}": t.get("roofline_fraction") for t in board.get("tasks", [])}
    over_compile = []
    for t in tuner["summary"]["tasks"]:
        seed, best = seeds.get(t["task"]), t.get("best_speedup")
        derived = best * seed.compiled_ms / seed.eager_ms if seed and seed.compiled_ms and best else None
        if derived:
            over_compile.append(derived)
        fraction = fractions.get(t["task"])
        print(f"| {t['task']} | {t['evaluated']} | {_x(best)} | {'-' if fraction is None else format(fraction, '.0%')} "
              f"| {_x(derived)} | {_x(seed.over_eager) if seed else '-'} | "
              f"{'-' if seed is None or seed.fraction is None else format(seed.fraction, '.0%')} |")
    bests = [t["best_speedup"] for t in tuner["summary"]["tasks"] if t.get("best_speedup")]
    print(f"\n- {suite}, tuner's best: {_x(geomean(bests))} over eager, {_x(geomean(over_compile))} over "
          f"torch.compile (derived, {len(over_compile)} tasks)")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cpu}, {os.cpu_count()} CPUs ({torch.get_num_threads()} PyTorch/OpenMP threads), no GPU; Python "
            f"{platform.python_version()}, torch {torch.__version__}")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", help="comma-separated built-in task names (default: every built-in task)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    parser.add_argument("--budget-s", type=float, default=2.0, help="timing budget per task (default 2 s)")
    parser.add_argument("--tuner", metavar="SUITE",
                        help="also run the offline tuner over SUITE (or several, comma-separated) via opforge bench")
    parser.add_argument("--budget", type=int, default=6, help="candidates per task for --tuner (default 6)")
    parser.add_argument("--timing-s", type=float, default=0.5, help="--timing-s for --tuner (default 0.5)")
    parser.add_argument("--heap", choices=("kept", "glibc"), default="kept",
                        help="kept (default): the C heap keeps freed memory, so no side's output is fresh pages "
                             "because of what another side freed (evaluator/worker/heap.py); glibc: its defaults")
    parser.add_argument("--march", metavar="LEVEL", choices=MARCH_LEVELS,
                        help="build the seeds for LEVEL instead of this CPU (-march=native); x86-64-v3 on a CPU with "
                             "AVX-512 times the portable paths that a CPU without it runs (the seeds' table only, not "
                             "--tuner's candidates)")
    args = parser.parse_args()
    if args.march:
        build_seeds_for(args.march)
    kept = args.heap == "kept" and keep_freed_memory()
    paths = [builtin_task(n.strip()) for n in args.tasks.split(",")] if args.tasks else suite_tasks("all")
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="native-cold-")  # every seed's build is a cold one
    load = os.getloadavg()
    peaks = measure_cpu_peaks()
    rows = []
    for path in paths:
        row = measure_task(path, peaks, not args.no_compile, args.budget_s)
        rows.append(row)
        print(f"  {row.task}: {_x(row.over_eager)} over eager, {_x(row.over_compiled)} over compile", file=sys.stderr)
    tuners = {suite.strip(): run_tuner(suite.strip(), args.budget, args.timing_s)
              for suite in (args.tuner.split(",") if args.tuner else [])}

    print(f"Command: `{' '.join(shlex.quote(a) for a in ['.venv/bin/python', *sys.argv])}`  ")
    print(f"Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC  ")
    print(f"Machine: {machine()}  ")
    if args.march:
        print(f"Seeds built with `-march={args.march}` in place of `-march=native`  ")
    print(f"Heap: {'kept (no fresh pages for outputs after warm-up; evaluator/worker/heap.py)' if kept else 'glibc defaults'}"
          f"; load average {load[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end  ")
    print(f"Measured peaks: copy {peaks.copy_gbps:.1f} GB/s, FP32 FMA {peaks.peak_gflops:.0f} GFLOP/s "
          f"({peaks.threads} threads)  ")
    print()
    print("| task | correct | eager ms | compile ms | native ms | over eager | over compile | bound | roofline | "
          "copy ms | of copy | page faults a call (eager, native, copy) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        frac = "-" if r.fraction is None else f"{r.fraction:.0%}"
        of_copy = "-" if r.of_copy is None else f"{r.of_copy:.0%}"
        comp = "-" if r.compiled_ms is None else f"{r.compiled_ms:.2f}"
        copy = "-" if r.copy_ms is None else f"{r.copy_ms:.2f}"
        print(f"| {r.task} | {'yes' if r.correct else 'NO'} | {r.eager_ms:.2f} | {comp} | {r.native_ms:.2f} | "
              f"{_x(r.over_eager)} | {_x(r.over_compiled)} | {'memory' if r.memory_bound else 'compute'} | {frac} | "
              f"{copy} | {of_copy} | {', '.join(f'{r.faults[k]:.0f}' if k in r.faults else '-' for k in ('eager', 'native', 'copy'))} |")
    memory = [r for r in rows if r.memory_bound and r.fraction is not None]
    print()
    print(f"- geometric mean over eager: {_x(geomean([r.over_eager for r in rows]))} ({len(rows)} tasks); "
          f"over torch.compile: {_x(geomean([r.over_compiled for r in rows if r.over_compiled]))}")
    for suite in sorted({r.task.split('/')[0] for r in rows}):
        part = [r for r in rows if r.task.startswith(suite + "/")]
        print(f"- {suite}: {_x(geomean([r.over_eager for r in part]))} over eager, "
              f"{_x(geomean([r.over_compiled for r in part if r.over_compiled]))} over torch.compile")
    if memory:
        print(f"- memory-bound tasks: median {statistics.median(r.fraction for r in memory):.0%} of the measured copy "
              f"bandwidth's bound; {sum(r.fraction >= 0.7 for r in memory)} of {len(memory)} at 70% or more")
    beside = [r.of_copy for r in memory if r.of_copy is not None]
    if beside:
        print(f"- memory-bound tasks against the same bytes copied side by side: median "
              f"{statistics.median(beside):.0%}; {sum(f >= 0.7 for f in beside)} of {len(beside)} at 70% or more")
    print(f"- build time per seed (cold, gcc): median {statistics.median(r.build_s for r in rows):.2f} s, "
          f"max {max(r.build_s for r in rows):.2f} s")
    for suite, tuner in tuners.items():
        print_tuner(suite, tuner, args.budget, args.timing_s, {r.task: r for r in rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
