"""A run's typed configuration (stored as JSON, read back typed, unknown keys refused), the backend choice, and the
typed request that the CLI and the web form both plan a run from."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import MappingProxyType

import pytest

from agents.tuner import describe_tunables, neighbours
from evaluator.config import EvalConfig
from opforge.errors import UsageError
from opforge.run.config import LLMSettings, RunConfig, RunConfigError, resolve_backend
from opforge.run.plan import kernel_backend, plan_run
from opforge.run.request import LLMRequest, RunRequest
from opforge.web.submission import FORM_NAMES

RELU = textwrap.dedent('''\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    def get_inputs():
        return [torch.randn(64, 64)]

    def get_init_inputs():
        return []
''')

NATIVE_RELU = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    from evaluator.native import load_c

    SOURCE = r"""
    #include <stdint.h>
    #define BLOCK 4096
    #define UNROLL 4
    #define WARP_SIZE 32
    void relu(const float* restrict x, float* restrict out, int64_t n) {
        for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
    """
    lib = load_c("relu", SOURCE, functions=["relu"], flags=["-O3"])

    class ModelNew(nn.Module):
        def forward(self, x):
            x = x.contiguous()
            out = torch.empty_like(x)
            lib.relu(x, out, x.numel())
            return out
''')

TRITON_RELU = textwrap.dedent('''\
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl

    @triton.jit
    def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)

    class ModelNew(nn.Module):
        def forward(self, x):
            out = torch.empty_like(x)
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
            return out
''')


def _task_dir(tmp_path: Path, *, triton_seed: bool, native_seed: bool) -> Path:
    (tmp_path / "relu.py").write_text(RELU)
    if triton_seed:
        (tmp_path / "relu.seed.py").write_text(TRITON_RELU)
    if native_seed:
        (tmp_path / "relu.cpp.py").write_text(NATIVE_RELU)
    return tmp_path / "relu.py"


def test_run_config_round_trips_through_json() -> None:
    config = RunConfig(coder="llm", backend="cuda", eval=EvalConfig(max_timing_s=0.5, trials=2), islands=3, seed=7,
                       confirm_top=1, confirm_repeats=5, llm=LLMSettings(model="m", judge_model="j", base_url="http://x",
                                       prices=MappingProxyType({"m": (1.0, 2.0)})))
    assert RunConfig.from_json(config.to_json()) == config
    assert RunConfig.from_json(config.with_archive({"enabled": True, "seeds": []}).to_json()).archive == {
        "enabled": True, "seeds": []}


@pytest.mark.parametrize(("data", "names"), [
    ({"coder": "tune", "islnads": 3}, "islnads"),
    ({"coder": "tune", "eval": {"max_timing": 1.0}}, "max_timing"),
    ({"coder": "llm", "llm": {"model": "m", "temperature": 0.1}}, "temperature"),
])
def test_an_unknown_key_is_refused_with_one_sentence(data: dict, names: str) -> None:
    with pytest.raises(RunConfigError) as info:
        RunConfig.from_json(data, "run 12")
    message = str(info.value)
    assert message.startswith("run 12") and names in message and message.count(". ") == 0 and "\n" not in message


def test_an_older_stores_configuration_still_reads() -> None:
    """Before the backend was a run setting, the LLM settings named it (or nothing did: Triton), and runs started
    before the archive existed have no archive entry."""
    old_llm = {"coder": "llm", "eval": {"max_timing_s": 1.0}, "islands": 2, "seed": 0,
               "llm": {"model": "m", "judge_model": None, "base_url": None, "backend": "cuda", "review": False,
                       "tune_per_request": 2, "concurrency": 4, "timeout_s": 180.0, "prices": {}, "from_scratch": False}}
    config = RunConfig.from_json(old_llm)
    assert config.backend == "cuda" and config.llm is not None and config.llm.model == "m"
    assert config.llm.retries == 4  # before --llm-retries, every request was retried four times
    tune = RunConfig.from_json({"coder": "tune", "eval": {}, "islands": 2, "seed": 0})
    assert tune.backend == "triton" and tune.archive == {"enabled": False}
    assert (tune.confirm_top, tune.confirm_repeats) == (2, 3)  # what runs before `--confirm` were confirmed with


def test_auto_backend_is_triton_with_a_gpu_and_native_without() -> None:
    assert resolve_backend("auto", cuda_available=True) == "triton"
    assert resolve_backend("auto", cuda_available=False) == "cpp"
    assert resolve_backend("triton", cuda_available=False) == "triton"
    with pytest.raises(ValueError):
        resolve_backend("opencl", cuda_available=False)


def test_a_kernel_file_says_what_it_is_written_in() -> None:
    assert (kernel_backend(NATIVE_RELU), kernel_backend(TRITON_RELU)) == ("cpp", "triton")
    assert kernel_backend("load_inline(name='k', cpp_sources=s, cuda_sources=c)") == "cuda"
    assert kernel_backend("class ModelNew: pass") is None


def test_on_a_cpu_auto_plans_native_kernels_from_the_native_seed(tmp_path: Path) -> None:
    task = _task_dir(tmp_path, triton_seed=True, native_seed=True)
    plan = plan_run(RunRequest(task=str(task), coder="tune"), cuda_available=False)
    assert plan.config.backend == "cpp" and plan.seed is not None and "load_c(" in plan.seed.source
    assert plan.note == ""
    on_gpu = plan_run(RunRequest(task=str(task), coder="tune"), cuda_available=True)
    assert on_gpu.config.backend == "triton" and on_gpu.seed is not None and "triton.jit" in on_gpu.seed.source


def test_auto_follows_the_given_seed_kernel_and_says_when_triton_is_interpreted(tmp_path: Path) -> None:
    task = _task_dir(tmp_path, triton_seed=False, native_seed=True)
    seed = tmp_path / "mine.py"
    seed.write_text(TRITON_RELU)
    plan = plan_run(RunRequest(task=str(task), coder="tune", seed_kernel=str(seed)), cuda_available=False)
    assert plan.config.backend == "triton" and "interpreter" in plan.note


def test_a_task_without_a_native_seed_keeps_its_triton_seed_on_a_cpu(tmp_path: Path) -> None:
    task = _task_dir(tmp_path, triton_seed=True, native_seed=False)
    plan = plan_run(RunRequest(task=str(task), coder="tune"), cuda_available=False)
    assert plan.config.backend == "triton" and plan.seed is not None


def test_cpp_without_a_seed_for_the_tuner_is_one_sentence(tmp_path: Path) -> None:
    task = _task_dir(tmp_path, triton_seed=True, native_seed=False)
    with pytest.raises(UsageError, match=r"has no seed kernel for the cpp backend beside it \(relu\.cpp\.py\); give "
                                         r"the starting kernel with --seed-kernel FILE"):
        plan_run(RunRequest(task=str(task), coder="tune", backend="cpp"), cuda_available=False)


def test_numbers_are_checked_once_and_named_as_the_asker_calls_them(tmp_path: Path) -> None:
    task = _task_dir(tmp_path, triton_seed=True, native_seed=False)
    with pytest.raises(UsageError, match="^--budget must be a positive whole number, not 0.$"):
        plan_run(RunRequest(task=str(task), budget=0))
    with pytest.raises(UsageError, match="^the budget must be a positive whole number, not 0.$"):
        plan_run(RunRequest(task=str(task), budget=0), FORM_NAMES)
    with pytest.raises(UsageError, match="^timing_s must be a positive number of seconds, not -1.0.$"):
        plan_run(RunRequest(task=str(task), timing_s=-1.0), FORM_NAMES)
    with pytest.raises(UsageError, match="^--confirm must be 0 or more re-measurements, not -1.$"):
        plan_run(RunRequest(task=str(task), confirm=-1))
    assert plan_run(RunRequest(task=str(task), confirm=0)).config.confirm_repeats == 0
    assert plan_run(RunRequest(task=str(task))).config.confirm_repeats == 3


def test_the_tuner_finds_defines_in_a_c_source_inside_a_python_string() -> None:
    assert describe_tunables(NATIVE_RELU) == {"BLOCK": 4096, "UNROLL": 4}  # WARP_SIZE is a constant, not a knob
    variants = neighbours(NATIVE_RELU)
    blocks = {describe_tunables(source)["BLOCK"] for source, _ in variants}
    assert blocks == {2048, 4096, 8192}, "a CPU kernel's BLOCK is not capped at CUDA's 1024 threads per block"
    for source, note in variants:
        assert kernel_backend(source) == "cpp" and source != NATIVE_RELU
        changed = describe_tunables(source)
        assert changed != {"BLOCK": 4096, "UNROLL": 4} and set(changed) == {"BLOCK", "UNROLL"}
        assert "#define WARP_SIZE 32" in source and source.count("#define") == 3


def test_the_llm_coder_writes_the_machines_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPFORGE_LLM_BASE_URL", "http://127.0.0.1:9")
    task = _task_dir(tmp_path, triton_seed=True, native_seed=True)
    llm = LLMRequest(model="m", from_scratch=True)
    plan = plan_run(RunRequest(task=str(task), coder="llm", llm=llm), cuda_available=False)
    assert plan.config.backend == "cpp" and plan.seed is None  # native prompts exist: no interpreter on a CPU
    plan = plan_run(RunRequest(task=str(task), coder="llm", llm=llm), cuda_available=True)
    assert plan.config.backend == "triton"
    plan = plan_run(RunRequest(task=str(task), coder="llm", backend="triton", llm=llm), cuda_available=False)
    assert plan.config.backend == "triton"