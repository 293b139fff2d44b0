"""Benchmark: where one cold `opforge eval` spends its time, seen from the driver (not a test; figures go to
docs/PERFORMANCE.md).

Each run is a fresh process that runs `opforge eval TASK CANDIDATE` as the command does, with timestamps (seconds
from that process's start) around the driver's steps: its evaluator imported, each worker answering, the
correctness trials, the timing, the rechecks of kept calls, closing. Per trial it records how long the driver waited
for each side's outputs and the page faults the driver and the candidate's worker took meanwhile (the worker's from
/proc, read between two receives); per timing block, its side, calls and wall per call. `bench_cold.py` gives the
whole command's wall beside a naive checker's; this script says which step moved.

    .venv/bin/python scripts/bench_cold_timeline.py --runs 3
    .venv/bin/python scripts/bench_cold_timeline.py --task benchmarks/tiny/softmax.py \\
        --candidate benchmarks/tiny/softmax.cpp.py --runs 3 --trials --blocks

The steps are timed by wrapping the evaluator's functions in the child process only (nothing of the evaluator is
changed), so their own cost, a clock read and a /proc read per receive, is in the figures.
"""

from __future__ import annotations

import argparse
import atexit
import datetime
import importlib.abc
import importlib.machinery
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
START = time.monotonic()
EVENTS: list[dict[str, Any]] = []


def stamp(what: str, **facts: Any) -> None:
    EVENTS.append({"t": time.monotonic() - START, "what": what, **facts})


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def process_faults(pid: int | None) -> int | None:
    """A process's minor faults by the kernel's accounting (field 10 of /proc/PID/stat), None where unreadable."""
    if pid is None:
        return None
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
    except (OSError, IndexError, ValueError):
        return None


def around(owner: Any, name: str, label: str) -> None:
    """`owner.name` stamped at its start and end."""
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        stamp(f"{label} start")
        try:
            return inner(*args, **kwargs)
        finally:
            stamp(f"{label} end")
    setattr(owner, name, wrapped)


