"""`perf stat` counters for the judge of native CPU kernels: cycles, instructions, cache and branch misses of one call.

Where `perf` exists and counts at least one hardware event here (probed once per process: a VM without a PMU
counts none, and then no profiled run is made), the process Nsight Compute profiles on a GPU (`python -m evaluator.profile.ncu_target JOB_DIR`, hardened
as a candidate worker, its builds answered by the evaluation's build server) is run under `perf stat` with the
counters disabled (`--delay -1`); the target switches them on and off around one call of the candidate through perf's
control FIFOs, so that loading, building and input generation are not counted. perf runs in a session of its own,
killed whole once it is done or late, inside the timed phase like ncu. The counters come back as `perf.<event>`
profile metrics; an event this machine cannot count (a VM without a PMU gives `<not supported>`) is named in a note,
and a perf that cannot run (permissions, a timeout, a target that refused) gives a one-sentence problem. Advice for
the judge, never part of a verdict.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.profile.ncu import run_in_session

EVENTS = ("task-clock", "cycles", "instructions", "cache-references", "cache-misses", "LLC-loads", "LLC-load-misses",
          "branches", "branch-misses")
SOFTWARE = ("task-clock",)  # counted by the kernel anywhere; the others need a PMU (often absent in a VM)
PROBE_TIMEOUT_S = 20.0
CONTROL = ("perf-ctl.fifo", "perf-ack.fifo")
PERMISSION_PROBLEM = ("perf may not count this user's processes (see /proc/sys/kernel/perf_event_paranoid; 2 allows "
                      "user-space counting of one's own processes)")
_PERMISSION = ("perf_event_paranoid", "Permission denied", "Access to performance monitoring", "No permission")


@dataclass(frozen=True, slots=True)
class PerfReport:
    metrics: dict[str, float]
    problem: str | None = None              # perf could not count at all: one sentence
    unsupported: tuple[str, ...] = ()       # events this machine does not count (`<not supported>`, `<not counted>`)

    def note(self) -> str | None:
        """What the verdict's reason says about the counters, if anything."""
        if self.problem:
            return f"no perf counters: {self.problem}"
        if self.unsupported:
            return f"perf cannot count {', '.join(self.unsupported)} here (no hardware counters in this machine?)"
        return None


def perf_path() -> str | None:
    return shutil.which("perf")


