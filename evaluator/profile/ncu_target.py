"""The process a profiler runs: one call of the candidate inside the NVTX range `opforge` for Nsight Compute (see
ncu.py), or between `enable` and `disable` written to `perf stat`'s control FIFO (job `perf_control`, perf_stat.py),
so that only that call is counted.

It is hardened exactly as a candidate worker (`hardening.harden`: device warm-up, network namespace, no capabilities,
limits, the GPU memory cap, the dispatch guard, the audit hook), and its load_inline builds come from the driver's
build cache (`ncu_builds.py`). Exit status: 0 profiled, 3 refused (the reason on stderr), 1 the candidate did not load.

Run as: python -m evaluator.profile.ncu_target JOB_DIR   (JOB_DIR/job.json holds the task, the candidate and the seeds)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch


class PerfControl:
    """`perf stat --control fifo:CTL,ACK`'s other end: each command is written to CTL and acknowledged on ACK."""

    def __init__(self, job_dir: Path, names: list[str]) -> None:
        self.ctl = os.open(job_dir / names[0], os.O_WRONLY)
        self.ack = os.open(job_dir / names[1], os.O_RDONLY)

    def command(self, word: str) -> None:
        os.write(self.ctl, word.encode() + b"\n")
        os.read(self.ack, 16)  # "ack\n" once perf has switched the counters


def main() -> None:
    job_dir = Path(sys.argv[1])
    job = json.loads((job_dir / "job.json").read_text())
    device = str(job.get("device", "cuda"))
    work = tempfile.mkdtemp(prefix="opforge-ncu-target-")
    os.chdir(work)
    for var in ("TMPDIR", "HOME"):  # as in a zygote's worker: caches and temporary files stay where it may write
        os.environ[var] = work
    os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "triton-cache")
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(work, "torch-extensions")
    tempfile.tempdir = work
    perf = PerfControl(job_dir, job["perf_control"]) if job.get("perf_control") else None  # before the audit hook
    from evaluator.device.rules import rules
    from evaluator.wire.commands import Load
    from evaluator.worker.guards import Guards
    from evaluator.worker.hardening import Limits, assert_fork_safe, harden
    from evaluator.profile.ncu import NVTX_RANGE
    from evaluator.profile.ncu_builds import FileChannel
    from evaluator.result import Status
    from evaluator.worker.loop import CANDIDATE_MODULE, Worker
    from evaluator.wire.replies import Failed, MalformedReply, Ready, TaskFailed, parse, status_of

    import torch._dynamo  # noqa: F401 - it rewraps torch.manual_seed when imported: before any guard, as in a zygote
    assert_fork_safe()
    guards = Guards()
    harden(device, "candidate", guards, Limits(cpu_s=int(job.get("cpu_limit_s", 0)),
                                               gpu_memory_fraction=float(job.get("gpu_memory_fraction", 0.0))),
           CANDIDATE_MODULE, writable=(str(job_dir),))  # its build requests go through files there
    channel = FileChannel(job_dir, float(job.get("build_timeout_s", 300)))
    worker = Worker(channel, "candidate", guards)  # type: ignore[arg-type]
    worker.cmd_load(Load(task_source=job["task_source"], task_name=job["task_name"], device=device,
                         init_seeds=(int(job["init_seed"]),) * 64,  # one per shape variant, as the driver sends
                         candidate_source=job["candidate_source"], builds=True, build_mode="link"))
    try:
        last = parse(json.loads(json.dumps(channel.last)))  # as a driver's channel would have read it
    except (MalformedReply, TypeError) as exc:
        print(f"opforge-ncu-target: a malformed reply: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    if not isinstance(last, Ready):
        reason = last.reason if isinstance(last, (Failed, TaskFailed)) else ""
        print(f"opforge-ncu-target: {status_of(last)}: {reason}", file=sys.stderr)
        raise SystemExit(3 if isinstance(last, Failed) and last.status == Status.REJECTED else 1)
    model = worker._model(0)
    assert worker.rt is not None and worker.timer is not None
    timer = worker.timer
    inputs = worker.rt.inputs(0, int(job["seed"]))
    cuda = rules(device).profiler == "ncu"  # the NVTX range and the device's synchronisation
    with torch.no_grad():
        model(*inputs)  # compile and warm outside the profiled range
        timer.sync()
        if cuda:
            torch.cuda.nvtx.range_push(NVTX_RANGE)
        if perf is not None:
            perf.command("enable")
        model(*inputs)
        timer.sync()
        if perf is not None:
            perf.command("disable")
        if cuda:
            torch.cuda.nvtx.range_pop()
    problem = worker._refuse_reason()
    if problem:
        print(f"opforge-ncu-target: rejected: {problem}", file=sys.stderr)
        raise SystemExit(3)


if __name__ == "__main__":
    main()
