"""The built-in "tiny" suite: its loader, its tasks (sound and not degenerate) and its seeds (correct Triton)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
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

from benchmarks import SUITES_DIR, builtin_task, list_suites, seed_for, suite_tasks  # noqa: E402

TINY_NAMES = {
    "relu", "gelu_tanh", "add_mul", "softmax", "layernorm", "rmsnorm", "row_sum", "matmul_bias", "mse_loss",
}
TINY = suite_tasks("tiny")
ATOL = RTOL = 1e-4


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def reference_output(module: ModuleType, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_inputs()
    with torch.no_grad():
        return model(*inputs)


def variants(module: ModuleType) -> list[dict]:
    return [{}, *getattr(module, "SHAPES", [])]


# --- the loader ------------------------------------------------------------------------------------------------


def test_tiny_suite_holds_the_expected_tasks_each_with_a_seed():
    assert "tiny" in list_suites()
    assert {p.stem for p in TINY} == TINY_NAMES
    for task in TINY:
        assert task.parent == SUITES_DIR / "tiny"
        assert seed_for(task) == task.with_name(f"{task.stem}.seed.py")


def test_builtin_task_finds_tasks_by_name_and_lists_names_when_unknown():
    assert builtin_task("softmax") == SUITES_DIR / "tiny" / "softmax.py"
    assert builtin_task("tiny/softmax") == builtin_task("softmax.py")
    with pytest.raises(ValueError, match="no built-in task called 'softmaxx'") as err:
        builtin_task("softmaxx")
    assert "tiny/softmax" in str(err.value) and "tiny/matmul_bias" in str(err.value)
    with pytest.raises(ValueError):
        builtin_task("nosuchsuite/softmax")


def test_suite_tasks_reads_any_folder_in_natural_order_skipping_seeds_and_init(tmp_path):
    for name in ["10_b.py", "2_a.py", "2_a.seed.py", "__init__.py", "notes.txt"]:
        (tmp_path / name).write_text("")
    tasks = suite_tasks(str(tmp_path))
    assert [p.name for p in tasks] == ["2_a.py", "10_b.py"]
    assert seed_for(tasks[0]) == tmp_path / "2_a.seed.py"
    assert seed_for(tasks[1]) is None
    assert suite_tasks(tmp_path) == tasks


def test_suite_tasks_rejects_unknown_names_and_folders_without_tasks(tmp_path):
    with pytest.raises(ValueError, match="neither a built-in suite nor a folder.*tiny"):
        suite_tasks("no-such-suite")
    (tmp_path / "only.seed.py").write_text("")
    with pytest.raises(ValueError, match="holds no task files"):
        suite_tasks(str(tmp_path))


# --- the tasks -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_path", TINY, ids=lambda p: p.stem)
def test_task_declares_fp32_shape_variants_including_an_odd_size(task_path):
    module = load_module(task_path, f"tiny_task_{task_path.stem}")
    shapes = module.SHAPES
    assert isinstance(shapes, list) and shapes
    for overrides in shapes:
        assert overrides and all(hasattr(module, key) for key in overrides), f"unknown global in {overrides}"
    assert any(value % 2 == 1 for overrides in shapes for value in overrides.values())
    benchmark_shapes = [tuple(x.shape) for x in module.get_inputs()]
    for overrides in variants(module):
        with overridden(module, overrides):
            inputs = module.get_inputs()
        assert inputs and all(x.dtype == torch.float32 and x.device.type == "cpu" for x in inputs)
        if overrides:  # get_inputs must read the globals at call time, or the variant tests nothing new
            assert [tuple(x.shape) for x in inputs] != benchmark_shapes, f"{overrides} left the input shapes alone"


@pytest.mark.parametrize("task_path", TINY, ids=lambda p: p.stem)
def test_task_output_is_finite_varied_and_depends_on_the_seed(task_path):
    module = load_module(task_path, f"tiny_task_{task_path.stem}")
    for overrides in variants(module):
        with overridden(module, overrides):
            out = reference_output(module, seed=0)
            again = reference_output(module, seed=0)
            other = reference_output(module, seed=1)
        where = f"{task_path.stem} {overrides or 'benchmark shape'}"
        assert out.dtype == torch.float32, where
        assert torch.isfinite(out).all(), where
        assert torch.equal(out, again), f"{where}: not reproducible under the same seed"
        assert not torch.allclose(out, torch.zeros_like(out), atol=ATOL, rtol=RTOL), f"{where}: output ~ 0"
        if out.numel() > 1:
            spread = (out.max() - out.min()).item()
            assert spread > 1e-3 * max(1.0, out.abs().max().item()), f"{where}: output is near-constant"
        assert not torch.allclose(out, other, atol=ATOL, rtol=RTOL), f"{where}: output ignores the seed"


# --- the seeds (one interpreted subprocess for all of them) -----------------------------------------------------

SEED_CHECK = r"""
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

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

