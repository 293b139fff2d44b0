"""The process Nsight Compute profiles: one call of the candidate inside the NVTX range `opforge` (see ncu.py).

Run as: python -m evaluator.ncu_target JOB_DIR   (JOB_DIR/job.json holds the task, the candidate and the seeds)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch


class _Quiet:
    """A channel that only keeps the worker's last reply."""

    def __init__(self) -> None:
        self.last: dict[str, Any] = {}

    def send(self, header: dict[str, Any], tensors: Any = None) -> None:
        self.last = header


def main() -> None:
    job = json.loads((Path(sys.argv[1]) / "job.json").read_text())
    os.chdir(tempfile.mkdtemp(prefix="opforge-ncu-target-"))
    from evaluator.guards import Guards
    from evaluator.ncu import NVTX_RANGE
    from evaluator.worker import Worker

    guards = Guards()
    guards.install_launch_counters(cuda_available=True)
    channel = _Quiet()
    worker = Worker(channel, "candidate", guards)  # type: ignore[arg-type]
    worker.cmd_load({"task_source": job["task_source"], "task_name": job["task_name"], "device": "cuda",
                     "init_seeds": [job["init_seed"]], "candidate_source": job["candidate_source"]})
    if channel.last.get("status") != "ready":
        raise SystemExit(1)
    model = worker._model(0)
    assert worker.rt is not None
    inputs = worker.rt.inputs(0, int(job["seed"]))
    with torch.no_grad():
        model(*inputs)  # compile and warm outside the profiled range
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main()
