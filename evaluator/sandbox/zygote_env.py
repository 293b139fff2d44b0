"""The environment a zygote starts with, and the project's root (on its PYTHONPATH): the driver's launcher
(`sandbox/launch.py`), the reference's forked zygote (`forked_zygote.py`), the profilers' targets and the builders (which keep
the project out of their view) all read it here, without importing the launcher."""

from __future__ import annotations

import os
from pathlib import Path

from evaluator.device.rules import rules

ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
             "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX", "TORCH_CUDA_ARCH_LIST", "TRITON_PTXAS_PATH",
             "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF")
# What decides which device a worker uses and how it runs there: the same value (or absence) on both sides.
SHARED_DEVICE_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_VISIBLE_DEVICES",
                     "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCH_CUDA_ARCH_LIST")
# What changes how a process computes or allocates, which the candidate's allow-list never passes: the reference, which
# gets the driver's environment, drops them too, so that neither side runs with a placement, an allocator or a kernel
# choice of the driver's shell that the other lacks (OMP_PROC_BIND=true in a user's shell bound the reference's
# OpenMP threads alone, and in the candidate's worker, whose seccomp filter refuses sched_setaffinity, it crashed
# the import). What both sides need alike is set by `openmp_environment` and `SHARED_DEVICE_ENV`.
PROCESS_SETTINGS_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "MALLOC_", "ATEN_", "DNNL_", "ONEDNN_")
PROCESS_SETTINGS = ("LD_PRELOAD", "GLIBC_TUNABLES", "THP_MEM_ALLOC_ENABLE")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k in ENV_ALLOW}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    env["HOME"] = "/tmp"
    return env


def openmp_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The OpenMP settings of both zygotes, read by libgomp when torch loads it (one libgomp serves PyTorch and native
    candidates alike). The same thread count for reference and candidate: the caller's OMP_NUM_THREADS, else every CPU
    this process may use. Threads sleep as soon as a parallel region ends: an honest OpenMP kernel's idle pool is never
    mistaken for work running in the background between calls, and spinning threads do not take the cores from the
    next call on a busy machine (measured: a 2-thread GELU took 12 ms a call with a 100000 spin count against 0.18 ms
    passive, on 2 loaded cores)."""
    threads = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if not threads.isdigit() or int(threads) < 1:
        threads = str(len(os.sched_getaffinity(0)))
    return {"OMP_NUM_THREADS": threads, "OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}


KINETO_QUIET = "6"  # above every level Kineto logs at (its start and stop lines are at the highest, above errors)


def zygote_environment(role: str, device: str, environ: dict[str, str]) -> dict[str, str]:
    """A zygote's environment: the driver's for the reference (it runs trusted code only), the allow-list for the
    candidate; in both, the same device settings (`SHARED_DEVICE_ENV`), so both sides run on the same GPU with the
    same allocator and thread counts."""
    env = scrubbed_environment(environ) if role == "candidate" else {
        **{k: v for k, v in environ.items() if not (k.startswith(PROCESS_SETTINGS_PREFIXES) or k in PROCESS_SETTINGS)},
        "PYTHONPATH": str(PROJECT_ROOT)}
    for key in SHARED_DEVICE_ENV:
        if key in environ:
            env[key] = environ[key]
        else:
            env.pop(key, None)
    # Both workers pay the same costs: a coverage tracer (CI's report) in the reference alone would slow its calls
    # and skew every comparison of the two sides' clocks. The candidate's allow-list drops it already.
    env = {k: v for k, v in env.items() if not k.startswith(("COVERAGE_PROCESS_", "COV_CORE_"))}
    kind = rules(device)
    if kind.triton_interpreted:
        # Must be set before the first import of triton (the evaluator package imports it early): Triton's own
        # library functions are built as interpreted or compiled at import time.
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    if kind.cuda_runtime:
        # A zygote forks its workers, so it may not touch CUDA's runtime: torch.cuda.is_available() (called by the
        # import of torch.utils.cpp_extension, a warm import) counts devices through the runtime unless told to ask
        # NVML, and torch then refuses CUDA in every forked child ("Cannot re-initialize CUDA in forked
        # subprocess"). Seen on the first GPU run; hardening.assert_fork_safe checks it in each worker.
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    env.update(openmp_environment(environ))
    # PyTorch's profiler (Kineto) logs two lines to stderr each time it starts and stops, at every level up to
    # errors: the watch around every call of the candidate filled the worker's log (the candidate's own output fell
    # out of the tail an evaluation reports) and cost a write to the log pipe a call on both sides.
    env["KINETO_LOG_LEVEL"] = KINETO_QUIET
    return env
