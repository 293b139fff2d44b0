"""The built-in suites ("tiny", "ops" and their union "all"): the loader finds them; every task is sound and not
degenerate (finite, varied, seed-dependent, every input and every weight matters, small odd-sized shape variants);
and every seed is a correct, tunable Triton kernel on every shape variant and both input distributions under the
interpreter; and every task has a native C seed (`NAME.cpp.py`) that is correct on the benchmark shape and every
variant, launches its C kernel and is tunable. One harness for every suite, so a new suite gets every check."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("benchmarks") is None:  # plain `pytest` without the project installed
    sys.path.insert(0, str(ROOT))

from agents.tuner import describe_tunables, neighbours  # noqa: E402
from benchmarks import SUITES_DIR, builtin_task, list_suites, seed_for, seed_path, suite_tasks  # noqa: E402
from evaluator.verify.policy import check_source  # noqa: E402

TINY_NAMES = {
    "relu", "gelu_tanh", "add_mul", "softmax", "layernorm", "rmsnorm", "row_sum", "matmul_bias", "mse_loss",
}
OPS_NAMES = {
    # activations and elementwise chains
    "silu", "leaky_relu_scale", "swiglu", "hardswish", "mish",
    # reductions
    "row_max", "row_mean", "col_sum", "l2_normalize",
    # softmax family
    "log_softmax", "softmax_temperature",
    # normalisation
    "batchnorm_inference", "group_norm", "gelu_bn_pool",
    # matmuls with epilogues, batched matmul, attention
    "matmul_gelu", "matmul_residual", "linear_relu", "bmm", "causal_attention",
    # convolution and pooling
    "conv2d_3x3", "conv1d", "max_pool2d", "avg_pool2d",
    # losses
    "cross_entropy", "huber_loss", "kl_div",
    # fused blocks
    "mlp_gelu", "rmsnorm_residual", "transformer_block",
    # backward passes
    "relu_backward", "softmax_backward", "layernorm_backward",
}
TINY = suite_tasks("tiny")
OPS = suite_tasks("ops")
BUILTIN = TINY + OPS


def task_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"
DEFAULT_TOL = 1e-4
OUTPUT_DTYPES = (torch.float32, torch.int64)


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_task(path: Path) -> ModuleType:
    return load_module(path, f"suite_task_{path.parent.name}_{path.stem}")


@contextmanager
def overridden(module: ModuleType, overrides: dict):
    saved = {key: getattr(module, key) for key in overrides}
    for key, value in overrides.items():
        setattr(module, key, value)
    try:
        yield module
    finally:
        for key, value in saved.items():
            setattr(module, key, value)


def variants(module: ModuleType) -> list[dict]:
    return [{}, *getattr(module, "SHAPES", [])]


def as_outputs(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def tolerance(module: ModuleType) -> dict:
    tol = getattr(module, "TOLERANCE", None) or {}
    return {"atol": tol.get("atol", DEFAULT_TOL), "rtol": tol.get("rtol", DEFAULT_TOL)}


def close(a: torch.Tensor, b: torch.Tensor, tol: dict) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.allclose(a, b, **tol)


def reference_outputs(module: ModuleType, seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        return as_outputs(model(*inputs))


# --- the loader ------------------------------------------------------------------------------------------------


def test_tiny_suite_holds_the_expected_tasks_each_with_a_seed():
    assert "tiny" in list_suites()
    assert {p.stem for p in TINY} == TINY_NAMES
    for task in TINY:
        assert task.parent == SUITES_DIR / "tiny"
        assert seed_for(task) == task.with_name(f"{task.stem}.seed.py")


def test_suite_tasks_reads_any_folder_in_natural_order_skipping_seeds_and_init(tmp_path):
    for name in ["10_b.py", "2_a.py", "2_a.seed.py", "2_a.cpp.py", "__init__.py", "notes.txt"]:
        (tmp_path / name).write_text("")
    tasks = suite_tasks(str(tmp_path))
    assert [p.name for p in tasks] == ["2_a.py", "10_b.py"]
    assert seed_for(tasks[0]) == tmp_path / "2_a.seed.py"
    assert seed_for(tasks[1]) is None
    assert suite_tasks(tmp_path) == tasks
    assert seed_path(tasks[0], "cpp") == tmp_path / "2_a.cpp.py"
    assert seed_path(tasks[1], "cpp") is None and seed_path(tasks[0], "cuda") is None


def test_seed_path_finds_each_backends_seed_by_task_name_or_path():
    relu = builtin_task("relu")
    assert seed_path("relu", "triton") == seed_path(relu, "triton") == relu.with_name("relu.seed.py")
    assert seed_path("tiny/relu", "cpp") == seed_path(str(relu), "cpp") == relu.with_name("relu.cpp.py")
    assert seed_path("relu", "cuda") is None  # no built-in CUDA seeds yet
    with pytest.raises(ValueError, match="Unknown backend 'rocm'"):
        seed_path("relu", "rocm")
    with pytest.raises(ValueError, match="no built-in task called 'nosuch'"):
        seed_path("nosuch", "cpp")


def test_suite_tasks_rejects_unknown_names_and_folders_without_tasks(tmp_path):
    with pytest.raises(ValueError, match="neither a built-in suite nor a folder.*tiny"):
        suite_tasks("no-such-suite")
    (tmp_path / "only.seed.py").write_text("")
    with pytest.raises(ValueError, match="holds no task files"):
        suite_tasks(str(tmp_path))


def test_ops_suite_holds_the_expected_tasks_each_with_a_seed():
    assert "ops" in list_suites()
    assert {p.stem for p in OPS} == OPS_NAMES
    for task in OPS:
        assert task.parent == SUITES_DIR / "ops"
        assert seed_for(task) == task.with_name(f"{task.stem}.seed.py")


def test_all_suite_names_every_builtin_task_once():
    assert "all" in list_suites()
    folders = [name for name in list_suites() if name != "all"]
    everything = suite_tasks("all")
    assert everything == [task for name in folders for task in suite_tasks(name)]
    assert set(everything) == set(OPS) | set(TINY)
    names = [task.stem for task in everything]
    assert len(names) == len(set(names)) >= 40, "task names must be unique across the built-in suites"


def test_builtin_task_finds_ops_tasks_by_bare_qualified_or_all_name():
    assert builtin_task("silu") == SUITES_DIR / "ops" / "silu.py"
    assert builtin_task("ops/silu") == builtin_task("all/silu.py") == builtin_task("silu")
    assert builtin_task("all/softmax") == SUITES_DIR / "tiny" / "softmax.py"
    assert builtin_task("softmax") == builtin_task("tiny/softmax") == builtin_task("softmax.py")
    with pytest.raises(ValueError):
        builtin_task("nosuchsuite/softmax")
    with pytest.raises(ValueError):
        builtin_task("tiny/silu")
    with pytest.raises(ValueError, match="no built-in task called 'siluu'") as err:
        builtin_task("siluu")
    assert "ops/silu" in str(err.value) and "tiny/softmax" in str(err.value)


def test_every_seed_passes_the_static_policy_and_has_a_tunable():
    for task in BUILTIN:
        source = seed_for(task).read_text()
        assert check_source(source) == [], f"{task.stem}: {check_source(source)}"
        assert "@triton.jit" in source, task.stem
        assert describe_tunables(source), f"{task.stem}: the tuner finds nothing to tune"


# What a native seed's Python may call on torch: allocation (and the constructor's parameter initialisation, as in
# the task). Everything the forward computes is done in C.
NATIVE_TORCH_CALLS = {"empty", "empty_like", "randn", "rand"}


def test_every_task_has_an_honest_tunable_native_seed():
    for task in BUILTIN:
        path = seed_path(task, "cpp")
        assert path == task.with_name(f"{task.stem}.cpp.py"), f"{task.stem}: no native seed"
        source = path.read_text()
        assert check_source(source) == [], f"{task.stem}: {check_source(source)}"
        assert "from evaluator.native import load_c" in source and "#pragma omp" in source, task.stem
        calls = set(re.findall(r"\btorch\.(\w+)\(", source))
        assert calls <= NATIVE_TORCH_CALLS, f"{task.stem}: computes with torch ({calls - NATIVE_TORCH_CALLS})"
        assert "functional" not in source and "triton" not in source, task.stem
        assert describe_tunables(source), f"{task.stem}: the tuner finds nothing to tune in the native seed"
        assert neighbours(source, 1), f"{task.stem}: the native seed's tunables have no values to try"


# --- the tasks -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_path", BUILTIN, ids=task_id)
def test_task_declares_small_shape_variants_including_an_odd_size(task_path):
    module = load_task(task_path)
    shapes = module.SHAPES
    assert isinstance(shapes, list) and shapes
    for overrides in shapes:
        assert overrides and all(hasattr(module, key) for key in overrides), f"unknown global in {overrides}"
    assert any(value % 2 == 1 for overrides in shapes for value in overrides.values())
    # The interpreter's variants, where a task has its own: the same names, an odd size among them too.
    small = getattr(module, "INTERPRETER_SHAPES", shapes)
    assert isinstance(small, list) and small and [sorted(v) for v in small] == [sorted(v) for v in shapes]
    assert any(value % 2 == 1 for overrides in small for value in overrides.values())
    benchmark_shapes = [tuple(x.shape) for x in module.get_inputs()]
    for overrides in variants(module):
        with overridden(module, overrides):
            inputs = module.get_inputs()
        assert inputs and all(isinstance(x, torch.Tensor) and x.device.type == "cpu" for x in inputs)
        assert all(x.dtype in (torch.float32, torch.int64) for x in inputs)
        assert any(x.dtype == torch.float32 for x in inputs)
        if overrides:  # get_inputs must read the globals at call time, or the variant tests nothing new
            assert [tuple(x.shape) for x in inputs] != benchmark_shapes, f"{overrides} left the input shapes alone"
            # variants exist to be cheap under the interpreter: the benchmark shape carries the size
            assert sum(x.numel() for x in inputs) <= 600_000, f"{overrides} is not a small variant"


@pytest.mark.parametrize("task_path", BUILTIN, ids=task_id)
def test_task_output_is_finite_varied_and_depends_on_the_seed(task_path):
    module = load_task(task_path)
    tol = tolerance(module)
    for overrides in variants(module):
        with overridden(module, overrides):
            outs = reference_outputs(module, seed=0)
            again = reference_outputs(module, seed=0)
            other = reference_outputs(module, seed=1)
        where = f"{task_path.stem} {overrides or 'benchmark shape'}"
        for out, out_again, out_other in zip(outs, again, other, strict=True):
            assert out.dtype in OUTPUT_DTYPES, where
            assert torch.isfinite(out.double()).all(), where
            # Within the tolerance the evaluator compares with (integers exactly): unseeded randomness moves an output
            # by far more, while an eager parallel reduction's order may move it slightly from one call to the next
            # (kl_div's sum over 2M terms did in two CI runs on a 2-core machine: 3.9708 both times, not bit for bit).
            assert close(out, out_again, tol), f"{where}: not reproducible under the same seed"
            assert not close(out, torch.zeros_like(out), tol), f"{where}: output ~ 0"
            if out.numel() > 1:
                spread = (out.max() - out.min()).item()
                assert spread > 1e-3 * max(1.0, out.abs().max().item()), f"{where}: output is near-constant"
            assert not close(out, out_other, tol), f"{where}: output ignores the seed"


def _perturbed(x: torch.Tensor) -> torch.Tensor:
    if x.is_floating_point():
        return x + 0.5 * (x.abs().mean() + 1e-3) * torch.randn_like(x)
    shifted = torch.roll(x, 1)
    assert not torch.equal(shifted, x), "an integer input is constant, so rolling it changes nothing"
    return shifted


@pytest.mark.parametrize("task_path", BUILTIN, ids=task_id)
def test_every_input_and_every_weight_influences_the_output(task_path):
    """A kernel that ignores an input, a parameter or a buffer must not be able to pass."""
    module = load_task(task_path)
    tol = tolerance(module)
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    torch.manual_seed(1)
    inputs = module.get_inputs()

    def run(args) -> list[torch.Tensor]:
        with torch.no_grad():
            return as_outputs(model(*args))

    def differs(outs: list[torch.Tensor], base: list[torch.Tensor]) -> bool:
        return any(not close(a, b, tol) for a, b in zip(outs, base, strict=True))

    base = run(inputs)
    torch.manual_seed(2)
    for i, x in enumerate(inputs):
        changed = [_perturbed(y) if j == i else y for j, y in enumerate(inputs)]
        assert differs(run(changed), base), f"{task_path.stem}: input {i} does not influence the output"
    weights = [*model.named_parameters(), *model.named_buffers()]
    for name, tensor in weights:
        if not tensor.is_floating_point():
            continue
        saved = tensor.detach().clone()
        with torch.no_grad():
            tensor.copy_(_perturbed(saved))
        try:
            assert differs(run(inputs), base), f"{task_path.stem}: {name} does not influence the output"
        finally:
            with torch.no_grad():
                tensor.copy_(saved)


# --- the seeds (interpreted subprocesses, the tasks shared among them) ------------------------------------------

TRITON_COUNTER = r"""
import importlib.util, json, os, sys, traceback
assert os.environ.get("TRITON_INTERPRET") == "1"
import torch
import triton
from triton.runtime.interpreter import InterpretedFunction

