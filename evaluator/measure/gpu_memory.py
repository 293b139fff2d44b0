"""GPU memory in a verdict: whose fault a reference failure is once the candidate has loaded, and the peak reported.

On a GPU the two workers share the device: a candidate that holds the device's memory (or leaves it in a bad state)
makes the trusted reference fail, which would otherwise read as a task error and stop the whole run. So the failing
command is replayed in a fresh reference worker, alone (the candidate's worker is gone by then): failing again, it is
the task's error; succeeding, it is the candidate's fault, a `runtime_error` verdict. The candidate's allocator is also
capped (`hardening.cap_gpu_memory`), which makes the first case rare.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluator.wire.commands import Command, Load, Run
from evaluator.config import EvalConfig
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.measure.blocks import fresh_seed
from evaluator.result import DeviceInfo, EvalResult, Status
from evaluator.task import Task, TaskError


def blame_reference_failure(connect: Callable[[], WorkerConnection], task: Task, cfg: EvalConfig, dev: DeviceInfo,
                            error: TaskError, load: Load, failed: Command | None) -> EvalResult:
    """Replay `failed` (the reference's last request; a plain run where it was not one) in a reference worker from
    `connect`, after `load`. Raises `error` when the reference fails alone too."""
    replay = failed if isinstance(failed, Run) else Run(variant=0, seed=fresh_seed())
    conn = connect()
    try:
        conn.request(load, cfg.compile_timeout_s, "loading the task alone")
        conn.request(replay, cfg.compile_timeout_s, "replaying the failed call alone")
    except (TaskError, Refused):
        raise error from None
    finally:
        conn.close()
    reason = str(error).removeprefix(f"{task.label}: ")
    return EvalResult(Status.RUNTIME_ERROR, "the reference failed while the candidate was loaded and succeeds alone "
                                            f"(the candidate holds the device's memory or state?): {reason}",
                      device=dev)


def steady_peak(peaks: list[tuple[Any, Any]]) -> tuple[int | None, int | None]:
    """Peak memory of a steady call, (candidate, reference): the largest of the plain trials after the first (the
    first call also holds Triton's JIT, autotuning buffers and cuBLAS's workspace); the first where it is the only."""
    steady = peaks[1:] or peaks
    def largest(values: list[Any]) -> int | None:
        known = [int(v) for v in values if v is not None]
        return max(known) if known else None
    return largest([c for c, _ in steady]), largest([r for _, r in steady])
