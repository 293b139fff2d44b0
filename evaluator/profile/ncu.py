"""Nsight Compute feedback for the agents: a fixed set of named metrics for the candidate's own kernels.

Where a GPU and `ncu` exist, a one-off sandboxed process (`python -m evaluator.profile.ncu_target JOB_DIR`, hardened as a
candidate worker) loads the task and the candidate, calls the model once inside an NVTX range named `opforge`, and
`ncu` (outside the sandbox) records the metrics of the kernels launched inside that range only, so input generation
and the L2 flush are not profiled. ncu runs inside the device's timed phase (device_lock.py), in a session of its own
killed whole once it is done or late; a failure is reported as one sentence (`NcuReport.problem`).
The figures are advice for the judge, never part of a verdict.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.device.rules import rules
from evaluator.sandbox import process_tree

NCU_METRICS = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
)
NVTX_RANGE = "opforge"


def ncu_path() -> str | None:
    return shutil.which("ncu")


def parse_ncu_csv(text: str) -> dict[str, float]:
    """Aggregate `ncu --csv --page raw` rows: time summed, other metrics weighted by each kernel's duration."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    if len(lines) < 2:
        return {}
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = rows[0], rows[1:]
    if body and body[0] and body[0][0] == "":  # the units row
        body = body[1:]
    wanted = [m for m in NCU_METRICS if m in header]
    if "gpu__time_duration.sum" not in wanted:
        return {}
    kernels: list[dict[str, float]] = []
    for row in body:
        values: dict[str, float] = {}
        for metric in wanted:
            raw = row[header.index(metric)].replace(",", "") if header.index(metric) < len(row) else ""
            try:
                values[metric] = float(raw)
            except ValueError:
                continue
        if "gpu__time_duration.sum" in values:
            kernels.append(values)
    if not kernels:
        return {}
    total = sum(k["gpu__time_duration.sum"] for k in kernels)
    out = {"ncu.kernels": float(len(kernels)), "ncu.gpu__time_duration.sum": total}
    for metric in wanted:
        if metric == "gpu__time_duration.sum":
            continue
        pairs = [(k[metric], k["gpu__time_duration.sum"]) for k in kernels if metric in k]
        weight = sum(w for _, w in pairs)
        if pairs:
            out[f"ncu.{metric}"] = sum(v * w for v, w in pairs) / weight if weight > 0 else pairs[0][0]
    return out


PERMISSION_ERROR = "ERR_NVGPUCTRPERM"


@dataclass(frozen=True, slots=True)
class NcuReport:
    metrics: dict[str, float]
    problem: str | None = None          # one sentence where ncu could not profile (reported, never swallowed)
    dropped: tuple[str, ...] = ()       # metric names this ncu does not know, left out of a second run


def ncu_command(ncu: str, target: list[str], log_file: str, metrics: Sequence[str]) -> list[str]:
    """ncu's command line. `--clock-control none`: the GPU runs at the clocks the timings ran at (ncu locks them to
    base clocks by default); `--print-units base`: durations in nanoseconds whatever their size; metrics of the
    kernels inside the NVTX range only; every child process of the target followed."""
    return [ncu, "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
            "--metrics", ",".join(metrics), "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",
            "--target-processes", "all", "--log-file", log_file, *target]


def unknown_metrics(output: str, metrics: Sequence[str]) -> list[str]:
    """The metric names that ncu's error lines mention (a metric this ncu or this GPU does not know)."""
    errors = [line for line in output.splitlines() if "==ERROR==" in line]
    return [m for m in metrics if any(m in line for line in errors)]


def run_in_session(cmd: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> tuple[int | None, str]:
    """Run ncu in a session of its own; on timeout, or once it is done, its whole process group is killed (the
    profiled process and anything it left behind)."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        out, code = b"", None
    finally:
        process_tree.kill_tree(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    return code, out.decode(errors="replace")[-20000:]


def profile_with_ncu(task_source: str, task_name: str, candidate_source: str, init_seed: int, seed: int,
                     timeout_s: float, isolation: str, device: str = "cuda",
                     build_cache: Any = None, gpu_memory_fraction: float = 0.0, build_answer: Any = None) -> NcuReport:
    """Nsight Compute metrics of one call of the candidate. Empty metrics with no problem where ncu is missing;
    with a one-sentence problem where it failed (permissions, timeout, the target refused or crashed). The target's
    CUDA builds come from `build_cache` (the evaluation's), or from `build_answer` where given."""
    ncu = ncu_path()
    if ncu is None:
        return NcuReport({})
    from evaluator.profile.ncu_builds import FileBuildServer
    from evaluator.sandbox.bwrap import bwrap_available, bwrap_prefix
    from evaluator.sandbox.zygote_env import PROJECT_ROOT, scrubbed_environment
    job = Path(tempfile.mkdtemp(prefix="opforge-ncu-"))
    try:
        (job / "job.json").write_text(json.dumps({
            "task_source": task_source, "task_name": task_name, "candidate_source": candidate_source,
            "init_seed": init_seed, "seed": seed, "device": device, "cpu_limit_s": int(timeout_s) + 60,
            "gpu_memory_fraction": gpu_memory_fraction, "build_timeout_s": timeout_s}))
        target = [sys.executable, "-m", "evaluator.profile.ncu_target", str(job)]
        if isolation != "process" and bwrap_available():
            prefix = bwrap_prefix(device)
            target = prefix[:-1] + ["--bind", str(job), str(job), "--"] + target
        env = scrubbed_environment()
        env["PYTHONPATH"] = str(PROJECT_ROOT)
        if rules(device).triton_interpreted:
            env["TRITON_INTERPRET"] = "1"
        metrics, dropped = list(NCU_METRICS), list[str]()
        if build_answer is None:
            from evaluator.build.stage import BuildServer, build_mode
            build_answer = BuildServer(build_cache, build_mode(device), isolation, "profile").answer
        for _ in range(2):
            report = job / "ncu.csv"
            report.unlink(missing_ok=True)
            with FileBuildServer(job, build_answer, timeout_s):
                code, output = run_in_session(ncu_command(ncu, target, str(report), metrics), env, job, timeout_s)
            text = report.read_text(errors="replace") if report.exists() else ""
            if code is None:
                return NcuReport({}, f"Nsight Compute did not finish within {timeout_s:g} s", tuple(dropped))
            if PERMISSION_ERROR in output + text:
                return NcuReport({}, "Nsight Compute may not read the GPU's performance counters "
                                     f"({PERMISSION_ERROR}): allow them for this user (NVreg_RestrictProfilingToAdminUsers=0) "
                                     "or run as an administrator", tuple(dropped))
            unknown = unknown_metrics(output + text, metrics)
            if unknown and len(unknown) < len(metrics):
                dropped += unknown
                metrics = [m for m in metrics if m not in unknown]
                continue
            refused = [line for line in output.splitlines() if line.startswith("opforge-ncu-target:")]
            if code != 0 and not text.strip():
                why = refused[-1].removeprefix("opforge-ncu-target:").strip() if refused else f"exit status {code}"
                return NcuReport({}, f"Nsight Compute's run failed: {why}", tuple(dropped))
            return NcuReport(parse_ncu_csv(text), None if code == 0 else
                             (refused[-1].removeprefix("opforge-ncu-target:").strip() if refused else
                              f"Nsight Compute exited with status {code}"), tuple(dropped))
        return NcuReport({}, "Nsight Compute does not know the metrics asked for", tuple(dropped))
    except OSError as exc:
        return NcuReport({}, f"Nsight Compute could not be started: {exc}")
    finally:
        shutil.rmtree(job, ignore_errors=True)
