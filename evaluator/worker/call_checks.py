"""The worker's checks around each call, paid by both roles alike (the driver's clock compares their per-call
costs); only the candidate's worker is refused for what they find (`enforce`). Costlier ones (`refuse_reason`) run
after loading, after each correctness call and after each timing block.

The worker binds these functions by name when it is imported (`evaluator.worker.loop` and this module are both among the
modules `Guards.tampered` fingerprints), so a candidate that replaces one here changes nothing the worker calls, and
is refused at the next check."""

from __future__ import annotations

import os
from typing import Any

import torch

from evaluator.sandbox import process_tree
from evaluator.worker.guards import Guards
from evaluator.worker.private_builtins import BUILTINS

__builtins__ = BUILTINS  # type: ignore[assignment]  # the harness's own copy (private_builtins.py)

IDLE_MIN_WINDOW_S = 0.05   # idle windows shorter than this are not judged
IDLE_CPU_FLOOR_S = 0.05    # CPU a worker may use while idle (message handling), and
IDLE_CPU_SHARE = 0.25      # the share of the idle window it may use, whichever is larger


def after_call(guards: Guards, enforce: bool) -> None:
    """Right after a call, before the harness copies its outputs or uses a builtin: the builtins are the ones
    captured at load (a hook on `isinstance` that finishes work when the harness calls it, then removes itself,
    is still in place here), and the copy operators' kernels are unchanged. Both roles pay for the check (the
    driver's clock compares their per-call costs); only the candidate is refused."""
    builtin = guards.builtins_changed()
    changed = guards.copy_ops_changed()
    if enforce:
        if builtin and not guards.refusals:
            guards.refusals.append(f"the candidate replaced builtins.{builtin}, which the harness uses")
        if changed and not guards.refusals:
            guards.refusals.append(f"the candidate changed PyTorch's dispatcher ({changed}), which the "
                                   "harness's copies of its outputs go through")


def idle(guards: Guards, wall0_ns: int, cpu0_s: float) -> None:
    """Between commands the worker only waits for the driver (the reference is being run or timed): CPU spent
    then is work in threads the thread count does not see (a callback on PyTorch's inter-op pool), which could
    finish results late or slow the reference down. It is recorded, and refused at the next check."""
    wall_s = (guards.now_ns() - wall0_ns) / 1e9
    cpu_s = guards.cpu_s() - cpu0_s
    if wall_s >= IDLE_MIN_WINDOW_S and cpu_s > max(IDLE_CPU_FLOOR_S, IDLE_CPU_SHARE * wall_s):
        guards.refusals.append(f"the candidate's process used {cpu_s:.2f} s of CPU in {wall_s:.2f} s while "
                               "it had nothing to do (work running in the background)")


def per_call(guards: Guards, outputs: list[Any], inputs: list[Any],
             before: list[Any] | None) -> tuple[str | None, ...]:
    """Cheap per-call checks: threads left running, the outputs' structure, inputs left unchanged."""
    threads = threads_problem(guards)
    mutated = None
    exact, tensor = guards.exact_type, guards.tensor_type
    for i, (x, x0) in enumerate(zip(inputs, before or inputs)):
        if exact(x) is not tensor and isinstance(x, torch.Tensor):  # a swapped __class__ could lie to checks
            return threads, f"the candidate changed the type of input {i} to {exact(x).__name__}", None
        if before is not None and exact(x) is tensor and not same_bits(x, x0):
            mutated = f"the candidate modified input {i} (inputs must be left unchanged)"
            break
    return threads, guards.output_problem(outputs, inputs), mutated


def refuse_reason(guards: Guards, deep: bool = False) -> str | None:
    """The costlier checks, run after loading, after each correctness call and after each timing block; `deep`
    (after loading, timing blocks and batches) adds a comparison of PyTorch's whole dispatch table."""
    if guards.refusals:
        return guards.refusals[0]
    changed = guards.tampered()
    if changed:
        return f"the candidate replaced {changed}, which the harness relies on"
    dispatch = guards.dispatcher_changed(deep)
    if dispatch:
        return f"the candidate changed PyTorch's dispatcher ({dispatch}), which the harness's own calls go through"
    spawned = process_tree.live_children(os.getpid())
    if spawned:
        return f"the candidate started {len(spawned)} process(es) that are still running"
    return threads_problem(guards)


def threads_problem(guards: Guards) -> str | None:
    """More threads than the candidate may keep parked (`Guards.spare_threads`). This count is the worker's first
    line; the driver's, and its account of each thread's CPU while the worker waits, decide (`worker_cpu.py`)."""
    extra = guards.extra_threads()
    if extra <= guards.spare_threads:
        return None
    return (f"the candidate's process has {extra} more thread(s) after a call than before its first, where "
            f"{guards.spare_threads} may stay parked (a thread left running, or a native kernel that raised its own "
            "OpenMP thread count: both sides get the same threads)")


_no_torch_function = torch._C.DisableTorchFunction


_WORDS = (torch.int64, torch.int32, torch.int16)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Raw bytes compared with `__torch_function__` overrides off (callers check exact types first), as the widest
    integer words that tile both tensors' bytes: the same verdict as byte by byte, for a sixth of the time (a 32 MiB
    input: 6-12 ms as bytes, 1-2 ms as 8-byte words, in both workers after every correctness call)."""
    with _no_torch_function():
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.numel() == 0:
            return True
        x, y = a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)
        for word in _WORDS:
            size = word.itemsize
            if x.numel() % size == 0 and x.storage_offset() % size == 0 and y.storage_offset() % size == 0:
                x, y = x.view(word), y.view(word)
                break
        return bool(torch.equal(x, y))
