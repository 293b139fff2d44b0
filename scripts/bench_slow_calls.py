"""Benchmark: which calls of a native seed and of eager PyTorch are slow, and what the kernel's scheduler says of them.

Issue 36's "two speeds": a two-thread OpenMP kernel's calls fall in a fast group and a group near one thread's
speed. This times a built-in task's native seed and its eager reference in one plain process (no opforge code in
the timed loop), the sides alternated call by call, inputs evicted before each call (a write of a buffer four times
the last-level cache, at most 64 MiB), OpenMP waiting passively with one thread per CPU (as opforge's workers do).
Around each call it reads every thread's scheduler account, `/proc/self/task/*/schedstat` (nanoseconds on the CPU,
nanoseconds runnable but waiting for a CPU), and the machine's steal time from `/proc/stat`. A call is slow when it
takes more than 1.25 times its side's median. For slow and fast calls it prints the helper threads' (every thread
but the one that called) time on a CPU and time waiting for one:

- helpers that waited for a CPU during slow calls: something else held the CPU they were woken for (another process,
  another evaluation);
- helpers that neither waited nor ran during slow calls: they were woken late, or not at all (the OpenMP runtime's
  wake-up, a halted virtual CPU);
- helpers that ran as long as in fast calls: the slowness is not the threads' (memory, the host).

`--beside` starts a disturber beside the timed process, to see what each cause looks like: `bursts` (a process that
works 2 ms of every 10 ms, as another evaluation's build or draw would) or `busy` (one CPU taken throughout).

`--evaluations N` reads the same accounts inside opforge instead: N evaluations of the seed by one `LocalEvaluator`
(the default protocol), the driver reading each worker's threads (its whole process tree, as the evaluator's own
checks do: `evaluator.measure.worker_cpu`) right before its `go` and right after its reply. A call is slow against
its own evaluation's median there, so that a shift between evaluations is not counted as slow calls.

    .venv/bin/python scripts/bench_slow_calls.py --task softmax --calls 200
    .venv/bin/python scripts/bench_slow_calls.py --task softmax --calls 200 --beside bursts
    .venv/bin/python scripts/bench_slow_calls.py --task softmax --evaluations 6
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMED = r"""
import importlib.util, json, os, sys, time
import torch

def module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                run_ns, wait_ns, _ = f.read().split()
            with open(f"/proc/self/task/{tid}/stat") as f:
                minflt = int(f.read().rsplit(")", 1)[1].split()[7])
        except (OSError, ValueError, IndexError):
            continue
        out[int(tid)] = (int(run_ns), int(wait_ns), minflt)
    return out

def steal_ticks():
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0

task_path, seed_path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
task, seed = module(task_path, "slow_task"), module(seed_path, "slow_seed")
init = task.get_init_inputs()
torch.manual_seed(0)
model = task.Model(*init).eval()
native = seed.ModelNew(*init)
native.load_state_dict(model.state_dict())
inputs = [task.get_inputs() for _ in range(3)]
llc = 0
cache_dir = "/sys/devices/system/cpu/cpu0/cache"
for index in os.listdir(cache_dir) if os.path.isdir(cache_dir) else []:
    try:
        text = open(f"{cache_dir}/{index}/size").read().strip()
    except OSError:
        continue
    llc = max(llc, int(text.rstrip("KM")) * {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1))
flush = torch.empty(min(llc or 32 << 20, 16 << 20), dtype=torch.float32)  # four caches of floats, at most 64 MiB
me = os.getpid()
sides = {"eager": model, "native": native}
rows = []
with torch.no_grad():
    for fn in sides.values():
        for args in inputs:
            fn(*args)
    for i in range(calls):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for key in order:
            args = inputs[i % len(inputs)]
            flush.fill_(i)
            before, steal0 = threads(), steal_ticks()
            t0 = time.perf_counter()
            sides[key](*args)
            t1 = time.perf_counter()
            after, steal1 = threads(), steal_ticks()
            rows.append({"side": key, "ms": (t1 - t0) * 1e3, "main": me, "before": before, "after": after,
                         "steal_ticks": steal1 - steal0})
