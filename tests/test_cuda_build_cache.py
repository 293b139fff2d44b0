"""The CUDA build stage: load_inline calls recorded in the sandbox, compiled once by the sandboxed trusted builder,
cached by digest and reused; compile errors keep their log; candidate code can neither write the cache nor read the
user's files into a compiler log; RayRunner builds in Ray CPU tasks. On CPU with a real nvcc (the GPU test links and
loads a real extension and runs only where CUDA is present)."""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from evaluator import Candidate, EvalConfig, Status, load_candidate, load_task
from evaluator.build.cache import BuildCache, cache_root
from evaluator.build.cuda import BuildSpec
from evaluator.driver.evaluate import LocalEvaluator
from evaluator.sandbox.bwrap import bwrap_available

TESTS = Path(__file__).resolve().parent
TASK = TESTS / "tasks" / "relu.py"
RELU_CUDA = TESTS / "honest" / "relu_cuda.py"
HAS_NVCC = shutil.which("nvcc") is not None
HAS_CUDA = torch.cuda.is_available()
HAS_BWRAP = bwrap_available()
CFG = EvalConfig(device="cpu", compile_timeout_s=400, run_timeout_s=30, max_timing_s=0.3, trials=1, profile=False)
needs_nvcc = pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap (bwrap) does not work here: only process "
                                                         "isolation, under which candidate code runs as the user")

# A small CUDA ReLU whose CUDA part includes only load_inline's implicit headers (faster to compile than
# torch/extension.h); NAME, THREADS and BODY are replaced per test.
LIGHT = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void relu_kernel(const float* x, float* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    BODY
}

