"""Both sides on the same device with the same settings, and a sandbox that binds only this process's GPU node
(issue 15, finding 12), on the CPU: the zygotes' environments and the bound /dev nodes, through a fake NVML."""

from __future__ import annotations

from evaluator.sandbox.device_nodes import device_nodes, visible_minors
from evaluator.sandbox.zygote_env import SHARED_DEVICE_ENV, zygote_environment

DRIVER_ENV = {"PATH": "/usr/bin", "HOME": "/home/me", "OPENAI_API_KEY": "sk-secret", "CUDA_VISIBLE_DEVICES": "2",
              "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
              "OMP_NUM_THREADS": "4", "COVERAGE_PROCESS_CONFIG": "{}"}


def test_both_zygotes_get_the_same_device_settings_and_only_the_reference_the_rest():
    ref = zygote_environment("reference", "cuda", DRIVER_ENV)
    cand = zygote_environment("candidate", "cuda", DRIVER_ENV)
    for key in SHARED_DEVICE_ENV:
        assert ref.get(key) == cand.get(key) == DRIVER_ENV.get(key), key
    assert "OPENAI_API_KEY" in ref and "OPENAI_API_KEY" not in cand
    assert "COVERAGE_PROCESS_CONFIG" not in ref and "COVERAGE_PROCESS_CONFIG" not in cand
    assert "TRITON_INTERPRET" not in cand and zygote_environment("candidate", "cpu", DRIVER_ENV)["TRITON_INTERPRET"] == "1"


def test_the_drivers_process_settings_reach_neither_side():
    """Thread placement, allocator and kernel choices in the driver's shell: the candidate's allow-list never passed
    them, and the reference drops them too; the thread count and OpenMP's wait policy are set alike on both."""
    settings = {"OMP_PROC_BIND": "true", "OMP_PLACES": "cores", "GOMP_CPU_AFFINITY": "0-1", "KMP_AFFINITY": "compact",
                "LD_PRELOAD": "/usr/lib/libjemalloc.so.2", "MALLOC_ARENA_MAX": "2", "GLIBC_TUNABLES": "glibc.malloc.x=1",
                "ATEN_CPU_CAPABILITY": "avx2", "OMP_WAIT_POLICY": "ACTIVE", "MKL_NUM_THREADS": "3"}
    ref, cand = (zygote_environment(role, "cpu", {**DRIVER_ENV, **settings}) for role in ("reference", "candidate"))
    for key in ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY", "LD_PRELOAD", "MALLOC_ARENA_MAX",
                "GLIBC_TUNABLES", "ATEN_CPU_CAPABILITY"):
        assert key not in ref and key not in cand, key
    assert ref["OMP_WAIT_POLICY"] == cand["OMP_WAIT_POLICY"] == "PASSIVE"
    assert ref["OMP_NUM_THREADS"] == cand["OMP_NUM_THREADS"] == "4" and ref["MKL_NUM_THREADS"] == cand["MKL_NUM_THREADS"]
    assert ref["HOME"] == "/home/me"  # the rest of the driver's environment still reaches the reference


def test_an_unset_device_setting_is_unset_on_both_sides():
    env = {k: v for k, v in DRIVER_ENV.items() if k != "PYTORCH_CUDA_ALLOC_CONF"}
    assert all("PYTORCH_CUDA_ALLOC_CONF" not in zygote_environment(r, "cuda", env) for r in ("reference", "candidate"))


class FakeNvml:
    UUIDS = ("GPU-aaaa", "GPU-bbbb", "GPU-cccc")
    MINORS = (0, 1, 3)  # minor numbers need not follow the index

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - NVML's names
        return 3

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetUUID(self, h: int) -> str:  # noqa: N802
        return self.UUIDS[h]

    def nvmlDeviceGetMinorNumber(self, h: int) -> int:  # noqa: N802
        return self.MINORS[h]


NODES = ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
         "/dev/nvidia-caps"]


def test_only_the_visible_gpus_node_is_bound():
    nvml = FakeNvml()
    minors = visible_minors(nvml, {"CUDA_VISIBLE_DEVICES": "GPU-cccc"})
    assert minors == {3}
    assert device_nodes(NODES, minors) == ["/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm",
                                           "/dev/nvidia-uvm-tools", "/dev/nvidia-caps"]
    assert visible_minors(nvml, {"CUDA_VISIBLE_DEVICES": "2,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == {3, 0}


def test_where_the_gpu_cannot_be_named_every_node_stays():
    nvml = FakeNvml()
    assert visible_minors(nvml, {}) is None
    assert visible_minors(nvml, {"CUDA_VISIBLE_DEVICES": "1"}) is None  # an index in CUDA's own order
    assert visible_minors(None, {"CUDA_VISIBLE_DEVICES": "GPU-aaaa"}) is None
    assert device_nodes(NODES, None) == NODES


def test_the_profilers_watch_of_a_call_writes_nothing_to_a_workers_log():
    """Kineto logged two lines to stderr at every start and stop of the profiler that watches each call: they filled
    the worker's log, whose tail an evaluation reports (the candidate's own output fell out of it)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = zygote_environment("candidate", "cpu", {"PATH": os.environ.get("PATH", "/usr/bin")})
    code = ("import torch\nfrom evaluator.worker.observer import CallObserver\nx = torch.ones(8)\n"
            "for _ in range(3):\n    with CallObserver():\n        torch.relu(x)\nprint('watched')\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0 and "watched" in done.stdout, done.stderr[-2000:]
    assert "profiler_start" not in done.stderr and "profiler_stop" not in done.stderr, done.stderr[-2000:]