def instrument(evaluate_module: Any) -> None:
    """Wraps the driver's steps; called once `evaluator.evaluate` is loaded (after the zygotes were launched, as the
    command launches them before it imports the evaluator)."""
    stamp("evaluator imported")
    from evaluator.driver import connection
    from evaluator.measure import blocks as measure
    from evaluator.measure.worker_cpu import host_pid

    for name, label in (("run_trials", "trials"), ("measure", "timing"), ("recheck_timed", "rechecks"),
                        ("close_all", "closing")):
        around(evaluate_module, name, label)
    spawn = evaluate_module.LocalEvaluator._spawn

    def spawned(self: Any, device: str, role: str, *args: Any, **kwargs: Any) -> Any:
        conn = spawn(self, device, role, *args, **kwargs)
        stamp(f"{role} worker forked")
        return conn
    evaluate_module.LocalEvaluator._spawn = spawned

    recv = connection.WorkerConnection.recv
    worker_pids: dict[int, int | None] = {}

    def received(self: Any, timeout_s: float, doing: str) -> Any:
        t0, faults0 = time.monotonic(), minor_faults()
        reply = recv(self, timeout_s, doing)
        if "trial" in doing or "expected" in doing or "recomput" in doing:
            facts: dict[str, Any] = {"side": self.role, "doing": doing, "waited_ms": (time.monotonic() - t0) * 1e3,
                                     "driver_faults": minor_faults() - faults0}
            if self.role == "candidate":
                if id(self) not in worker_pids:
                    worker_pids[id(self)] = host_pid(self.zygote.host_pid, self.handle.pid)
                facts["worker_faults"] = process_faults(worker_pids[id(self)])
            stamp("received", **facts)
        return reply
    connection.WorkerConnection.recv = received  # type: ignore[method-assign]

    block = measure._block

    def timed_block(conn: Any, rec: Any, *args: Any, **kwargs: Any) -> Any:
        calls0, t0 = len(rec.samples_ms), time.monotonic()
        try:
            return block(conn, rec, *args, **kwargs)
        finally:
            calls = len(rec.samples_ms) - calls0
            samples = sorted(rec.samples_ms[calls0:])
            stamp("block", side=conn.role, calls=calls, wall_ms=(time.monotonic() - t0) * 1e3,
                  call_median_ms=samples[len(samples) // 2] if samples else None)
    measure._block = timed_block


class _AfterLoad(importlib.abc.MetaPathFinder):
    """Runs `instrument` right after `evaluator.evaluate` has executed."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "evaluator.driver.evaluate":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_instrument(module: Any) -> None:
            exec_module(module)
            instrument(module)
        loader.exec_module = exec_and_instrument  # type: ignore[method-assign]
        return spec


def child(task: str, candidate: str) -> None:
    """One cold evaluation in this process, as `opforge eval` runs it (which ends the process at once once its
    verdict is printed, after the exit handlers); its events as one JSON line on stdout, from an exit handler."""
    sys.meta_path.insert(0, _AfterLoad())
    stamp("start")
    from opforge.cli.program import main as opforge_main
    out = sys.stdout

    def report() -> None:
        stamp("end")
        out.write(json.dumps(EVENTS) + "\n")
        out.flush()
    atexit.register(report)
    sys.argv = ["opforge", "eval", task, candidate, "--json"]
    sys.stdout = sys.stderr  # the verdict's JSON goes to stderr: this script's stdout is the events
    sys.exit(opforge_main())


def first(events: list[dict[str, Any]], what: str) -> float | None:
    return next((e["t"] for e in events if e["what"] == what), None)


def summary(runs: list[list[dict[str, Any]]], trials: bool, blocks: bool) -> None:
    steps = ["evaluator imported", "reference worker forked", "candidate worker forked", "trials start", "trials end",
             "timing end", "rechecks end", "closing end", "end"]
    print("| step (s from the process start) | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    for step in steps:
        cells = [first(events, step) for events in runs]
        print(f"| {step} | " + " | ".join("-" if c is None else f"{c:.2f}" for c in cells) + " |")
    for label, (a, b) in {"trials": ("trials start", "trials end"), "timing": ("timing start", "timing end"),
                          "rechecks": ("rechecks start", "rechecks end")}.items():
        spans = [(first(e, b) or 0.0) - (first(e, a) or 0.0) for e in runs]
        print(f"{label}: " + ", ".join(f"{s:.2f} s" for s in spans))
    for i, events in enumerate(runs):
        if trials:
            print(f"run {i + 1}, each receive of outputs (side, what, waited ms, driver faults, candidate worker "
                  "faults since its previous receive):")
            last: int | None = None
            for e in events:
                if e["what"] != "received":
                    continue
                worker = e.get("worker_faults")
                grown = "" if worker is None or last is None else f", worker {worker - last}"
                last = worker if worker is not None else last
                print(f"  {e['t']:.3f} {e['side']}: {e['doing']}: {e['waited_ms']:.1f} ms, driver "
                      f"{e['driver_faults']}{grown}")
        if blocks:
            print(f"run {i + 1}, timing blocks:")
            for e in events:
                if e["what"] == "block":
                    print(f"  {e['side']}: {e['calls']} calls, {e['wall_ms']:.0f} ms, "
                          f"{e['wall_ms'] / max(e['calls'], 1):.1f} ms a call "
                          f"(call median {e['call_median_ms'] or 0:.2f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="benchmarks/tiny/softmax.py")
    parser.add_argument("--candidate", default="benchmarks/tiny/softmax.cpp.py")
    parser.add_argument("--runs", type=int, default=3, help="cold evaluations, each in a fresh process")
    parser.add_argument("--trials", action="store_true", help="also print every receive of the trials and rechecks")
    parser.add_argument("--blocks", action="store_true", help="also print every timing block")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.task, args.candidate)
        return
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC  machine: {platform.machine()}, "
          f"{os.cpu_count()} cores  load average at start: {os.getloadavg()[0]:.2f}")
    print(f"command: .venv/bin/python scripts/bench_cold_timeline.py --task {args.task} --candidate {args.candidate} "
          f"--runs {args.runs}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if "triton" in (ROOT / args.candidate).read_text():
        env["TRITON_INTERPRET"] = "1"  # on a machine without a GPU, as the evaluator does
    runs = []
    for _ in range(args.runs):
        done = subprocess.run([sys.executable, __file__, "--child", "--task", str(ROOT / args.task),
                               "--candidate", str(ROOT / args.candidate)], capture_output=True, text=True, env=env,
                              cwd=ROOT)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            raise SystemExit(f"a cold evaluation failed ({done.returncode}): {done.stderr[-800:]}")
        runs.append(json.loads(lines[-1]))
        verdict = next((line for line in done.stderr.splitlines() if line.startswith("{")), "")
        status = json.loads(verdict).get("status") if verdict else "?"
        print(f"run {len(runs)}: {status}, {runs[-1][-1]['t']:.2f} s", flush=True)
    summary(runs, args.trials, args.blocks)


if __name__ == "__main__":
    main()
