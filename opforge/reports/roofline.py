"""The roofline bound of a task on the device a kernel ran on, and a kernel's fraction of it.

GPU devices get their bound from the datasheet table (`agents.device_facts`); native CPU kernels (`cpp`) from the
CPU's measured copy bandwidth and peak FLOP/s where the store keeps them (`Store.device_peaks`), else none: a CPU
bound is never guessed from a GPU's figures. Triton on a CPU is interpreted and timed on the task's INTERPRETER_SHAPE,
not the size its work was counted at: no bound.
"""

from __future__ import annotations

from typing import Any

from agents.cpu_facts import MeasuredRoofline
from agents.device_facts import facts_for
from evaluator.measure.task_work import TaskWork


def floor_ms(work: TaskWork | None, device: str, backend: str | None,
             cpu: MeasuredRoofline | None = None) -> float | None:
    """The least time one call can take (None where the task's work or the device's peaks are unknown)."""
    if work is None:
        return None
    on_cpu = device.lower().startswith("cpu")
    if on_cpu and backend in ("triton", "cuda"):
        return None
    if backend == "cpp" or on_cpu:
        if cpu is None:
            return None
        return work.roofline_ms(cpu.copy_bandwidth_gbps, cpu.peak_gflops and cpu.peak_gflops / 1e3)
    facts = facts_for(device, None)
    return work.roofline_ms(facts.memory_bandwidth_gbps, facts.peak_tflops)


def fraction(bound_ms: float | None, candidate_ms: float | None) -> float | None:
    """The bound's share of the measured time (1.0: at the roofline); None where either is unknown."""
    if bound_ms is None or not candidate_ms or candidate_ms <= 0:
        return None
    return bound_ms / candidate_ms


def task_work_of(task: Any) -> TaskWork | None:
    """A stored task's counted work, or None before it was counted."""
    if getattr(task, "flops", None) is None or getattr(task, "min_bytes", None) is None:
        return None
    return TaskWork(task.flops, task.min_bytes)