launches = 0
_run = InterpretedFunction.run
def counting_run(self, *args, **kwargs):
    global launches
    if not kwargs.get("warmup"):
        launches += 1
    return _run(self, *args, **kwargs)
InterpretedFunction.run = counting_run
interpreted = True
"""

# Native seeds run at the task's own (native-scale) benchmark shape; their C calls are counted by evaluator.native's
# launch counter, the one the evaluator's worker reads.
NATIVE_COUNTER = r"""
import importlib.util, json, os, sys, traceback
import torch
import evaluator.native as native

class Launches(dict):
    def __setitem__(self, key, value):
        global launches
        launches += 1
        super().__setitem__(key, value)

launches = 0
native._launches = Launches()
interpreted = False
"""

SEED_CHECK = r"""
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

def outputs(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]

def normal_like(x):  # the evaluator's second distribution: every float input redrawn as N(0, 1) * 4
    return torch.randn(x.shape, dtype=x.dtype) * 4.0 if x.is_floating_point() else x

config = json.loads(sys.argv[1])
results = {}  # seed path -> one row per (shape variant, distribution)
for task_path, seed_path in config["pairs"]:
    name = os.path.basename(task_path)[:-3]
    task, rows = load(task_path, "task_" + name), []
    seed = load(seed_path, "seed_" + name)
    tol = {"atol": __TOL__, "rtol": __TOL__, **(getattr(task, "TOLERANCE", None) or {})}
    interpreter_shape = getattr(task, "INTERPRETER_SHAPE", {}) if interpreted else {}  # the interpreter's shape
    variants = getattr(task, "INTERPRETER_SHAPES", None) if interpreted else None  # and its variants, as the
    variants = getattr(task, "SHAPES", []) if variants is None else variants  # evaluator's (task_runtime.py)
    shapes = [interpreter_shape, *variants]
    base = {key: getattr(task, key) for shape in shapes for key in shape}
    plan = [({}, "task")] if config["benchmark_shape"] else []
    plan += [(dict(v), dist) for v in variants for dist in ("task", "normal")]
    for overrides, dist in plan:
        row = {"variant": overrides, "distribution": dist}
        try:
            for key, value in {**base, **(overrides or interpreter_shape)}.items():
                setattr(task, key, value)
            init = task.get_init_inputs()
            torch.manual_seed(0)
            model = task.Model(*init)
            torch.manual_seed(0)
            model_new = seed.ModelNew(*init)
            model_new.load_state_dict(model.state_dict())  # strict: same parameter and buffer names
            torch.manual_seed(1)
            inputs = task.get_inputs()
            if dist == "normal":
                inputs = [normal_like(x) for x in inputs]
            copies = [x.clone() for x in inputs]
            with torch.no_grad():
                ref = outputs(model(*copies))
                launches = 0
                out = outputs(model_new(*inputs))
            row["launches"] = launches
            row["same_count"] = len(out) == len(ref)
            row["same_shape"] = row["same_count"] and all(tuple(a.shape) == tuple(b.shape) for a, b in zip(out, ref))
            row["same_dtype"] = row["same_count"] and all(a.dtype == b.dtype for a, b in zip(out, ref))
            row["inputs_untouched"] = all(torch.equal(a, b) for a, b in zip(inputs, copies))
            row["max_abs_error"] = max(
                (a.double() - b.double()).abs().max().item() for a, b in zip(out, ref)
            ) if row["same_shape"] else None
            row["close"] = row["same_shape"] and row["same_dtype"] and all(
                torch.allclose(a, b, **tol) if b.is_floating_point() else torch.equal(a, b) for a, b in zip(out, ref)
            )
        except Exception:
            row["error"] = traceback.format_exc()
        rows.append(row)
    results[seed_path] = rows
