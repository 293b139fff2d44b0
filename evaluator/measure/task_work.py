"""The least work one call of a task's reference does: FLOPs (PyTorch's own flop counter) and bytes that must move
(inputs, outputs and weights, each once). It bounds how fast any kernel can be on a device
(`roofline_ms`): the leaderboard floors every measured time there, so one impossible time cannot inflate a mean.
The same pass records the compute ops the reference runs (its structural signature: the archive finds related
tasks by it).

Counted on PyTorch's meta device (shapes only: instant even for big tasks), in a trusted child process, since the
task is code; a task the meta device cannot run (one that reads values) is counted on the CPU. FLOPs cover the ops
PyTorch's counter knows (matmuls, convolutions, attention); elementwise work counts as zero, so the bound is a floor.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

from evaluator.task import Task

TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True)
class TaskWork:
    flops: float
    min_bytes: int
    ops: tuple[str, ...] = ()  # the reference's compute ops (ATen names), sorted, each once
    inputs: tuple[dict, ...] = ()   # shapes and dtypes of the benchmark shape's inputs ({"shape", "dtype"})
    outputs: tuple[dict, ...] = ()

    def roofline_ms(self, bandwidth_gbps: float | None, peak_tflops: float | None) -> float | None:
        """The least time one call can take on a device with these peaks; None where neither is known."""
        bounds = []
        if bandwidth_gbps:
            bounds.append(self.min_bytes / (bandwidth_gbps * 1e9) * 1e3)
        if peak_tflops:
            bounds.append(self.flops / (peak_tflops * 1e12) * 1e3)
        return max(bounds) if bounds else None


def task_work(task: Task, timeout_s: float = TIMEOUT_S) -> TaskWork | None:
    """The task's work, counted in a child process; None when the task cannot be run to count it."""
    try:
        proc = subprocess.run([sys.executable, "-m", "evaluator.measure.task_work", task.name], input=task.source,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    return TaskWork(float(data["flops"]), int(data["min_bytes"]), tuple(data.get("ops", ())),
                    tuple(data.get("inputs", ())), tuple(data.get("outputs", ())))


def _count(source: str, name: str, device: str) -> TaskWork:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from evaluator.worker.op_trace import OpTrace
    from evaluator.worker.task_runtime import TaskRuntime, as_outputs, describe

    runtime = TaskRuntime(source, name, device)
    model = runtime.reference_model(0, 0)
    inputs = runtime.inputs(0, 0)
    counter, trace = FlopCounterMode(display=False), OpTrace()
    with torch.no_grad(), counter, trace:
        outputs = as_outputs(model(*inputs))
    tensors = [t for t in (*inputs, *outputs, *model.parameters(), *model.buffers()) if isinstance(t, torch.Tensor)]
    return TaskWork(float(counter.get_total_flops()), sum(t.numel() * t.element_size() for t in tensors),
                    tuple(sorted(trace.ops)), tuple(describe(inputs)), tuple(describe(outputs)))


def main() -> None:
    source = sys.stdin.read()
    name = sys.argv[1] if len(sys.argv) > 1 else "task"
    try:
        work = _count(source, name, "meta")
    except Exception:  # noqa: BLE001 - the meta device cannot run every task; the CPU can
        work = _count(source, name, "cpu")
    print(json.dumps({"flops": work.flops, "min_bytes": work.min_bytes, "ops": list(work.ops),
                      "inputs": list(work.inputs), "outputs": list(work.outputs)}))


if __name__ == "__main__":
    main()
