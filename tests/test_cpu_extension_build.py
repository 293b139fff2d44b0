"""CPU load_inline extensions (cpp_sources only): recorded in the candidate's worker, built once per digest by the
sandboxed trusted builder into the build cache, loaded by the worker from the bytes the driver sends; a later
evaluation, of the same candidate or another using the same extension, runs no compiler. With the real compiler:
two builds in all (an extension and a compile error), cached in a folder of this module's."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from evaluator import Candidate, EvalConfig, Status, load_candidate, load_task
from evaluator.build.cache import BuildCache, entry_key
from evaluator.build.cpu_extension import CpuExtensionSpec, routed
from evaluator.build.cpu_extension_build import commands, include_dirs, toolchain
from evaluator.driver.evaluate import LocalEvaluator

TESTS = Path(__file__).resolve().parent
TASK = TESTS / "tasks" / "relu.py"
HONEST = TESTS / "honest" / "relu_cpp_load_inline.py"
ATEN = TESTS / "cheats" / "cpp_extension_calls_aten.py"
CFG = EvalConfig(device="cpu", compile_timeout_s=600, run_timeout_s=60, max_timing_s=0.3, trials=1, profile=False)

BROKEN = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline("opforge_test_broken_cpu", "torch::Tensor relu_cpu(torch::Tensor x) { return x }",
                  functions=["relu_cpu"], extra_cflags=FLAGS)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cpu(x)
'''


def _spec(**kwargs) -> CpuExtensionSpec:
    return CpuExtensionSpec.from_call(kwargs.pop("name", "ext"), "int f() { return 1; }", kwargs)


# -- fast: specs, flags, keys and the recipe ---------------------------------------------------------------------------
def test_only_cpu_only_calls_take_the_cpu_route():
    assert routed(None, {}) and routed([], {"with_cuda": False})
    assert not routed("__global__ void k() {}", {})
    assert not routed(None, {"with_cuda": True})  # CUDA's libraries without CUDA sources: the CUDA path


def test_a_spec_keeps_allow_listed_flags_and_refuses_the_rest_in_one_sentence():
    base = _spec(functions=["f"], extra_cflags=["-O3", "-march=native", "-fopenmp", "-DBLOCK=64", "-Wall"],
                 extra_ldflags=["-fopenmp"], verbose=True, build_directory="/somewhere", use_pch=True)
    assert base.functions == (("f", "f"),) and base.extra_ldflags == ("-fopenmp",)
    assert _spec(extra_cflags=["-O3 -march=native"]).extra_cflags == ("-O3", "-march=native")  # as ninja splits
    assert CpuExtensionSpec.from_json(base.to_json()) == base
    assert _spec(functions=["f"]).digest != base.digest  # flags are part of the key
    assert "#include <torch/extension.h>" in base.main_cpp() and 'm.def("f"' in base.main_cpp()
    refused = {
        "extra_include_paths": _refusal(extra_include_paths=["/etc"]),
        "plugin": _refusal(extra_cflags=["-fplugin=/tmp/evil.so"]),
        "include": _refusal(extra_cflags=["-include/etc/shadow"]),
        "search path": _refusal(extra_cflags=["-O3 -I/home/user"]),
        "link path": _refusal(extra_ldflags=["-L/home/user", "-lfoo"]),
        "name": _refusal(name="ext -DX"),  # the name lands in -DTORCH_EXTENSION_NAME and a file name
        "docstring": _refusal(functions={"f": 'doc"); system("x'}),
        "module": _refusal(is_python_module=False),
        "unknown": _refusal(sycl_sources="x"),
    }
    assert all(reason and "\n" not in reason for reason in refused.values()), refused
    assert "is not allowed (allowed: -O0..-O3" in refused["plugin"]
    with pytest.raises(ValueError):
        CpuExtensionSpec.from_json({**base.to_json(), "extra_cflags": ["-B/tmp"]})


def _refusal(**kwargs) -> str:
    try:
        _spec(**kwargs)
    except ValueError as exc:
        return str(exc)
    return ""


def test_the_key_holds_the_torch_version_the_compiler_and_the_recipe():
    tc = toolchain()
    assert tc is not None and tc["mode"] == "cpu" and tc["torch"] and tc["cxx"] and tc["recipe"]
    spec = _spec(functions=["f"])
    keys = {entry_key(spec, tc), entry_key(spec, {**tc, "torch": "0.0.0"}), entry_key(spec, {**tc, "cxx": "other"}),
            entry_key(spec, {**tc, "recipe": []})}
    assert len(keys) == 4
    compile_line, link_line = commands(_spec(extra_cflags=["-O2"]), "c++")
    assert compile_line[-5:] == ["-O2", "-c", "main.cpp", "-o", "main.o"]  # the candidate's flags after the defaults
    assert all(d == str(Path(d).resolve()) for d in include_dirs())  # real folders: the sandbox binds no symlinks
    from torch.utils import cpp_extension  # the same folders as torch's own recipe, found without importing it
    assert include_dirs()[:2] == [str(Path(d).resolve()) for d in cpp_extension.include_paths("cpu")]
    assert link_line[-2:] == ["-o", "ext.so"] and "-ltorch_python" in link_line


# -- the real compiler, through the evaluator --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cache_dir():
    d = Path(tempfile.mkdtemp(prefix="opforge-cpu-ext-cache-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def evaluator(cache_dir):
    ev = LocalEvaluator(build_cache=str(cache_dir))
    yield ev
    ev.close()


def _compiles(cache: BuildCache | None, name: str) -> list[dict]:
    assert cache is not None
    return [c for c in cache.compiles() if c["name"] == name]


@pytest.mark.slow
def test_an_extension_is_built_once_and_a_second_evaluation_only_loads_it(evaluator):
    task = load_task(TASK)
    first = evaluator.evaluate(task, load_candidate(HONEST), CFG)
    assert first.status == Status.OK and first.backend == "cpp", f"{first.status}: {first.reason}\n{first.log}"
    builds = _compiles(evaluator.build_cache, "relu_cpu_ext")
    assert [b["verdict"] for b in builds] == ["linked"]
    assert builds[0]["pid"] == os.getpid()  # built by the driver's builder, not inside the candidate's worker
    record = evaluator.build_cache.record(builds[0]["key"])
    assert record is not None and record["toolchain"]["mode"] == "cpu" and record["context"] == "evaluation"

    second = evaluator.evaluate(task, load_candidate(HONEST), CFG)
    assert second.status == Status.OK, f"{second.status}: {second.reason}"
    assert len(_compiles(evaluator.build_cache, "relu_cpu_ext")) == 1, "the compiler ran again"
    assert evaluator.build_cache.record(builds[0]["key"])["build_id"] == record["build_id"]


@pytest.mark.slow
def test_an_extension_calling_aten_is_still_refused_when_loaded_from_the_cache(evaluator):
    result = evaluator.evaluate(load_task(TASK), load_candidate(ATEN), CFG)
    assert result.status == Status.REJECTED, f"{result.status}: {result.reason}"
    assert "relu" in result.reason, result.reason
    assert len(_compiles(evaluator.build_cache, "relu_cpu_ext")) == 1  # the honest candidate's build, reused


@pytest.mark.slow
def test_a_compile_error_is_one_sentence_with_the_compiler_log_and_is_cached(evaluator):
    broken = Candidate.from_source(BROKEN.replace("FLAGS", '["-O2"]'))
    result = evaluator.evaluate(load_task(TASK), broken, CFG)
    assert result.status == Status.COMPILE_ERROR, f"{result.status}: {result.reason}"
    assert result.reason == "load_inline('opforge_test_broken_cpu'): the C++ sources do not compile"
    assert "error" in result.log and "main.cpp" in result.log, result.log
    again = evaluator.evaluate(load_task(TASK), broken, CFG)
    assert (again.status, again.reason, again.log) == (result.status, result.reason, result.log)
    assert [b["verdict"] for b in _compiles(evaluator.build_cache, "opforge_test_broken_cpu")] == ["compile_error"]


def test_a_flag_outside_the_allow_list_is_refused_before_any_compiler_runs(evaluator):
    plugin = Candidate.from_source(BROKEN.replace("FLAGS", '["-O2", "-fplugin=/tmp/evil.so"]'))
    before = len(evaluator.build_cache.compiles())
    result = evaluator.evaluate(load_task(TASK), plugin, CFG)
    assert result.status == Status.COMPILE_ERROR, f"{result.status}: {result.reason}"
    assert result.reason.startswith("load_inline('opforge_test_broken_cpu') cannot be built by the evaluator: the "
                                    "compile flag '-fplugin=/tmp/evil.so' is not allowed"), result.reason
    assert len(evaluator.build_cache.compiles()) == before


@pytest.mark.slow
def test_the_ahead_of_time_build_stage_builds_cpu_extensions_into_the_same_cache(evaluator, cache_dir):
    from evaluator.build.stage import prebuild
    summaries = prebuild(load_task(TASK), load_candidate(HONEST), CFG, "check", str(cache_dir))
    assert [(s["kind"], s["verdict"]) for s in summaries] == [("cpu_extension", "linked")], summaries
    assert len(_compiles(evaluator.build_cache, "relu_cpu_ext")) == 1  # once in all, whichever test built it
