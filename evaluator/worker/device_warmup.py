"""One explicit step that brings a worker's device to its steady state before any snapshot or hook exists.

PyTorch and Triton fill module globals lazily on first use: `torch.cuda.device_count()` caches
`torch.cuda._cached_device_count` once CUDA is initialised (and `get_device_properties`/`get_device_capability` call
it), Triton's driver picks its active target and loads its launcher utilities (through ctypes) on the first launch,
and torch counts devices through NVML (ctypes again) before CUDA starts. Left to the candidate's first call, these
writes would read as the candidate replacing a watched global, and their ctypes events would meet the audit hook with
candidate code on the stack. So the worker runs `warm_up` right after it forks, before its guards, its audit hook
and its snapshots: every lazy global is then already set when the snapshot is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from evaluator.device.rules import rules

WarmStep = tuple[str, Callable[[], object]]


class DeviceWarmupError(RuntimeError):
    """A warm-up step failed: the device is unusable in this worker (reported as the task's or the machine's fault)."""


def _triton_target() -> object:
    from triton.runtime import driver
    active = driver.active
    target = active.get_current_target()
    active.get_current_stream(active.get_current_device())
    return target


def _triton_launcher_utils() -> object:
    from triton.runtime import driver
    return driver.active.utils  # compiles or loads Triton's launcher helpers (ctypes, a C module)


def _properties() -> object:
    index = torch.cuda.current_device()
    torch.cuda.get_device_capability(index)
    return torch.cuda.get_device_properties(index)


def _events() -> object:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def device_steps(kind: str) -> list[WarmStep]:
    """The steps for one device kind, in order. CPU: only the device count (it reads NVML where torch has CUDA)."""
    steps: list[WarmStep] = [("torch.cuda.device_count", torch.cuda.device_count)]
    if not rules(kind).cuda_runtime:
        return steps
    return steps + [
        ("torch.cuda.init", torch.cuda.init),
        ("torch.cuda.device_count after init", torch.cuda.device_count),  # caches _cached_device_count
        ("torch.cuda.get_device_properties", _properties),
        ("torch.cuda.current_stream", torch.cuda.current_stream),
        ("torch.cuda.Event", _events),
        ("triton's active target", _triton_target),
        ("triton's launcher utilities", _triton_launcher_utils),
        ("torch.cuda.synchronize", torch.cuda.synchronize),
    ]


def warm_up(kind: str, steps: Sequence[WarmStep] | None = None) -> list[str]:
    """Run every step (the device's own by default); returns their names. Idempotent: each step is a cached read
    the second time."""
    done = []
    for name, step in device_steps(kind) if steps is None else steps:
        try:
            step()
        except ImportError:
            if name.startswith("triton"):
                continue  # no Triton installed: nothing of it to warm
            raise
        except Exception as exc:
            raise DeviceWarmupError(f"warming up the {kind} device failed at {name}: {exc}") from exc
        done.append(name)
    return done
