"""The parts of scripts/gpu_proof.py that check issue 15's claims on a real device (split off by part):

- warmup: after the device warm-up, a first Triton launch changes no global the guards watch (finding 1);
- calibration: the timer's empty call, a tiny kernel by our timer and by `triton.testing.do_bench`, and the work a
  side-stream launch leaves running past a call (findings 2 and 11);
- cap: a candidate that allocates more than its share of GPU memory fails alone, as the candidate's fault (finding 5);
- lock: two evaluations in parallel never time at once on one device (finding 8).

Each part runs on `--device cpu` too (the test suite's dry run), where its figures prove nothing about a GPU.
"""

from __future__ import annotations

import importlib.util
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from evaluator import Candidate, EvalConfig, Status
from evaluator.driver.evaluate import LocalEvaluator
from evaluator.task import task_from_source

RELU_TASK = """import torch
import torch.nn as nn
N = {n}
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""

RELU_KERNEL = """import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, tl.maximum(tl.load(x + offs, mask=mask), 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        {hog}
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""
# Grabs 60% of the device's memory on its first call (more than the candidate's 45% share).
HOG = ("if x.is_cuda and not hasattr(self, 'hog'):\n"
       "            self.hog = torch.empty(int(torch.cuda.get_device_properties(0).total_memory * 0.6), "
       "dtype=torch.uint8, device=x.device)")


def part_warmup(ctx: Any) -> dict[str, Any]:
    import torch

    from evaluator.worker import device_warmup
    from evaluator.worker.guards import Guards
    steps = device_warmup.warm_up(ctx.device)
    guards = Guards()
    guards.take_snapshot()
    # From a file: Triton's compiler (as of 3.6) reads a kernel's source through `inspect`, which an exec'd string
    # does not have; the interpreter does not, so only the GPU run found this.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "warmup_relu.py"
        path.write_text(RELU_KERNEL.format(hog="pass"))
        spec = importlib.util.spec_from_file_location("warmup_relu", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        x = torch.randn(4096, device=ctx.device)
        ok = torch.equal(module.ModelNew()(x), torch.relu(x))
    out = {"steps": len(steps), "first_launch_correct": ok, "tampered_after_first_launch": guards.tampered()}
    out["ok"] = ok and out["tampered_after_first_launch"] is None
    ctx.table("warmup", ["figure", "value"], [[k, str(v)] for k, v in out.items()])
    return out


def part_calibration(ctx: Any) -> dict[str, Any]:
    import torch

    from evaluator.worker.timing import CallTimer
    device = torch.device(ctx.device)
    timer = CallTimer(device)
    overhead = timer.calibrate()
    x = torch.randn(1 << 16, device=device)
    y = torch.empty_like(x)
    def tiny() -> None:
        torch.relu_(y.copy_(x))
    ours = statistics.median(timer.time_call(tiny, [])[0] for _ in range(200))
    bench = None
    if ctx.device == "cuda":
        from triton.testing import do_bench
        bench = do_bench(tiny, warmup=25, rep=100, return_mode="median")
    left = None
    if ctx.device == "cuda":
        side = torch.cuda.Stream()

        def side_stream_call() -> None:
            with torch.cuda.stream(side):
                for _ in range(50):
                    tiny()
        timer.time_call(side_stream_call, [])
        left = timer.left_running_ms
    out = {"empty_call_ms": overhead, "settle_overhead_ms": timer.settle_overhead_ms, "tiny_kernel_opforge_ms": ours,
           "tiny_kernel_do_bench_ms": bench, "ratio": (ours / bench) if bench else None,
           "side_stream_left_running_ms": left}
    ctx.table("calibration", ["figure", "value"], [[k, str(v)] for k, v in out.items()])
    return out


def part_cap(ctx: Any) -> dict[str, Any]:
    # On CPU (the test suite's dry run) the hog never allocates and only the path is exercised: 4096 elements, four
    # interpreted programs a call in place of 1024 (25 s of the dry run's 75 s on the 2-core VM).
    n = 1 << 20 if ctx.device == "cuda" else 1 << 12
    task = task_from_source(RELU_TASK.format(n=n), "relu_cap")
    hog = Candidate.from_source(RELU_KERNEL.format(hog=HOG))
    honest = Candidate.from_source(RELU_KERNEL.format(hog="pass"))
    cfg: EvalConfig = ctx.cfg(profile=False)
    hogged, plain = ctx.evaluator.evaluate(task, hog, cfg), ctx.evaluator.evaluate(task, honest, cfg)
    out = {"hog_status": str(hogged.status), "hog_reason": hogged.reason[:200], "honest_status": str(plain.status),
           "ok": plain.status == Status.OK and (ctx.device == "cpu" or hogged.status != Status.OK)}
    ctx.table("cap", ["figure", "value"], [[k, str(v)] for k, v in out.items()])
    return out


def part_lock(ctx: Any) -> dict[str, Any]:
    events: list[tuple[float, str, str]] = []
    guard = threading.Lock()

    def observe(event: str, key: str, what: str) -> None:
        with guard:
            events.append((time.monotonic(), event, what))

    task = task_from_source(RELU_TASK.format(n=1 << 16), "relu_lock")
    candidate = Candidate.from_source(RELU_KERNEL.format(hog="pass"))
    with tempfile.TemporaryDirectory() as locks:
        evaluator = LocalEvaluator(lock_dir=Path(locks), phase_observer=observe)
        results: list[Any] = []
        threads = [threading.Thread(target=lambda: results.append(evaluator.evaluate(task, candidate,
                                                                                     ctx.cfg(profile=False))))
                   for _ in range(2)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            evaluator.close()
    depth = most = 0
    for _, event, _ in events:
        depth += 1 if event == "start" else -1
        most = max(most, depth)
    out = {"evaluations": len(results), "statuses": sorted(str(r.status) for r in results),
           "timed_phases": sum(1 for e in events if e[1] == "start"), "most_at_once": most, "ok": most <= 1}
    ctx.table("lock", ["figure", "value"], [[k, str(v)] for k, v in out.items()])
    return out


RUNNERS = {"warmup": part_warmup, "calibration": part_calibration, "cap": part_cap, "lock": part_lock}