@functools.lru_cache(maxsize=4)
def probe(perf: str, events: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """Which events this machine counts for an unprivileged process (`perf stat` around `true`, once per process):
    (countable, unsupported, a problem sentence where perf cannot count at all)."""
    with tempfile.TemporaryDirectory(prefix="opforge-perf-probe-") as work:
        out = Path(work) / "perf.csv"
        code, output = run_in_session([perf, "stat", "-x", ",", "-o", str(out), "-e", ",".join(events), "--", "true"],
                                      dict(os.environ), Path(work), PROBE_TIMEOUT_S)
        text = out.read_text(errors="replace") if out.exists() else ""
    if code is None:
        return (), events, f"perf stat did not finish within {PROBE_TIMEOUT_S:g} s"
    if any(word in output for word in _PERMISSION):
        return (), events, PERMISSION_PROBLEM
    metrics, unsupported = parse_perf_csv(text, events)
    if code != 0 or not (metrics or unsupported):
        return (), events, f"perf stat does not run here: {(output.strip().splitlines() or ['no output'])[-1][:300]}"
    return tuple(e for e in events if f"perf.{e}" in metrics), unsupported, None


def makes_a_run(events: Sequence[str] = EVENTS, require_hardware: bool = True) -> bool:
    """Whether `profile_with_perf` would run the candidate under perf here (perf probed once per process): the caller
    takes the device's timed phase for that run only, not for a probe that finds no counter worth a run."""
    perf = perf_path()
    if perf is None:
        return False
    countable, _, problem = probe(perf, tuple(events))
    return problem is None and (not require_hardware or any(e not in SOFTWARE for e in countable))


def perf_command(perf: str, target: list[str], out_file: str, events: Sequence[str], control: Sequence[str]) -> list[str]:
    """perf's command line: CSV (`-x ,`) into `out_file`, counters off until the target enables them through the
    control FIFOs, the target's child processes counted with it."""
    return [perf, "stat", "-x", ",", "-o", out_file, "-e", ",".join(events), "--delay", "-1",
            "--control", f"fifo:{control[0]},{control[1]}", "--", *target]


def parse_perf_csv(text: str, events: Sequence[str] = EVENTS) -> tuple[dict[str, float], tuple[str, ...]]:
    """`perf stat -x ,` lines (value, unit, event, ...) as `perf.<event>` metrics, and the events it did not count.
    Event names may come back with modifiers (`cycles:u` where only user space may be counted)."""
    metrics: dict[str, float] = {}
    missing: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 3 or row[0].startswith("#"):
            continue
        value, event = row[0].strip(), row[2].strip().split(":")[0]
        if event not in events:
            continue
        try:
            metrics[f"perf.{event}"] = float(value)
        except ValueError:  # <not supported>, <not counted>
            missing.append(event)
    missing += [e for e in events if f"perf.{e}" not in metrics and e not in missing and text.strip()]
    return metrics, tuple(missing)


def profile_with_perf(task_source: str, task_name: str, candidate_source: str, init_seed: int, seed: int,
                      timeout_s: float, isolation: str, build_cache: Any = None,
                      build_answer: Any = None, events: Sequence[str] = EVENTS,
                      require_hardware: bool = True) -> PerfReport:
    """perf counters of one call of the candidate on the CPU. Empty with no problem where perf is missing, and with
    the unsupported events named (no run made) where it counts no hardware event, unless `require_hardware` is off."""
    perf = perf_path()
    if perf is None:
        return PerfReport({})
    countable, unsupported, problem = probe(perf, tuple(events))
    if problem is not None:
        return PerfReport({}, problem)
    if require_hardware and not any(e not in SOFTWARE for e in countable):  # no PMU: not worth a profiled run
        return PerfReport({}, None, unsupported)
    events = countable
    from evaluator.profile.ncu_builds import FileBuildServer
    from evaluator.sandbox.bwrap import bwrap_available, bwrap_prefix
    from evaluator.sandbox.zygote_env import PROJECT_ROOT, scrubbed_environment
    job = Path(tempfile.mkdtemp(prefix="opforge-perf-"))
    try:
        for name in CONTROL:
            os.mkfifo(job / name)
        (job / "job.json").write_text(json.dumps({
            "task_source": task_source, "task_name": task_name, "candidate_source": candidate_source,
            "init_seed": init_seed, "seed": seed, "device": "cpu", "cpu_limit_s": int(timeout_s) + 60,
            "build_timeout_s": timeout_s, "perf_control": list(CONTROL)}))
        target = [sys.executable, "-m", "evaluator.profile.ncu_target", str(job)]
        if isolation != "process" and bwrap_available():
            prefix = bwrap_prefix("cpu")
            target = prefix[:-1] + ["--bind", str(job), str(job), "--"] + target
        env = scrubbed_environment()
        env["PYTHONPATH"] = str(PROJECT_ROOT)
        if build_answer is None:
            from evaluator.build.stage import BuildServer, build_mode
            build_answer = BuildServer(build_cache, build_mode("cpu"), isolation, "profile").answer
        report = job / "perf.csv"
        control = [str(job / name) for name in CONTROL]
        with FileBuildServer(job, build_answer, timeout_s):
            code, output = run_in_session(perf_command(perf, target, str(report), events, control), env, job, timeout_s)
        text = report.read_text(errors="replace") if report.exists() else ""
        if code is None:
            return PerfReport({}, f"perf stat did not finish within {timeout_s:g} s")
        if any(word in output for word in _PERMISSION):
            return PerfReport({}, PERMISSION_PROBLEM)
        refused = [line for line in output.splitlines() if line.startswith("opforge-ncu-target:")]
        if code != 0:
            why = refused[-1].removeprefix("opforge-ncu-target:").strip() if refused else \
                (output.strip().splitlines() or [f"exit status {code}"])[-1][:300]
            return PerfReport({}, f"perf stat's run failed: {why}")
        metrics, missing = parse_perf_csv(text, events)
        return PerfReport(metrics, None if metrics or missing else "perf stat wrote no counters",
                          (*unsupported, *missing))
    except OSError as exc:
        return PerfReport({}, f"perf stat could not be started: {exc}")
    finally:
        shutil.rmtree(job, ignore_errors=True)
