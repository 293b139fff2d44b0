"""What the evaluator does differently on each kind of device, and why: one object per kind instead of branches on
the kind's name scattered through an evaluation, its workers and their sandboxes (issue 37).

On a CPU the candidate's code shares the cores, the memory and the caches with the driver, the reference and the
timer itself: so the driver draws the timed inputs on the trusted side, reads the workers' CPU by the kernel's
accounting, sizes a task before it draws, reads peak memory from /proc and keeps other work off the timed cores. On
a GPU the kernel's time and memory are the device's (CUDA events, the caching allocator), the host's cores are not
what is timed, and the profiler is Nsight Compute.

The worker and its zygote read these rules too: this module imports nothing but the standard library's dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class DeviceRules:
    kind: str                  # "cpu" | "cuda" (| "meta": a task check's shapes only)
    address_space_cap: bool    # workers get the evaluation's address-space cap (a GPU's memory is the device's)
    gpu_memory_share: bool     # the candidate's worker gets a share of the device's memory (cfg.gpu_memory_fraction)
    keep_off_timed_cores: bool  # work beside a timed phase holds the device's lock shared: it would take its cores
    trusted_inputs: bool       # timed inputs drawn by the reference into a file the candidate maps read-only
    sized_before_drawing: bool  # a task that cannot fit this machine's memory is refused before its first draw
    worker_cpu_read: bool      # the driver reads the candidate's threads' CPU (quiet windows, thread counts)
    driver_peak_memory: bool   # peak memory read by the driver from each worker's /proc (cpu_memory.py)
    hands_back_timed_cores: bool  # a runner may start preparing another evaluation once timing is over
    profiler: str              # the counters' source for native code: "perf" (perf_stat.py) or "ncu" (ncu.py)
    host_timer: bool           # a call's time is the host's clock around it, so the driver's clock around each call
                               # bounds the worker's claim (clock_checks._cross_check_calls); a GPU's is its events,
                               # and a launch's host cost lies outside them by design
    clock_gap_floor_ms: float  # what the driver's and the workers' clocks may disagree by per call before the
                               # whole-cycle check counts it: a CPU call's wall holds the harness's Python around it
    machine_load_read: bool    # the machine's other work during each timing round is read (other_work.py): on a
                               # CPU it takes the timed cores; a GPU's timed work is the device's
    energy_meter: str          # "rapl" (cpu_energy.py, where the machine exposes it) or "nvml" (energy.py)
    triton_interpreted: bool   # Triton runs under its interpreter (TRITON_INTERPRET=1): there is no GPU to compile for
    # The workers' side (worker/, sandbox/, build/): how a worker of the kind is started, confined and timed.
    cuda_runtime: bool         # the workers run CUDA: each starts its runtime after its zygote's fork (a forked child
                               # cannot re-initialise it, so a zygote asks NVML instead), warms it up before candidate
                               # code, counts its launches and builds CUDA sources; on a CPU there is none to start
    host_memory_kept: bool     # workers keep their freed heap and use 4 KiB pages (memory_conditions, heap): a CPU
                               # call's time holds its page faults; a GPU's buffers are the caching allocator's
    evicts_host_caches: bool   # the timer evicts a cold call's memory from the host's caches (line flush, else four
                               # last-level caches read) from half the LLC's bytes; a GPU's timer flushes its L2
    reference_zygote_forked: bool  # the reference's zygote may be a fork of the driver: a driver that touched CUDA
                                   # could not fork, and a GPU evaluation's start is not the CPU's to share
    file_sandbox: bool         # the candidate's worker gets Landlock's read and write rules; not yet on a GPU: its
                               # driver and Nsight Compute open device and lock files no test here can list
    device_nodes: bool         # bubblewrap binds the visible GPUs' /dev nodes into the sandbox: a CPU worker needs none
    lock_per_device: bool      # each visible GPU is its own timed device (locked by its CUDA_VISIBLE_DEVICES entry);
                               # a machine's CPU cores are one
    extension_build: str       # "link": a loadable extension the worker runs on the GPU; "check": compile only (no
                               # GPU to run a CUDA extension on, or a CPU build of torch)


CPU = DeviceRules("cpu", address_space_cap=True, gpu_memory_share=False, keep_off_timed_cores=True,
                  trusted_inputs=True, sized_before_drawing=True, worker_cpu_read=True, driver_peak_memory=True,
                  hands_back_timed_cores=True, profiler="perf", host_timer=True, clock_gap_floor_ms=0.5,
                  machine_load_read=True, energy_meter="rapl", triton_interpreted=True, cuda_runtime=False,
                  host_memory_kept=True, evicts_host_caches=True, reference_zygote_forked=True, file_sandbox=True,
                  device_nodes=False, lock_per_device=False, extension_build="check")
CUDA = DeviceRules("cuda", address_space_cap=False, gpu_memory_share=True, keep_off_timed_cores=False,
                   trusted_inputs=False, sized_before_drawing=False, worker_cpu_read=False, driver_peak_memory=False,
                   hands_back_timed_cores=False, profiler="ncu", host_timer=False, clock_gap_floor_ms=0.05,
                   machine_load_read=False, energy_meter="nvml", triton_interpreted=False, cuda_runtime=True,
                   host_memory_kept=False, evicts_host_caches=False, reference_zygote_forked=False,
                   file_sandbox=False, device_nodes=True, lock_per_device=True, extension_build="link")
# `opforge task check --device meta`: the reference's worker, in the CPU's zygote, runs the task on tensors that hold
# no data to learn its shapes; nothing is drawn, timed or evicted (there are no bytes), and its workers are the CPU's.
META = replace(CPU, kind="meta", evicts_host_caches=False, sized_before_drawing=False)
_BY_KIND = {"cpu": CPU, "cuda": CUDA, "meta": META}
KINDS = ("cpu", "cuda")  # the resolved kinds (`info.resolve_device`): a request names one of these, or "auto"


def rules(kind: str) -> DeviceRules:
    """The rules of a resolved device kind (`info.resolve_device`); ValueError for any other."""
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise ValueError(f"no device rules for {kind!r}: a resolved kind is cpu or cuda (or meta, for a task check)") from None
