"""The one hardening step of every process that runs candidate code: the candidate worker forked by the zygote and
the process Nsight Compute profiles (`ncu_target.py`) go through the same function, in the same order.

Order matters: the network namespace needs a single-threaded process (before CUDA starts threads); the device is
warmed up before any guard or snapshot exists (`device_warmup.py`); the audit hook comes last, since nothing after it
may need frames.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from evaluator.device.rules import rules
from evaluator.worker import build_redirect
from evaluator.worker import call_watch
from evaluator.worker import collector_guard
from evaluator.worker import device_warmup
from evaluator.worker import interpreter_gaps
from evaluator.sandbox import landlock
from evaluator.sandbox import process_tree
from evaluator.sandbox import read_view
from evaluator.sandbox import syscall_filter
from evaluator.worker.guards import Guards

GPU_MEMORY_FRACTION = 0.45  # of the device's memory, for the candidate's allocator: the reference keeps the rest


class ForkSafetyError(RuntimeError):
    """A process that forks workers initialised CUDA: a forked child cannot use it."""


@dataclass(frozen=True, slots=True)
class Limits:
    memory_bytes: int = 0              # address space (host memory); 0: none (GPU workers map far more than they use)
    cpu_s: int = 0                     # CPU time
    gpu_memory_fraction: float = 0.0   # the caching allocator's cap on the device; 0: none


def assert_fork_safe() -> None:
    """A zygote must never have started CUDA: its forked workers would inherit a dead context. Checked in the zygote
    (torch initialised CUDA) and again in each forked worker, where torch marks a "bad fork" when the parent called
    CUDA's runtime at all, even only to count devices (`torch.cuda.is_available()` without the NVML-based check,
    which `zygote_env.zygote_environment` sets): found on the first run on a GPU, where every worker died at its
    device warm-up."""
    import torch
    if torch.cuda._is_in_bad_fork():
        raise ForkSafetyError("this worker's zygote called CUDA's runtime before forking (for example "
                              "torch.cuda.is_available() without PYTORCH_NVML_BASED_CUDA_CHECK=1); a forked "
                              "worker cannot use CUDA then")
    if torch.cuda.is_initialized():
        raise ForkSafetyError("CUDA was initialised in a process that forks evaluation workers")


def set_limits(memory_bytes: int, cpu_s: int) -> None:
    def lower(which: int, value: int) -> None:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    if memory_bytes > 0:
        lower(resource.RLIMIT_AS, memory_bytes)
    if cpu_s > 0:
        lower(resource.RLIMIT_CPU, cpu_s)
    lower(resource.RLIMIT_CORE, 0)
    lower(resource.RLIMIT_FSIZE, 4 * 2**30)


def cap_gpu_memory(fraction: float) -> bool:
    """Cap the caching allocator of the current device; False where there is no device or no cap."""
    import torch
    if fraction <= 0 or not torch.cuda.is_available():
        return False
    torch.cuda.set_per_process_memory_fraction(min(fraction, 1.0), torch.cuda.current_device())
    return True


def harden(device: str, role: str, guards: Guards, limits: Limits, candidate_module: str,
           writable: tuple[str, ...] = ()) -> None:
    """Warm the device, then (candidate role) isolate, drop privileges, limit, and arm the guards and audit hook.
    Both roles warm the device and install launch counters, so both pay the same per-call costs."""
    if role == "candidate":
        process_tree.set_undumpable(dumpable=True)  # for a moment, so it can map its own user namespace
        process_tree.isolate_network()  # already so inside bubblewrap; the process sandbox needs it here
        # Native code can open /proc/<pid>/mem: no worker may read or write another's memory (a concurrent
        # candidate's results) or its zygote's (the nonces of every worker it spawned), nor be read by them.
        process_tree.set_undumpable()
        process_tree.drop_capabilities()
        # Every process it starts stays its descendant, inside the counts of its threads, children and CPU (no
        # clone(CLONE_PARENT) making a sibling of it), and it signals, re-prioritises, pins or limits no other
        # process, visible without bubblewrap's PID namespace (syscall_filter.py).
        if not syscall_filter.install():  # a machine whose syscall numbers it lacks, or a kernel that refuses
            guards.notes.add("the worker's syscall filter could not be installed here: a process it starts could "
                             "leave its tree, and without bubblewrap it could signal the reference's worker")
        if rules(device).file_sandbox:
            # writes only below the private working directory (and `writable`), bwrap or not; reads only of the
            # system, the Python installation and the evaluator package (read_view.py)
            problem = landlock.restrict((os.getcwd(), *writable), readable=read_view.worker_reads())
            if problem is not None:
                guards.notes.add(f"the worker's file sandbox could not be set up here ({problem}): without "
                                 "bubblewrap it reads and writes whatever its user may")
    device_warmup.warm_up(device)
    if role == "candidate" and not syscall_filter.install(processes=False, reach=True, handlers=True):
        # after the warm-up: the CUDA driver may open a Unix socket of its own while it starts (MPS, persistenced)
        guards.notes.add("the worker's socket and IPC filter could not be installed here: without bubblewrap it "
                         "could reach local services through their Unix sockets")
    guards.install_launch_counters(cuda_available=rules(device).cuda_runtime)
    build_redirect.install(guards, cuda_available=rules(device).cuda_runtime)
    call_watch.install_thread_counter(guards.thread_starts)
    call_watch.install_host_export_counter(guards.host_exports)
    interpreter_gaps.install(guards.notes)  # under the CPU interpreter: autotune runs one config
    if role != "candidate":
        return
    set_limits(limits.memory_bytes, limits.cpu_s)
    if rules(device).gpu_memory_share:
        cap_gpu_memory(limits.gpu_memory_fraction)
    guards.install_dispatch_guard()
    problem = collector_guard.forbid_saving()  # before the hook: it writes through ctypes
    if problem is not None:
        guards.refusals.append(problem)  # every candidate refused rather than run with gc.garbage open
    guards.install_audit_hook(candidate_module)  # last: nothing after it needs frames