print(json.dumps(results))
""".replace("__TOL__", repr(DEFAULT_TOL))
COUNTERS = {"triton": TRITON_COUNTER, "cpp": NATIVE_COUNTER}


def run_seed_check(pairs: list[tuple[Path, Path]], benchmark_shape: bool = True, workers: int = 1,
                   timeout_s: float = 900, backend: str = "triton") -> dict:
    """Check each (task, seed) pair in `workers` subprocesses running side by side (Triton seeds interpreted)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"} if backend == "triton" else dict(os.environ)
    # Untraced by CI's coverage: these processes run the seeds (Triton's interpreter, in Python) and the check above,
    # not the product's code, and tracing them cost the interpreted fixture 57 s against 25 s (2026-11-29).
    env = {k: v for k, v in env.items() if not k.startswith(("COVERAGE_PROCESS_", "COV_CORE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    shares = [pairs[i::workers] for i in range(workers)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", COUNTERS[backend] + SEED_CHECK,
             json.dumps({"pairs": [[str(t), str(s)] for t, s in share], "benchmark_shape": benchmark_shape})],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for share in shares if share
    ]
    results: dict = {}
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        assert proc.returncode == 0, stderr[-4000:]
        results.update(json.loads(stdout.strip().splitlines()[-1]))
    return results


@pytest.fixture(scope="module")
def seed_results() -> dict:
    # Most costly first, so that dealing them out round-robin gives the workers similar loads.
    pairs = [(task, seed_for(task)) for task in sorted(BUILTIN, key=lambda p: -p.stat().st_size)]
    return run_seed_check(pairs, workers=max(1, min(4, os.cpu_count() or 1)))


@pytest.mark.slow
@pytest.mark.parametrize("task_path", BUILTIN, ids=task_id)
def test_seed_matches_task_on_every_shape_under_the_interpreter(task_path, seed_results):
    module = load_task(task_path)
    rows = seed_results[str(seed_for(task_path))]
    shapes = getattr(module, "INTERPRETER_SHAPES", module.SHAPES)  # the evaluator's variants under the interpreter
    assert [row["variant"] for row in rows] == [{}] + [v for v in shapes for _ in ("task", "normal")]
    for row in rows:
        where = f"{task_path.stem} {row['variant'] or 'benchmark shape'} ({row['distribution']} inputs)"
        assert "error" not in row, f"{where}:\n{row['error']}"
        assert row["launches"] >= 1, f"{where}: the seed launched no Triton kernel"
        assert row["same_count"] and row["same_shape"] and row["same_dtype"], where
        assert row["inputs_untouched"], f"{where}: the seed modified its inputs"
        assert row["close"], f"{where}: max abs error {row['max_abs_error']}"
        assert math.isfinite(row["max_abs_error"])


@pytest.fixture(scope="module")
def native_results() -> dict:
    # One worker: each seed's OpenMP threads already use the cores.
    return run_seed_check([(task, seed_path(task, "cpp")) for task in BUILTIN], backend="cpp")


@pytest.mark.slow
@pytest.mark.parametrize("task_path", BUILTIN, ids=task_id)
def test_native_seed_matches_task_on_the_benchmark_shape_and_every_variant(task_path, native_results):
    module = load_task(task_path)
    rows = native_results[str(seed_path(task_path, "cpp"))]
    assert [row["variant"] for row in rows] == [{}] + [v for v in module.SHAPES for _ in ("task", "normal")]
    for row in rows:
        where = f"{task_path.stem} native {row['variant'] or 'benchmark shape'} ({row['distribution']} inputs)"
        assert "error" not in row, f"{where}:\n{row['error']}"
        assert row["launches"] >= 1, f"{where}: the seed called no C function"
        assert row["same_count"] and row["same_shape"] and row["same_dtype"], where
        assert row["inputs_untouched"], f"{where}: the seed modified its inputs"
        assert row["close"], f"{where}: max abs error {row['max_abs_error']}"


def test_native_seeds_portable_paths_match_the_task_on_every_variant(tmp_path):
    """Seeds with an AVX-512 path keep a portable one for CPUs without it; this machine runs the vector path, so the
    portable one is checked here by building each seed with every test of `__AVX512F__` reading false."""
    pairs = []
    for task in BUILTIN:
        source = seed_path(task, "cpp").read_text()
        if "#ifdef __AVX512F__" in source:
            portable = tmp_path / f"{task.stem}.cpp.py"
            # Every test of the macro (#ifdef, #ifndef, defined()) reads as on a CPU without AVX-512: the GEMM seeds
            # define their portable vector type under #ifndef.
            portable.write_text(source.replace("__AVX512F__", "PORTABLE_CHECK_NO_AVX512"))
            pairs.append((task, portable))
    assert len(pairs) >= 15  # the row, norm, reduction and transcendental seeds
    results = run_seed_check(pairs, benchmark_shape=False, backend="cpp")
    for task, portable in pairs:
        for row in results[str(portable)]:
            where = f"{task.stem} portable path {row['variant']} ({row['distribution']} inputs)"
            assert "error" not in row, f"{where}:\n{row['error']}"
            assert row["launches"] >= 1 and row["close"], f"{where}: max abs error {row.get('max_abs_error')}"


def test_native_seed_check_notices_a_torch_only_seed_and_a_wrong_kernel(tmp_path):
    """The native check can fail: a 'seed' that calls no C function, and a C kernel off by one ulp-free constant."""
    relu = builtin_task("relu")
    torch_only = tmp_path / "torch_only.cpp.py"
    torch_only.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    )
    source = seed_path(relu, "cpp").read_text()
    vector, scalar = "_mm512_max_ps(_mm512_setzero_ps(), v)", "x[i] : (x[i] != x[i] ? x[i] : 0.0f)"
    assert vector in source and scalar in source  # the AVX-512 path and the portable one: both made leaky
    leaky = tmp_path / "leaky.cpp.py"
    leaky.write_text(source.replace(vector, "_mm512_max_ps(_mm512_mul_ps(_mm512_set1_ps(0.01f), v), v)")
                     .replace(scalar, "x[i] : 0.01f * x[i]"))
    results = run_seed_check([(relu, torch_only), (relu, leaky)], benchmark_shape=False, backend="cpp")
    assert all(row["launches"] == 0 and row["close"] for row in results[str(torch_only)])
    assert all(row["launches"] >= 1 and row["same_shape"] and not row["close"] for row in results[str(leaky)])


