"""The PyTorch profiler's table for one call, and the launch counts: the agents' feedback where Nsight Compute is
not available (the worker's `profile` command)."""

from __future__ import annotations

from typing import Any

from evaluator.worker.timing import CallTimer


def profile_table(model: Any, inputs: list[Any], timer: CallTimer, launches: dict[str, int]) -> dict[str, float]:
    """Self time of the 12 costliest events of one call (device time on a GPU), and launches per kind and kernel.

    The Kineto profiler that `torch.profiler.profile` sets up for itself (CPU, and the device's activity on a GPU),
    entered directly: `torch.profiler.profile`'s own start asks `hasattr(torch, "_inductor")`, which imports Inductor
    and with it `torch._dynamo` (0.8 s), which a candidate's worker forked without it refuses (`zygote.py`)."""
    from torch.autograd.profiler import profile
    with profile(use_cpu=True, use_device="cuda" if timer.cuda else None, use_kineto=True) as prof:
        model(*inputs)
        timer.sync()
    metrics: dict[str, float] = {}
    events = sorted(prof.key_averages(), key=lambda e: -_self_time_us(e, timer.cuda))[:12]
    for e in events:
        metrics[f"{e.key} self_{'cuda' if timer.cuda else 'cpu'}_us"] = round(_self_time_us(e, timer.cuda), 3)
    for label, n in launches.items():  # per kind (triton, extension) and per kernel
        kind = label.split(":", 1)[0]
        metrics[f"launches.{kind}"] = metrics.get(f"launches.{kind}", 0.0) + n
        metrics[f"launches.{label}"] = float(n)
    return metrics


def _self_time_us(event: Any, cuda: bool) -> float:
    if cuda:
        return float(getattr(event, "self_device_time_total", 0.0) or getattr(event, "self_cuda_time_total", 0.0))
    return float(event.self_cpu_time_total)
