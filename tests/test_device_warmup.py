"""The device warm-up step and the launch counter of compiled Triton kernels (issue 15, finding 1), on the CPU.

torch.cuda caches `_cached_device_count` only once CUDA has started, so the real bug cannot show on a CPU build; a
module that caches a global lazily stands in for it, and the same `Guards` snapshot is taken around it.
"""

from __future__ import annotations

import inspect
import sys
import types

import pytest
import torch

from evaluator.worker import device_warmup
from evaluator.worker import hardening
from evaluator.worker.guards import Guards, install_compiled_launch_counter


def _lazy_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec("_cached_count = None\n"
         "def count():\n"
         "    global _cached_count\n"
         "    if _cached_count is None:\n"
         "        _cached_count = 1\n"
         "    return _cached_count\n", module.__dict__)
    return module


@pytest.fixture()
def lazy(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = _lazy_module("opforge_test_lazy_cuda")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_lazy_global_written_after_the_snapshot_reads_as_tampering(lazy: types.ModuleType):
    guards = Guards(watched_modules=(lazy.__name__,))
    guards.take_snapshot()
    lazy.count()  # what Triton's first launch does through get_device_capability -> device_count
    assert guards.tampered() == f"{lazy.__name__}._cached_count"


def test_warming_up_before_the_snapshot_keeps_an_honest_first_call_clean(lazy: types.ModuleType):
    guards = Guards(watched_modules=(lazy.__name__,))
    assert device_warmup.warm_up("cuda", steps=[("lazy count", lazy.count)]) == ["lazy count"]
    guards.take_snapshot()
    lazy.count()
    assert guards.tampered() is None


def test_the_cuda_steps_cover_device_count_after_init_properties_and_triton_target():
    names = [name for name, _ in device_warmup.device_steps("cuda")]
    assert names.index("torch.cuda.init") < names.index("torch.cuda.device_count after init")
    assert {"torch.cuda.get_device_properties", "triton's active target", "triton's launcher utilities"} <= set(names)
    assert [name for name, _ in device_warmup.device_steps("cpu")] == ["torch.cuda.device_count"]


def test_a_failing_step_is_one_sentence_naming_the_step():
    def broken() -> None:
        raise RuntimeError("no CUDA GPUs are available")
    with pytest.raises(device_warmup.DeviceWarmupError, match="at torch.cuda.init: no CUDA GPUs"):
        device_warmup.warm_up("cuda", steps=[("torch.cuda.init", broken)])


def test_the_cpu_warm_up_runs_for_real():
    assert device_warmup.warm_up("cpu") == ["torch.cuda.device_count"]


class _FakeCompiled:
    """Triton's CompiledKernel as the counter sees it: `src.fn` and `launch_metadata` called before each launch."""

    def __init__(self, name: str) -> None:
        self.src = types.SimpleNamespace(fn=types.SimpleNamespace(__name__=name))
        self.name = name

    def launch_metadata(self, grid: tuple, stream: int, *args: object) -> None:
        return None

    def __getitem__(self, grid: tuple):  # noqa: ANN204 - the precompiled path: kernel.warmup(...)[grid](...)
        return lambda *args: self.launch_metadata(grid, 0, *args)


def test_launches_are_counted_on_every_path_into_a_compiled_kernel():
    counter: dict[str, int] = {}
    cls = type("Compiled", (_FakeCompiled,), {})
    install_compiled_launch_counter(counter, cls)
    kernel = cls("relu_kernel")
    kernel[(1, 1, 1)](1, 2)
    kernel.launch_metadata((1, 1, 1), 0)
    assert counter == {"triton:relu_kernel": 2}


def test_triton_calls_launch_metadata_on_both_launch_paths():
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction
    assert "launch_metadata(" in inspect.getsource(JITFunction.run)
    assert "launch_metadata(" in inspect.getsource(CompiledKernel.__getitem__)
    assert list(inspect.signature(CompiledKernel.launch_metadata).parameters)[:3] == ["self", "grid", "stream"]


def test_a_process_that_started_cuda_may_not_fork_workers(monkeypatch: pytest.MonkeyPatch):
    hardening.assert_fork_safe()  # this test process never starts CUDA
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(hardening.ForkSafetyError):
        hardening.assert_fork_safe()


def test_a_worker_forked_from_a_process_that_called_cuda_says_so(monkeypatch: pytest.MonkeyPatch):
    """torch marks a child "in bad fork" when its parent called CUDA's runtime (the first GPU run's failure)."""
    monkeypatch.setattr(torch.cuda, "_is_in_bad_fork", lambda: True)
    with pytest.raises(hardening.ForkSafetyError, match="PYTORCH_NVML_BASED_CUDA_CHECK"):
        hardening.assert_fork_safe()


def test_gpu_zygotes_count_devices_through_nvml_and_cpu_ones_are_left_alone():
    from evaluator.sandbox.zygote_env import zygote_environment
    for role in ("reference", "candidate"):
        assert zygote_environment(role, "cuda", {"PATH": "/bin"})["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
        assert "PYTORCH_NVML_BASED_CUDA_CHECK" not in zygote_environment(role, "cpu", {"PATH": "/bin"})


def test_the_builders_link_self_test_links_a_shared_library():
    from evaluator.build.builder import probe_commands
    check = probe_commands("check", "nvcc", "g++", ["/torch/lib"])
    assert len(check) == 1 and not any("-shared" in cmd for stage in check for cmd in stage)
    link = probe_commands("link", "nvcc", "g++", ["/torch/lib", "/cuda/lib64"])
    assert len(link) == 2  # compile, then link what was compiled
    [linker] = link[1]
    assert linker[:2] == ["g++", "-shared"] and "probe.o" in linker
    assert {"-L/torch/lib", "-L/cuda/lib64", "-lcudart", "-ltorch", "-lc10"} <= set(linker)
    assert "-fPIC" in link[0][0]  # an object that can go into a shared library