print(json.dumps(rows))
"""

SLOW = 1.25  # a call over this many times its side's median is slow

DISTURBERS = {
    "bursts": "import time\nwhile True:\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.002: pass\n"
              "    time.sleep(0.008)\n",
    "busy": "while True: pass\n",
}


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per side, its fast and slow calls (slow: over SLOW times the median of its side in its group) with the
    medians of their accounts, as table rows."""
    medians: dict[tuple[object, object], float] = {}
    for key in {(r["group"], r["side"]) for r in rows}:
        medians[key] = statistics.median(r["ms"] for r in rows if (r["group"], r["side"]) == key)
    lines = []
    for side in ("native", "eager"):
        mine = [r for r in rows if r["side"] == side]
        slow = [r for r in mine if r["ms"] > SLOW * medians[(r["group"], side)]]
        fast = [r for r in mine if r["ms"] <= SLOW * medians[(r["group"], side)]]
        for name, group in (("fast", fast), ("slow", slow)):
            if not group:
                lines.append(f"| {side} | {name} | 0 | - | - | - | - | - | - | - |")
                continue

            def med(key: str) -> float:
                return statistics.median(r[key] for r in group)
            lines.append(f"| {side} | {name} | {len(group)} | {med('ms'):.3f} | {med('main_run_ms'):.3f} "
                         f"| {med('helpers_run_ms'):.3f} | {med('helpers_wait_ms'):.3f} "
                         f"| {med('main_faults'):.0f} | {med('helpers_faults'):.0f} "
                         f"| {sum(r['steal_ticks'] for r in group)} |")
    return lines


def account(after: dict[int, tuple[int, ...]], before: dict[int, tuple[int, ...]], main: int) -> dict[str, float]:
    """One call's scheduler accounts, from each thread's (run ns, wait ns[, minor faults]) before and after it."""
    out = {"main_run_ms": 0.0, "main_wait_ms": 0.0, "helpers_run_ms": 0.0, "helpers_wait_ms": 0.0,
           "main_faults": 0.0, "helpers_faults": 0.0}
    for tid, (run, wait, *faults) in after.items():
        run0, wait0, *faults0 = before.get(tid, (0, 0, 0))
        who = "main" if tid == main else "helpers"
        out[f"{who}_run_ms"] += (run - run0) / 1e6
        out[f"{who}_wait_ms"] += (wait - wait0) / 1e6
        out[f"{who}_faults"] += (faults[0] - (faults0 or [0])[0]) if faults else 0
    return out


def minor_faults(pid: int, threads: dict[int, tuple[int, int]]) -> dict[int, tuple[int, ...]]:
    """`threads` (tid: run ns, wait ns) with each thread's minor page faults so far (/proc/PID/task/TID/stat, the
    tenth field) appended: a page the call touches for the first time costs its thread a fault and a zeroed page."""
    out: dict[int, tuple[int, ...]] = {}
    for tid, acc in threads.items():
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                out[tid] = (*acc, int(f.read().rsplit(")", 1)[1].split()[7]))
        except (OSError, ValueError, IndexError):
            out[tid] = acc
    return out


def steal_ticks() -> int:
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


def opforge_rows(task_path: Path, seed: Path, evaluations: int) -> list[dict[str, Any]]:
    """Every timed call of `evaluations` evaluations of the seed (after one that starts the zygotes), with its
    worker's thread accounts read by the driver around it (see the module's docstring)."""
    import time

    from evaluator import EvalConfig, LocalEvaluator, load_candidate, load_task
    from evaluator.driver.connection import WorkerConnection
    from evaluator.measure.worker_cpu import WorkerCpu
    from evaluator.wire.commands import Go
    from evaluator.wire.replies import Rep

    rows: list[dict[str, Any]] = []
    group = [-1]  # the evaluation the calls belong to (-1: the warm-up, not kept)
    workers: dict[int, WorkerCpu] = {}
    before: dict[int, tuple[dict[int, tuple[int, ...]], int]] = {}
    send, recv_as = WorkerConnection.send, WorkerConnection.recv_as

    def reader(conn: WorkerConnection) -> WorkerCpu:
        if id(conn) not in workers:
            workers[id(conn)] = WorkerCpu(conn.zygote.host_pid, conn.handle.pid)
        return workers[id(conn)]

    def sending(self: WorkerConnection, msg: object, *args: object, **kwargs: object) -> object:
        if isinstance(msg, Go):
            threads, pid = reader(self).thread_sched_ns(), reader(self).pid
            if threads is not None and pid is not None:
                before[id(self)] = (minor_faults(pid, threads), steal_ticks())
        return send(self, msg, *args, **kwargs)  # type: ignore[arg-type]

    def receiving(self: WorkerConnection, kind: type, *args: object, **kwargs: object) -> object:
        got: Any = recv_as(self, kind, *args, **kwargs)  # type: ignore[arg-type]
        if kind is Rep and id(self) in before:
            threads0, steal0 = before.pop(id(self))
            threads, main = reader(self).thread_sched_ns(), reader(self).pid
            if threads is not None and main is not None and group[0] >= 0:
                threads = minor_faults(main, threads)
                rows.append({"side": "native" if self.role == "candidate" else "eager", "group": group[0],
                             "ms": got[0].ms, **account(threads, threads0, main),
                             "steal_ticks": steal_ticks() - steal0})
        return got

    setattr(WorkerConnection, "send", sending)
    setattr(WorkerConnection, "recv_as", receiving)
    task, cand = load_task(task_path), load_candidate(seed, origin="seed")
    cfg = EvalConfig(device="cpu", profile=False)
    ev = LocalEvaluator()
    try:
        for i in range(-1, evaluations):
            group[0] = i
            workers.clear()
            started = time.perf_counter()
            r = ev.evaluate(task, cand, cfg)
            if not r.ok or r.speedup is None:
                raise SystemExit(f"{task_path.stem}: the seed was not accepted: {r.status.value}: {r.reason}")
            if i >= 0:
                print(f"evaluation {i + 1}: {r.speedup:.2f}x ({time.perf_counter() - started:.1f} s)", flush=True)
    finally:
        ev.close()
        setattr(WorkerConnection, "send", send)
        setattr(WorkerConnection, "recv_as", recv_as)
    return rows


