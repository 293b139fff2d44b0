"""Nsight Compute feedback for the agents: a fixed set of named metrics for the candidate's own kernels.

Where a GPU and `ncu` exist, a one-off sandboxed process (`python -m evaluator.ncu_target JOB_DIR`) loads the task
and the candidate, calls the model once inside an NVTX range named `opforge`, and `ncu` (outside the sandbox) records
the metrics of the kernels launched inside that range only, so input generation and the L2 flush are not profiled.
The figures are advice for the judge, never part of a verdict.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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


def profile_with_ncu(task_source: str, task_name: str, candidate_source: str, init_seed: int, seed: int,
                     timeout_s: float, isolation: str) -> dict[str, float]:
    """Nsight Compute metrics of one call of the candidate; empty where ncu is missing or fails."""
    ncu = ncu_path()
    if ncu is None:
        return {}
    from evaluator.sandbox import PROJECT_ROOT, _bwrap_prefix, bwrap_available, scrubbed_environment
    job = Path(tempfile.mkdtemp(prefix="opforge-ncu-"))
    try:
        (job / "job.json").write_text(json.dumps({"task_source": task_source, "task_name": task_name,
                                                  "candidate_source": candidate_source, "init_seed": init_seed,
                                                  "seed": seed}))
        target = [sys.executable, "-m", "evaluator.ncu_target", str(job)]
        if isolation != "process" and bwrap_available():
            prefix = _bwrap_prefix("cuda")
            target = prefix[:-1] + ["--ro-bind", str(job), str(job), "--"] + target
        cmd = [ncu, "--csv", "--page", "raw", "--metrics", ",".join(NCU_METRICS), "--nvtx", "--nvtx-include",
               f"{NVTX_RANGE}/", "--target-processes", "all", "--log-file", str(job / "ncu.csv"), *target]
        env = scrubbed_environment()
        env["PYTHONPATH"] = str(PROJECT_ROOT)
        subprocess.run(cmd, env=env, cwd=job, timeout=timeout_s, capture_output=True)
        report = job / "ncu.csv"
        return parse_ncu_csv(report.read_text(errors="replace")) if report.exists() else {}
    except (OSError, subprocess.TimeoutExpired):
        return {}
    finally:
        shutil.rmtree(job, ignore_errors=True)