at::Tensor relu_cuda(at::Tensor x) {
    auto xc = x.contiguous();
    auto out = at::empty_like(xc);
    int64_t n = xc.numel();
    relu_kernel<<<(n + THREADS - 1) / THREADS, THREADS>>>(xc.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

ext = load_inline(name="NAME", cpp_sources="at::Tensor relu_cuda(at::Tensor x);", cuda_sources=cuda_source,
                  functions=["relu_cuda"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_cuda(x)
'''
GOOD_BODY = "if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f;"
CXX20_PREFIX = "template <typename T> concept FourBytes = sizeof(T) == 4;\nstatic_assert(FourBytes<float>);\n"


def light(name: str, threads: int = 256, body: str = GOOD_BODY, prefix: str = "") -> Candidate:
    source = LIGHT.replace("NAME", name).replace("THREADS", str(threads)).replace("BODY", body)
    return Candidate.from_source(source.replace('cuda_source = r"""\n', f'cuda_source = r"""\n{prefix}'))


def _scratch(prefix: str) -> Path:
    """A folder outside /tmp and the home directory where possible (bubblewrap hides those anyway), so that what
    keeps it out of the sandboxes' sight is the build cache's own protection."""
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    except OSError:
        return Path(tempfile.mkdtemp(prefix=prefix))


@pytest.fixture(scope="module")
def cache_dir():
    d = _scratch("opforge-build-cache-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def evaluator(cache_dir):
    ev = LocalEvaluator(build_cache=str(cache_dir))
    yield ev
    ev.close()


def _compiles(cache: BuildCache, name: str) -> list[dict]:
    return [c for c in cache.compiles() if c["name"] == name]


# -- fast: specs, keys and the cache location --------------------------------------------------------------------------
def test_only_plain_load_inline_calls_are_cacheable():
    def spec(**kwargs):
        return BuildSpec.from_call(kwargs.pop("name", "ext"), "int f();", "__global__ void k() {}", kwargs)

    base = spec(functions=["f"], extra_cuda_cflags=["-O3", "--use_fast_math", "-DBLOCK=128"], verbose=True)
    assert base is not None and base.functions == (("f", "f"),)
    assert spec(functions=["f"]).digest != base.digest  # flags are part of the key
    assert BuildSpec.from_json(base.to_json()) == base
    assert spec(extra_include_paths=["/etc"]) is None
    assert spec(build_directory="/tmp/x") is None
    assert spec(extra_cuda_cflags=["-Xcompiler", "-fplugin=/tmp/evil.so"]) is None
    assert spec(extra_ldflags=["-L/home/user", "-lfoo"]) is None
    assert spec(name="ext -DX") is None  # the name lands in -DTORCH_EXTENSION_NAME and a file name
    assert spec(functions={"f": 'doc"); system("x'}) is None
    with pytest.raises(ValueError):
        BuildSpec.from_json({**base.to_json(), "extra_cflags": ["-include/etc/shadow"]})
    lenient = BuildSpec.from_call("ext", "", "x", {"extra_cuda_cflags": ["-O2", "-G", "-Xptxas"]}, strict=False)
    assert lenient is not None and lenient.extra_cuda_cflags == ("-O2",)  # the private check drops the rest


def test_cache_location_follows_argument_environment_and_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("OPFORGE_CUDA_BUILD_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == (tmp_path / "xdg" / "opforge" / "cuda-builds").resolve()
    monkeypatch.setenv("OPFORGE_CUDA_BUILD_CACHE", str(tmp_path / "env"))
    assert cache_root() == (tmp_path / "env").resolve()
    assert cache_root(tmp_path / "arg") == (tmp_path / "arg").resolve()
    monkeypatch.setenv("OPFORGE_CUDA_BUILD_CACHE", "off")
    assert cache_root() is None and BuildCache.open() is None


# -- CPU, real nvcc ----------------------------------------------------------------------------------------------------
@pytest.mark.slow
@needs_nvcc
def test_cuda_build_is_compiled_once_and_reused_by_a_second_evaluation(evaluator):
    # The light ReLU, not tests/honest/relu_cuda.py: the same load_inline path, without torch/extension.h (its compile
    # took 142 s of CI's 2-core host; test_cheats_beside.py builds the honest one). With the C++20 concept of the
    # test below, which evaluates this same source: one compile for both (whichever runs first builds it).
    task, candidate = load_task(TASK), light("opforge_test_relu_cuda", prefix=CXX20_PREFIX)
    first = evaluator.evaluate(task, candidate, CFG)
    assert first.status == Status.RUNTIME_ERROR and "no CUDA device" in first.reason, first.reason
    builds = _compiles(evaluator.build_cache, "opforge_test_relu_cuda")
    assert [b["verdict"] for b in builds] == ["compiled"]
    record = evaluator.build_cache.record(builds[0]["key"])
    assert record is not None and record["verdict"] == "compiled" and record["context"] == "evaluation"

    second = evaluator.evaluate(task, candidate, CFG)
    assert (second.status, second.reason) == (first.status, first.reason)
    assert len(_compiles(evaluator.build_cache, "opforge_test_relu_cuda")) == 1, "the compiler ran again"
    assert evaluator.build_cache.record(builds[0]["key"])["build_id"] == record["build_id"]


@pytest.mark.slow
@needs_nvcc
def test_compile_error_is_reported_with_the_compiler_log_and_cached(evaluator):
    task = load_task(TASK)
    broken = light("opforge_test_broken_relu", body="if (i < n) out[i] = x[i] > 0.0f ? x[i] : 0.0f")  # no ';'
    result = evaluator.evaluate(task, broken, CFG)
    assert result.status == Status.COMPILE_ERROR, result.reason
    assert result.reason == "the CUDA sources do not compile"
    assert "error" in result.log and "cuda.cu" in result.log, result.log
    again = evaluator.evaluate(task, broken, CFG)
    assert (again.status, again.log) == (result.status, result.log)
    assert [b["verdict"] for b in _compiles(evaluator.build_cache, "opforge_test_broken_relu")] == ["compile_error"]


@pytest.mark.slow
@needs_nvcc
def test_the_compile_check_accepts_the_cxx_standard_of_torchs_own_recipe(evaluator):
    # A C++20 concept in the CUDA source: torch's load_inline builds it (-std=c++20); a C++17 check refused it. The
    # source of the compile-once test above, so that the suite compiles it once.
    cxx20 = light("opforge_test_relu_cuda", prefix=CXX20_PREFIX)
    result = evaluator.evaluate(load_task(TASK), cxx20, CFG)
    assert result.status == Status.RUNTIME_ERROR and "no CUDA device" in result.reason, (result.reason, result.log)
    assert [b["verdict"] for b in _compiles(evaluator.build_cache, "opforge_test_relu_cuda")] == ["compiled"]


@pytest.mark.slow
@needs_nvcc
@needs_bwrap
def test_candidate_code_cannot_write_or_see_the_cache(evaluator, cache_dir):
    before = {p: p.read_bytes() for p in cache_dir.rglob("*") if p.is_file() and p.name != "compiles.log"}
    vandal = f'''
import io, os
CACHE = {str(cache_dir)!r}
print("cache visible:", os.path.isdir(os.path.join(CACHE, "v1")))
for where, _, files in os.walk(CACHE):
    for f in files + ["poison.txt"]:
        try:
            with io.open(os.path.join(where, f), "w") as out:
                out.write("poisoned")
        except OSError:
            pass
try:
    os.makedirs(os.path.join(CACHE, "v1", "entries", "ff", "f" * 64), exist_ok=True)
except OSError:
    pass
'''
    # The first test's candidate (built already when the module runs whole), led by the vandal's code.
    source = light("opforge_test_relu_cuda", prefix=CXX20_PREFIX).source.replace("import torch\n",
                                                                                  vandal + "import torch\n", 1)
    result = evaluator.evaluate(load_task(TASK), Candidate.from_source(source), CFG)
    assert result.status == Status.RUNTIME_ERROR, f"{result.status}: {result.reason}"
    assert "cache visible: False" in result.log, result.log
    after = {p: p.read_bytes() for p in cache_dir.rglob("*") if p.is_file() and p.name != "compiles.log"}
    assert not [p for p in after if p.name == "poison.txt"]
    assert all(after.get(p) == data for p, data in before.items()), "a cache file was changed"
    assert not (cache_dir / "v1" / "entries" / "ff").exists()


@pytest.mark.slow
@needs_nvcc
@needs_bwrap
@pytest.mark.parametrize("target", ["canary", "/etc/shadow"])
def test_included_private_files_never_reach_the_compiler_log(evaluator, target):
    secret_dir = _scratch("opforge-include-canary-")
    try:
        if target == "canary":
            canary = "OPFORGE_CANARY_" + secrets.token_hex(12)
            path = secret_dir / "secret.h"
            path.write_text(f"{canary} is a private line of the user's\n")
            secrets_in_file = [canary]
        else:
            path = Path(target)
            try:
                secrets_in_file = [line for line in path.read_text().splitlines() if len(line) > 4]
            except OSError:
                pytest.skip(f"{target} is not readable here, so it cannot leak either")
        name = f"opforge_test_include_{secrets.token_hex(4)}"
        result = evaluator.evaluate(load_task(TASK), light(name, prefix=f'#include "{path}"\n'), CFG)
        assert result.status == Status.COMPILE_ERROR, f"{result.status}: {result.reason}"
        dumped = result.reason + result.log
        assert not any(s in dumped for s in secrets_in_file), "a private file's content reached the result"
        assert "No such file" in result.log or "cannot open" in result.log, result.log
        assert [b["verdict"] for b in _compiles(evaluator.build_cache, name)] == ["compile_error"]  # the builder's
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_runtime():
    ray = pytest.importorskip("ray")
    import logging
    ray.init(num_cpus=3, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
             object_store_memory=128 * 2**20)
    yield ray
    ray.shutdown()


@pytest.mark.slow
@needs_nvcc
def test_ray_runner_builds_candidates_in_parallel_cpu_tasks(ray_runtime, tmp_path):
    from evaluator.driver.ray_runner import RayRunner
    cache = str(tmp_path / "cache")
    runner = RayRunner(workers=1, build_cache=cache)  # one CPU actor; the other two CPUs take the build tasks
    try:
        task = load_task(TASK)
        names = ["opforge_test_ray_relu_a", "opforge_test_ray_relu_b"]
        futures = [runner.submit(task, light(names[0], 256), CFG), runner.submit(task, light(names[1], 128), CFG)]
        results = [f.result(timeout=900) for f in futures]
        assert [r.status for r in results] == [Status.RUNTIME_ERROR] * 2, [r.reason for r in results]
        assert all("no CUDA device" in r.reason for r in results)
        assert runner.stats().builds == 2
        actor_pid = ray_runtime.get(runner.actors[0].pid.remote())
    finally:
        runner.close()
    builds = [c for c in BuildCache(Path(cache)).compiles()]
    assert sorted(b["name"] for b in builds) == names  # each built once, and the evaluations found them
    assert {b["context"] for b in builds} == {"prebuild"}
    assert all(b["pid"] not in (os.getpid(), actor_pid) for b in builds)  # in Ray tasks, not the GPU/CPU actor
    assert max(b["started"] for b in builds) < min(b["finished"] for b in builds), "the builds did not overlap"


# -- GPU ---------------------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_gpu_evaluation_loads_the_cached_extension(tmp_path):
    ev = LocalEvaluator(build_cache=str(tmp_path / "cache"))
    try:
        cfg = EvalConfig(device="cuda", compile_timeout_s=400, run_timeout_s=60, max_timing_s=0.5, profile=False)
        task, candidate = load_task(TASK), load_candidate(RELU_CUDA)
        first = ev.evaluate(task, candidate, cfg)
        assert first.status == Status.OK, f"{first.status}: {first.reason}\n{first.log}"
        builds = _compiles(ev.build_cache, "opforge_test_relu_cuda")
        assert [b["verdict"] for b in builds] == ["linked"]
        record = ev.build_cache.record(builds[0]["key"])
        assert record and (ev.build_cache.entry(builds[0]["key"]) / record["artifact"]).is_file()
        second = ev.evaluate(task, candidate, cfg)
        assert second.status == Status.OK, second.reason
        assert len(_compiles(ev.build_cache, "opforge_test_relu_cuda")) == 1, "the compiler ran again"
    finally:
        ev.close()