def main() -> int:
    from evaluator.sandbox.zygote_env import openmp_environment
    from benchmarks import builtin_task, seed_path

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="softmax", help="a built-in task with a native seed (softmax)")
    parser.add_argument("--calls", type=int, default=200, help="calls of each side (200)")
    parser.add_argument("--beside", choices=("none", *DISTURBERS), default="none",
                        help="a disturber beside the timed process (none)")
    parser.add_argument("--omp", default="passive",
                        help="OpenMP's idle threads: 'passive' (opforge's workers: they sleep when a parallel region "
                             "ends), 'default' (libgomp's own setting, as in a user's process) or 'spin:N' (they spin "
                             "N times, then sleep)")
    parser.add_argument("--evaluations", type=int, default=0, metavar="N",
                        help="read the accounts inside opforge instead: N evaluations of the seed (see above)")
    parser.add_argument("--json", type=Path, help="also write every call's record here")
    args = parser.parse_args()
    task_path = builtin_task(args.task)
    seed = seed_path(task_path, "cpp")
    if seed is None:
        raise SystemExit(f"{args.task}: the built-in task has no native seed (NAME.cpp.py)")
    env = {**os.environ, **openmp_environment(), "PYTHONPATH": str(ROOT)}
    env.pop("TRITON_INTERPRET", None)
    if args.omp == "default":
        env.pop("OMP_WAIT_POLICY"), env.pop("GOMP_SPINCOUNT")
    elif args.omp.startswith("spin:") and args.omp[5:].isdigit():
        env.pop("OMP_WAIT_POLICY")
        env["GOMP_SPINCOUNT"] = args.omp[5:]
    elif args.omp != "passive":
        raise SystemExit(f"--omp {args.omp}: expected passive, default or spin:N")
    unset = "libgomp's own"
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores  load average at start: {os.getloadavg()[0]:.2f}  OpenMP: "
          f"{env.get('OMP_NUM_THREADS')} threads, wait policy {env.get('OMP_WAIT_POLICY', unset)}, spin count "
          f"{env.get('GOMP_SPINCOUNT', unset)}")
    if args.evaluations:
        print(f"command: .venv/bin/python scripts/bench_slow_calls.py --task {args.task} --evaluations "
              f"{args.evaluations} --beside {args.beside}")
    else:
        print(f"command: .venv/bin/python scripts/bench_slow_calls.py --task {args.task} --calls {args.calls} "
              f"--beside {args.beside} --omp {args.omp}")
    disturber = None
    if args.beside != "none":
        disturber = subprocess.Popen([sys.executable, "-c", DISTURBERS[args.beside]])
    try:
        if args.evaluations:
            os.environ.update(openmp_environment())  # as the workers have them (they take them from here)
            rows = opforge_rows(task_path, seed, args.evaluations)
        else:
            proc = subprocess.run([sys.executable, "-c", TIMED, str(task_path), str(seed), str(args.calls)],
                                  capture_output=True, text=True, env=env, timeout=1200)
            if proc.returncode != 0:
                raise SystemExit(f"{args.task}: the timed process failed: {proc.stderr.strip()[-600:]}")
            rows = [{"side": r["side"], "group": 0, "ms": r["ms"], "steal_ticks": r["steal_ticks"],
                     **account({int(t): tuple(v) for t, v in r["after"].items()},
                               {int(t): tuple(v) for t, v in r["before"].items()}, r["main"])}
                    for r in json.loads(proc.stdout.strip().splitlines()[-1])]
    finally:
        if disturber is not None:
            disturber.kill()
            disturber.wait()
    if args.json:
        args.json.write_text(json.dumps(rows))
    print("| side | calls | n | median ms | calling thread on CPU ms | helpers on CPU ms "
          "| helpers waiting for a CPU ms | calling thread's minor faults | helpers' minor faults "
          "| steal ticks (all calls) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for line in summary(rows):
        print(line)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
