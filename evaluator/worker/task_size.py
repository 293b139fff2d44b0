"""Whether a task fits this machine, decided before any of it runs at its size.

A KernelBench task at its own size can need more memory than the machine has (level 1's `19_ReLU.py` draws a
4096x393216 input: 6 GiB a tensor), and an evaluation holds every call's inputs and weights several times over: in
the reference's worker, in the candidate's, in the driver's copies of outputs and in the shared input file. Such a
task used to grow the reference's process until the kernel's OOM killer ended it, 44 s in, with a verdict that
said only that the reference died.

The reference's worker sizes each shape variant on PyTorch's meta device when it loads the task (`measure_on_meta`:
the task's own `get_inputs` and `Model` with no memory behind the tensors), the first time an evaluator sees the task
(the meta device's first operations cost a fresh worker 0.4-2 s of imports), and the driver refuses a task whose
largest variant would need more than the machine has available, or more than a worker's address-space cap, in one
sentence (`refusal`), before the first trial draws anything. `opforge task check` prints the same figure. Where the
meta device cannot run the task (data-dependent shapes, an explicit device), the size is unknown and nothing is
refused here: the workers' memory caps still hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 2**30
# An evaluation holds a call's inputs and weights about this many times: the reference's worker and the candidate's
# (each with a trial's inputs, outputs and the probes' temporaries), the shared input file and the driver's copies.
HELD_COPIES = 4


@dataclass(frozen=True, slots=True)
class TaskSize:
    """One shape variant's bytes: its inputs for one call and its model's parameters and buffers."""

    input_bytes: int
    weight_bytes: int

    @property
    def call_bytes(self) -> int:
        return self.input_bytes + self.weight_bytes

    def to_wire(self) -> dict[str, int]:
        return {"input_bytes": self.input_bytes, "weight_bytes": self.weight_bytes}

    @classmethod
    def from_wire(cls, raw: object) -> TaskSize | None:
        if not isinstance(raw, dict):
            return None
        inputs, weights = raw.get("input_bytes"), raw.get("weight_bytes")
        if not isinstance(inputs, int) or not isinstance(weights, int) or inputs < 0 or weights < 0:
            return None
        return cls(inputs, weights)


def tensor_bytes(values: Any) -> int:
    import torch
    total = 0
    for v in values:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
    return total


def measure_on_meta(source: str, name: str, variants: int) -> list[TaskSize] | None:
    """Every variant's size, from the task run on the meta device (the reference's worker, at load); None where the
    meta device cannot run it."""
    import torch

    from evaluator.worker.task_runtime import TaskRuntime
    try:
        rt = TaskRuntime(source, name, "meta")
        sizes = []
        for v in range(min(variants, len(rt.variants))):
            inputs = rt.inputs(v, 0)
            with torch.device("meta"):
                model = rt.module.Model(*rt.init_inputs(v))
            weights = tensor_bytes([*model.parameters(), *model.buffers()])
            sizes.append(TaskSize(tensor_bytes(inputs), weights))
        return sizes
    except Exception:  # noqa: BLE001 - a task the meta device cannot run: its size is unknown, not wrong
        return None


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The memory the kernel says is available for new work (MemAvailable), or None where it does not say."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def refusal(label: str, sizes: list[TaskSize], available: int | None, limit_bytes: int) -> str | None:
    """One sentence where the task's largest variant does not fit, else None. `limit_bytes`: a worker's address-space
    cap (0: none)."""
    if not sizes:
        return None
    worst = max(sizes, key=lambda s: s.call_bytes)
    needed = HELD_COPIES * worst.call_bytes
    what = (f"{worst.input_bytes / GIB:.1f} GiB of inputs and {worst.weight_bytes / GIB:.1f} GiB of weights a "
            "call")
    smaller = "run it at a smaller size with --set NAME=VALUE on its module-level sizes (the store records them)"
    if limit_bytes and worst.call_bytes > limit_bytes:
        return (f"{label}: {what}, more than a worker's {limit_bytes / GIB:.0f} GiB address-space cap; "
                f"{smaller}")
    if available is not None and needed > available:
        return (f"{label}: needs about {needed / GIB:.1f} GiB ({what}, held about {HELD_COPIES} times over by an "
                f"evaluation), and this machine has {available / GIB:.1f} GiB available; {smaller}")
    return None