results = {}  # seed path -> one row per shape variant
for task_path, seed_path in zip(sys.argv[1::2], sys.argv[2::2]):
    name = os.path.basename(task_path)[:-3]
    task, rows = load(task_path, "task_" + name), []
    seed = load(seed_path, "seed_" + name)
    base = {key: getattr(task, key) for shape in getattr(task, "SHAPES", []) for key in shape}
    for overrides in [{}] + list(getattr(task, "SHAPES", [])):
        row = {"variant": overrides}
        try:
            for key, value in {**base, **overrides}.items():
                setattr(task, key, value)
            init = task.get_init_inputs()
            torch.manual_seed(0)
            model = task.Model(*init)
            torch.manual_seed(0)
            model_new = seed.ModelNew(*init)
            model_new.load_state_dict(model.state_dict())  # strict: same parameter names
            torch.manual_seed(1)
            inputs = task.get_inputs()
            copies = [x.clone() for x in inputs]
            with torch.no_grad():
                ref = model(*copies)
                launches = 0
                out = model_new(*inputs)
            row["launches"] = launches
            row["same_shape"] = tuple(out.shape) == tuple(ref.shape)
            row["same_dtype"] = out.dtype == ref.dtype
            row["inputs_untouched"] = all(torch.equal(a, b) for a, b in zip(inputs, copies))
            row["max_abs_error"] = (out - ref).abs().max().item() if row["same_shape"] else None
            row["close"] = row["same_shape"] and torch.allclose(out, ref, atol=__TOL__, rtol=__TOL__)
        except Exception:
            row["error"] = traceback.format_exc()
        rows.append(row)
    results[seed_path] = rows
print(json.dumps(results))
""".replace("__TOL__", repr(ATOL))


@pytest.fixture(scope="module")
def seed_results() -> dict:
    args = []
    for task in TINY:
        args += [str(task), str(seed_for(task))]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SEED_CHECK, *args], capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("task_path", TINY, ids=lambda p: p.stem)
def test_seed_matches_task_on_every_shape_under_the_interpreter(task_path, seed_results):
    module = load_module(task_path, f"tiny_task_{task_path.stem}")
    rows = seed_results[str(seed_for(task_path))]
    assert [row["variant"] for row in rows] == variants(module)
    for row in rows:
        where = f"{task_path.stem} {row['variant'] or 'benchmark shape'}"
        assert "error" not in row, f"{where}:\n{row['error']}"
        assert row["launches"] >= 1, f"{where}: the seed launched no Triton kernel"
        assert row["same_shape"] and row["same_dtype"], where
        assert row["inputs_untouched"], f"{where}: the seed modified its inputs"
        assert row["close"], f"{where}: max abs error {row['max_abs_error']}"
        assert math.isfinite(row["max_abs_error"])


def test_seed_check_notices_a_seed_that_launches_no_kernel_or_is_wrong(tmp_path):
    """The subprocess check itself can fail: a plain-PyTorch 'seed' and a wrong Triton seed are caught."""
    task = builtin_task("relu")
    torch_only = tmp_path / "torch_only.seed.py"
    torch_only.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n"
    )
    wrong = tmp_path / "wrong.seed.py"
    wrong.write_text(seed_for(task).read_text().replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.001)"))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", SEED_CHECK, str(task), str(torch_only), str(task), str(wrong)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(row["launches"] == 0 and row["close"] for row in results[str(torch_only)])
    assert all(row["launches"] >= 1 and not row["close"] for row in results[str(wrong)])
