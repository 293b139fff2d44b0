"""Native kernels inside the evaluator: the policy's one admitted import, the build stage serving load_c, the
backend of a result, and INTERPRETER_SHAPE and INTERPRETER_SHAPES for Triton candidates on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import Candidate, EvalConfig, EvalResult, Status, load_task
from evaluator import evaluate
from evaluator.verify import policy
from evaluator.backend import backend_of, runs_in_triton_interpreter
from evaluator.build.native_build import NativeCache
from evaluator.worker.task_runtime import TaskRuntime, TaskRuntimeError

TESTS = Path(__file__).resolve().parent
CONFIG = EvalConfig(run_timeout_s=20, compile_timeout_s=60, max_timing_s=0.3)

NATIVE_RELU = '''
import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0 ? x[i] : 0; }
"""
lib = load_c("relu_plain", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        lib.relu(x.contiguous(), out, x.numel())
        return out
'''


@pytest.fixture
def native_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "native-cache"))
    return tmp_path / "native-cache"


@pytest.mark.parametrize("line, refused", [
    ("from evaluator.native import load_c", False),
    ("from evaluator.native import load_c as build", False),
    ("from evaluator.native import serve", True),
    ("from evaluator.native import load_c, _launches", True),
    ("import evaluator.native", True),
    ("from evaluator import native", True),
    ("from evaluator.build.native_build import compile_library", True),
    ("import ctypes", True),
])
def test_the_policy_admits_load_c_and_nothing_else_of_the_harness(line, refused):
    assert bool(policy.check_source(line + "\n")) is refused


@pytest.mark.parametrize("kernels, cuda_sources, kind, allow_torch, expected", [
    ({"triton:relu_kernel": 1}, False, "cpu", False, "triton"),
    ({"cpp:relu": 2}, False, "cpu", False, "cpp"),
    ({"extension:relu": 1}, False, "cpu", False, "cpp"),
    ({"extension:relu": 1}, True, "cuda", False, "cuda"),
    ({"extension:relu": 1}, True, "cpu", False, "cpp"),
    ({}, False, "cpu", True, "torch"),
    ({}, False, "cpu", False, None),
    ({"triton:a": 1, "cpp:b": 3}, False, "cpu", False, "cpp"),
])
def test_backend_of_the_launched_kernels(kernels, cuda_sources, kind, allow_torch, expected):
    assert backend_of(kernels, cuda_sources=cuda_sources, device_kind=kind, allow_torch=allow_torch) == expected


def test_backend_survives_json():
    result = EvalResult(Status.OK, "correct on every trial", backend="cpp")
    assert result.to_json()["backend"] == "cpp"
    assert EvalResult.from_json(result.to_json()).backend == "cpp"
    assert EvalResult.from_json({"status": "ok", "reason": "x"}).backend is None


def test_triton_on_the_interpreter_is_decided_from_the_source():
    triton = (TESTS / "honest" / "relu_triton.py").read_text()
    assert runs_in_triton_interpreter(triton, "cpu")
    assert not runs_in_triton_interpreter(triton, "cuda")
    assert not runs_in_triton_interpreter(NATIVE_RELU, "cpu")
    assert not runs_in_triton_interpreter(triton + "\nfrom evaluator.native import load_c\n", "cpu")


def test_interpreter_shape_overrides_the_module_values_and_keeps_the_variants():
    source = (TESTS / "tasks" / "relu_sized.py").read_text()
    native = TaskRuntime(source, "relu_sized", "cpu")
    interpreted = TaskRuntime(source, "relu_sized", "cpu", interpreter_shape=True)
    assert native.inputs(0, 1)[0].shape == (512, 2048) and native.interpreter_shape is None
    assert interpreted.inputs(0, 1)[0].shape == (4, 96)
    assert interpreted.inputs(1, 1)[0].shape == (4, 7)  # a SHAPES variant on top of the interpreter shape
    assert interpreted.inputs(0, 1)[0].shape == (4, 96)
    assert interpreted.interpreter_shape == {"ROWS": 4, "COLS": 96}


def test_a_triton_candidate_on_the_cpu_is_timed_on_the_interpreter_shape(native_cache):
    task = load_task(TESTS / "tasks" / "relu_sized.py")
    source = (TESTS / "honest" / "relu_triton.py").read_text()
    result = evaluate(task, Candidate.from_source(source), CONFIG)
    assert result.status == Status.OK, result.reason
    assert "INTERPRETER_SHAPE (ROWS=4, COLS=96)" in result.reason and result.backend == "triton"


def test_a_native_candidate_is_built_by_the_build_stage_once_and_timed_on_the_module_shape(native_cache):
    task = load_task(TESTS / "tasks" / "relu_sized.py")
    first = evaluate(task, Candidate.from_source(NATIVE_RELU), CONFIG)
    assert first.status == Status.OK, first.reason
    assert first.backend == "cpp" and "INTERPRETER_SHAPE" not in first.reason
    second = evaluate(task, Candidate.from_source(NATIVE_RELU), CONFIG)
    assert second.status == Status.OK, second.reason
    builds = NativeCache(native_cache).compiles()
    assert [(b["name"], b["verdict"], b["context"]) for b in builds] == [("relu_plain", "built", "evaluation")]


def test_a_native_compile_error_is_a_compile_error_with_the_log(native_cache):
    source = NATIVE_RELU.replace("out[i] = x[i] > 0", "out[i] = y[i] > 0")
    result = evaluate(load_task(TESTS / "tasks" / "relu.py"), Candidate.from_source(source), CONFIG)
    assert result.status == Status.COMPILE_ERROR
    assert "do not compile" in result.reason and "'y' undeclared" in result.log


def test_a_refused_flag_is_a_compile_error_in_one_sentence(native_cache):
    source = NATIVE_RELU.replace('flags=["-O2"]', 'flags=["-O2", "-fplugin=/tmp/x.so"]')
    result = evaluate(load_task(TESTS / "tasks" / "relu.py"), Candidate.from_source(source), CONFIG)
    assert result.status == Status.COMPILE_ERROR and "is not allowed" in result.reason


def test_load_c_after_the_import_is_one_readable_sentence(native_cache):
    source = NATIVE_RELU.replace("lib = load_c(", "make = lambda: load_c(").replace(
        "lib.relu(", "make().relu(")
    result = evaluate(load_task(TESTS / "tasks" / "relu.py"), Candidate.from_source(source), CONFIG)
    assert result.status == Status.RUNTIME_ERROR
    assert "call load_c at module level" in result.reason


def test_openmp_settings_are_the_same_for_both_workers(monkeypatch):
    from evaluator.sandbox.zygote_env import openmp_environment
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert openmp_environment() == {"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}
    monkeypatch.setenv("OMP_NUM_THREADS", "lots")
    import os
    assert openmp_environment()["OMP_NUM_THREADS"] == str(len(os.sched_getaffinity(0)))


OPENMP_THREADS = NATIVE_RELU.replace('#include <stdint.h>', '#include <stdint.h>\n#include <omp.h>\n'
                                     'int64_t threads(void) { return omp_get_max_threads(); }').replace(
    'functions=["relu"], flags=["-O2"]', 'functions=["relu", "threads"], flags=["-O2", "-fopenmp"]').replace(
    "        out = torch.empty_like(x)\n",
    "        out = torch.empty_like(x)\n        print('THREADS', torch.get_num_threads(), lib.threads(), flush=True)\n")


def test_an_openmp_candidate_gets_the_reference_thread_count(native_cache):
    """PyTorch's intra-op threads (the reference's) and the candidate's OpenMP threads are one number."""
    result = evaluate(load_task(TESTS / "tasks" / "relu.py"), Candidate.from_source(OPENMP_THREADS), CONFIG)
    assert result.status == Status.OK, result.reason
    seen = {tuple(line.split()[1:]) for line in result.log.splitlines() if line.startswith("THREADS")}
    assert len(seen) == 1 and len({*next(iter(seen))}) == 1, seen


def test_the_cli_summary_names_the_backend_and_no_interpreter_for_native_kernels():
    from evaluator.result import DeviceInfo, Timing
    from opforge.cli.commands.eval import summary
    cpu = DeviceInfo(kind="cpu", name="CPU x86_64", interpreted=True)
    timing = Timing(median_ms=1.0, iqr_ms=0.1, reps=10)
    native = EvalResult(Status.OK, "correct on every trial", candidate_ms=timing, reference_ms=timing, device=cpu,
                        backend="cpp")
    text = summary(native, "gelu.cpp.py", "gelu_tanh")
    assert "(CPU x86_64)" in text and "Triton interpreter" not in text and "backend        cpp" in text
    triton = EvalResult(Status.OK, "correct on every trial", device=cpu, backend="triton")
    assert "Triton interpreter" in summary(triton, "gelu.seed.py", "gelu_tanh")


def test_the_ahead_of_time_build_covers_load_c(native_cache, tmp_path):
    """RayRunner's build task (`prebuild`) records load_c calls in a collecting worker and builds them into the cache,
    so the evaluation that follows only loads."""
    from evaluator.build.stage import prebuild
    task = load_task(TESTS / "tasks" / "relu.py")
    candidate = Candidate.from_source(NATIVE_RELU)
    summaries = prebuild(task, candidate, CONFIG, "check", str(tmp_path / "cuda-cache"))
    assert [(s["kind"], s["verdict"], s["cached"]) for s in summaries] == [("native", "built", False)]
    result = evaluate(task, candidate, CONFIG)
    assert result.status == Status.OK, result.reason
    assert [b["context"] for b in NativeCache(native_cache).compiles()] == ["prebuild"]


def test_interpreter_shapes_replace_the_variants_under_the_interpreter_only():
    source = (TESTS / "tasks" / "relu_sized.py").read_text() + '\nINTERPRETER_SHAPES = [{"COLS": 5}, {"ROWS": 3}]\n'
    native = TaskRuntime(source, "relu_sized", "cpu")
    interpreted = TaskRuntime(source, "relu_sized", "cpu", interpreter_shape=True)
    assert native.variants == [{}, {"COLS": 7}]
    assert interpreted.variants == [{}, {"COLS": 5}, {"ROWS": 3}]
    assert interpreted.inputs(1, 1)[0].shape == (4, 5) and interpreted.inputs(2, 1)[0].shape == (3, 96)
    with pytest.raises(TaskRuntimeError, match="INTERPRETER_SHAPES must be a list of dicts"):
        TaskRuntime(source + "INTERPRETER_SHAPES = {'COLS': 5}\n", "relu_sized", "cpu", interpreter_shape=True)


# Correct except where a row is 7 values long: there it leaves the last value unwritten.
WRONG_AT_SEVEN = (TESTS / "honest" / "relu_triton.py").read_text().replace(
    "        n = x.numel()\n", "        n = x.numel() - (1 if x.shape[-1] == 7 else 0)\n")


def test_a_triton_candidate_on_the_cpu_is_checked_on_the_interpreters_variants(tmp_path):
    assert WRONG_AT_SEVEN != (TESTS / "honest" / "relu_triton.py").read_text()
    task_path = tmp_path / "relu_sized.py"
    task_path.write_text((TESTS / "tasks" / "relu_sized.py").read_text())
    refused = evaluate(load_task(task_path), Candidate.from_source(WRONG_AT_SEVEN), CONFIG)
    # 28 values: the variant's 4 rows of 7 (ROWS=4 is the interpreter's shape), one of them left unwritten
    assert refused.status == Status.REJECTED and "1 of the 28 values" in refused.reason, refused.reason
    task_path.write_text(task_path.read_text() + '\nINTERPRETER_SHAPES = [{"COLS": 5}]\n')
    result = evaluate(load_task(task_path), Candidate.from_source(WRONG_AT_SEVEN), CONFIG)
    assert result.status == Status.OK, result.reason  # the interpreter's variants have no 7-value rows