def test_seed_check_notices_a_kernel_free_seed_and_wrong_or_swapped_tuple_outputs(tmp_path):
    """The check itself can fail: a plain-PyTorch 'seed', a Triton seed whose second output is wrong and one that
    returns its two outputs swapped."""
    entropy = builtin_task("cross_entropy")
    torch_only = tmp_path / "torch_only.seed.py"
    torch_only.write_text(
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, logits, targets):\n        return F.cross_entropy(logits, targets)\n"
    )
    row_max = builtin_task("row_max")
    source = seed_for(row_max).read_text()
    returned, stored = "return values.view(x.shape[:-1]), indices.view(x.shape[:-1])", "first.to(tl.int64)"
    assert returned in source and stored in source
    off_by_one = tmp_path / "off_by_one.seed.py"
    off_by_one.write_text(source.replace(stored, "(first + 1).to(tl.int64)"))
    swapped = tmp_path / "swapped.seed.py"
    swapped.write_text(source.replace(returned, "return indices.view(x.shape[:-1]), values.view(x.shape[:-1])"))
    results = run_seed_check([(entropy, torch_only), (row_max, off_by_one), (row_max, swapped)],
                             benchmark_shape=False)
    assert all(row["launches"] == 0 and row["close"] for row in results[str(torch_only)])
    assert all(row["launches"] >= 1 and row["same_dtype"] and not row["close"] for row in results[str(off_by_one)])
    assert all(row["launches"] >= 1 and row["same_shape"] and not row["same_dtype"] and not row["close"]
               for row in results[str(swapped)])
