"""`opforge model`: profile, extract, bench, export and the end-to-end bench on a tiny model, and the Kernel Hub round
trip with the real `kernels` package. Correctness only: nothing here asserts a time or a speedup."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from evaluator import default_evaluator, load_task
from opforge.model import load_model
from opforge.model.extraction import constructor_args, extract
from opforge.model.matching import builtin_tasks, find_match
from opforge.model.profiling import profile_model
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "models" / "tiny_model.py"
OPFORGE = [sys.executable, "-m", "opforge"]
PACKAGE = "tiny_model_kernels"


def test_profile_matches_a_user_module_and_a_sequential_window_to_the_seeded_task():
    prof = profile_model(load_model(TINY), runs=2)
    found = {tuple(g.paths): (g.match.task.label, g.match.constants) for g in prof.groups if g.match}
    assert found == {("0",): ("ops/linear_relu", {"M": 24, "K": 32, "N": 32}),
                     ("[1:3]",): ("ops/linear_relu", {"M": 24, "K": 32, "N": 16})}
    record = prof.to_json()
    assert record["groups"][0]["inputs"] == [{"shape": [24, 32], "dtype": "float32"}]
    assert any(op["op"] == "aten::addmm" for op in record["hot_ops"])


def test_a_group_computing_something_else_does_not_match():
    class LinearGelu(nn.Module):  # linear_relu's shapes and parameters, another activation: no match
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.silu(self.fc(x))

    module, x = LinearGelu().eval(), torch.randn(24, 32)
    with torch.no_grad():
        out = module(x)
    relu = tuple(t for t in builtin_tasks() if t.name == "linear_relu")
    assert find_match(module, (x,), out, relu) is None
    with torch.no_grad():
        relu_out = torch.relu(module.fc(x))
    assert find_match(nn.Sequential(module.fc, nn.ReLU()), (x,), relu_out, relu) is not None


def test_extracted_tasks_pass_the_task_check_and_carry_their_seed(tmp_path):
    loaded = load_model(TINY)
    plan = extract(loaded, profile_model(loaded, runs=1), tmp_path)
    assert {g["task"] for g in plan["groups"]} == {"linear_relu.py", "linear_relu_2.py"}
    for g in plan["groups"]:
        task = load_task(str(tmp_path / g["task"]))
        report = default_evaluator().check_task(task, "cpu")
        assert [s["shape"] for s in report.inputs[0]] == [[24, 32]]
        seed = (tmp_path / g["task"]).with_suffix("").with_suffix(".cpp.py")
        assert seed.read_text() == (ROOT / "benchmarks" / "ops" / "linear_relu.cpp.py").read_text()


def test_a_torch_nn_leaf_without_a_seed_becomes_a_task_for_an_llm_run(tmp_path):
    model_file = tmp_path / "rnn.py"
    model_file.write_text("import torch\nimport torch.nn as nn\n\n"
                          "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                          "        self.gru = nn.GRU(8, 12, 2, batch_first=True)\n\n"
                          "    def forward(self, x):\n        return self.gru(x)[0]\n\n"
                          "def get_inputs():\n    return [torch.randn(3, 5, 8)]\n")
    loaded = load_model(model_file)
    assert constructor_args(loaded.model.get_submodule("gru")) == {"input_size": 8, "hidden_size": 12, "num_layers": 2, "bias": True,
                                                  "batch_first": True, "dropout": 0.0, "bidirectional": False}
    plan = extract(loaded, profile_model(loaded, runs=1), tmp_path / "out")
    [group] = plan["groups"]
    assert group["task"] == "needs_llm/gru.py" and not group["seeded"]
    task = load_task(str(tmp_path / "out" / group["task"]))
    report = default_evaluator().check_task(task, "cpu")
    assert [o["shape"] for o in report.outputs[0]] == [[3, 5, 12], [2, 3, 12]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The tiny model extracted, benched by the tuner from the seeds, and exported (one chain for the tests below)."""
    root = tmp_path_factory.mktemp("model")
    suite, pkg, db = root / "suite", root / "pkg", f"sqlite:///{root / 'store.db'}"
    done = subprocess.run([*OPFORGE, "model", "extract", str(TINY), "--out", str(suite), "--json"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    # The profile's own output only: Kineto's start and stop lines are kept out of it
    assert "profiler_start" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    # No re-measurements (--confirm 0): the export below takes every correct kernel whatever its figure.
    done = subprocess.run([*OPFORGE, "bench", "--suite", str(suite), "--coder", "tune", "--backend", "cpp",
                           "--budget-per-task", "1", "--timing-s", "0.2", "--no-archive", "--runner", "local",
                           "--workers", "1", "--confirm", "0", "--db", db, "--json"],
                          capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    store = get_store(db)
    try:
        runs = store.list_runs()
        assert runs and not any(store.confirmations(r.id) for r in runs), "bench --confirm 0 re-measured a kernel"
    finally:
        store.close()
    # Every correct kernel (--min-speedup 0): these tests are about the patch's round trip, whatever the speed of a
    # one-candidate bench on a busy machine; the default's choice is tested below.
    done = subprocess.run([*OPFORGE, "model", "export", str(suite), "--out", str(pkg), "--name", PACKAGE, "--db", db,
                           "--min-speedup", "0", "--json"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    sys.path.insert(0, str(pkg))
    try:
        import importlib
        yield pkg, importlib.import_module(PACKAGE), json.loads(done.stdout)
    finally:
        sys.path.remove(str(pkg))


def test_patch_swaps_both_groups_and_matches_eager(exported):
    _, package, record = exported
    assert sorted(g["operator"] for g in record["groups"]) == ["linear_relu", "linear_relu_2"]
    eager = load_model(TINY).model
    patched = package.patch(load_model(TINY).model)
    assert isinstance(patched[2], nn.Identity) and type(patched[0]).__module__ == f"{PACKAGE}.modules"
    x = torch.randn(24, 32)
    with torch.no_grad():
        torch.testing.assert_close(patched(x), eager(x), atol=1e-4, rtol=1e-4)
    used = package.stats()
    assert all(set(paths) != {"reference"} for paths in used.values()), used


def test_by_default_the_export_swaps_in_only_kernels_faster_than_the_groups_pytorch(exported, tmp_path):
    """A kernel measured slower than its group's PyTorch would make the patched model slower: `opforge model export`
    leaves it out unless told `--min-speedup 0`, names it, and refuses in one sentence when nothing is left."""
    pkg, _, record = exported
    suite, db = pkg.parent / "suite", f"sqlite:///{pkg.parent / 'store.db'}"
    fastest = {op["name"]: max(k["speedup"] for k in op["kernels"]) for op in record["operators"]}
    done = subprocess.run([*OPFORGE, "model", "export", str(suite), "--out", str(tmp_path / "fast"), "--name",
                           "fast_kernels", "--db", db, "--json"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    faster = sorted(name for name, speedup in fastest.items() if speedup >= 1.0)
    if faster:
        assert done.returncode == 0, done.stderr[-2000:]
        assert sorted(g["operator"] for g in json.loads(done.stdout)["groups"]) == faster
    else:
        assert done.returncode != 0 and "--min-speedup 1" in done.stderr, done.stderr[-2000:]
    never = subprocess.run([*OPFORGE, "model", "export", str(suite), "--out", str(tmp_path / "none"), "--name",
                            "no_kernels", "--db", db, "--min-speedup", "1000"], capture_output=True, text=True,
                           timeout=600, cwd=ROOT)
    assert never.returncode != 0 and "--min-speedup 1000" in never.stderr and "Traceback" not in never.stderr


def test_a_call_outside_what_was_verified_falls_back_and_says_so_once(exported):
    _, package, _ = exported
    eager = load_model(TINY).model
    patched = package.patch(load_model(TINY).model)
    x = torch.randn(32, 24).t()  # the verified sizes, but not contiguous: the dispatcher runs the reference
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        first, again = patched(x), patched(x)
    torch.testing.assert_close(first, eager(x))
    torch.testing.assert_close(again, first)
    said = [w for w in caught if issubclass(w.category, package.FallbackWarning)]
    assert said and len(said) == len({str(w.message) for w in said})  # each reason once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doubled = package.patch(load_model(TINY).model.double())  # parameters unlike those extracted: left alone
    assert type(doubled.get_submodule("0")).__name__ == "Proj"
    assert any(issubclass(w.category, package.FallbackWarning) for w in caught)


def test_the_kernel_hub_loads_the_export_and_kernelize_uses_its_layer(exported):
    kernels = pytest.importorskip("kernels")
    pkg, package, record = exported
    hub = kernels.get_local_kernel(pkg, backend="cpu")
    module_group = next(g for g in record["groups"] if not g["window"])
    layer = getattr(hub.layers, module_group["class"])
    assert layer.forward.__code__.co_varnames[:2] == ("self", "x")
    model = load_model(TINY).model
    eager = load_model(TINY).model
    proj_class = type(model.get_submodule("0"))
    kernels.replace_kernel_forward_from_hub(proj_class, module_group["class"])
    mapping = {module_group["class"]: {"cpu": kernels.LocalLayerRepository(repo_path=pkg,
                                                                           layer_name=module_group["class"])}}
    before = package.stats().get(module_group["operator"], {})
    with kernels.use_kernel_mapping(mapping):
        model = kernels.kernelize(model, mode=kernels.Mode.INFERENCE, device="cpu")
    x = torch.randn(24, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), eager(x), atol=1e-4, rtol=1e-4)
    after = package.stats()[module_group["operator"]]
    assert sum(after.values()) > sum(before.values()) and set(after) != {"reference"}


def test_bench_model_script_compares_outputs_and_reports_each_variant(exported, tmp_path):
    pkg, _, _ = exported
    page = tmp_path / "report.html"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_model.py"), str(TINY), "--package", str(pkg),
                           "--name", PACKAGE, "--rounds", "2", "--no-compile", "--json", "--html", str(page)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures["times_ms"]) == {"eager", "patched"}
    assert figures["max_abs_error"]["patched"] <= figures["tolerance"]["atol"] + 1e-3
    assert {g["operator"] for g in figures["groups"]} == {"linear_relu", "linear_relu_2"}
    assert "<svg" in page.read_text() and "linear_relu_2" in page.read_text()


def test_a_gpt_block_matches_the_transformer_block_task_with_its_head_count_found():
    loaded = load_model(ROOT / "examples" / "models" / "minigpt.py")
    block = loaded.model.get_submodule("blocks.0")
    x = torch.randn(1, 16, 256)
    with torch.no_grad():
        out = block(x)
    block_task = tuple(t for t in builtin_tasks() if t.name == "transformer_block")
    match = find_match(block, (x,), out, block_task)
    assert match is not None
    assert match.constants == {"BATCH": 1, "SEQ": 16, "DIM": 256, "HEADS": 4} and match.init_args == [256, 4]
    setattr(block, "heads", 8)  # the same weights split into 8 heads: found as HEADS = 8, checked against the output
    with torch.no_grad():
        out8 = block(x)
    match8 = find_match(block, (x,), out8, block_task)
    assert match8 is not None and match8.init_args == [256, 8]
    setattr(block, "heads", 4)
    assert find_match(block, (x,), out8, block_task) is None  # an output this block does not compute: no match


def test_export_with_measure_ends_with_the_models_end_to_end_figure(exported, tmp_path):
    """The third of three commands: `opforge model export --measure` exports, then times the model that the
    extraction came from (named in model.json) against its patched self, outputs compared first."""
    pkg, _, _ = exported
    suite, db = pkg.parent / "suite", f"sqlite:///{pkg.parent / 'store.db'}"
    page = tmp_path / "e2e.html"
    done = subprocess.run([*OPFORGE, "model", "export", str(suite), "--out", str(tmp_path / "measured"), "--name",
                           "measured_kernels", "--db", db, "--min-speedup", "0", "--measure", "--rounds", "2",
                           "--no-compile", "--html", str(page), "--json"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)["end_to_end"]
    assert figures["model"] == str(TINY.resolve()) and set(figures["times_ms"]) == {"eager", "patched"}
    assert figures["max_abs_error"]["patched"] <= figures["tolerance"]["atol"] + 1e-3
    assert all(g["eager_ms"] > 0 and g["patched_ms"] > 0 for g in figures["groups"]), figures["groups"]
    assert "of eager&#x27;s time" in page.read_text()
    refused = subprocess.run([*OPFORGE, "model", "export", str(suite), "--out", str(tmp_path / "x"), "--db", db,
                              "--html", str(page)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert refused.returncode == 2 and "--html and --no-compile go with --measure" in refused.stderr


def test_captures_taken_in_turns_add_their_forwards_and_keep_the_first_inputs() -> None:
    """The end-to-end breakdown captures eager and patched in turns (`endtoend.breakdown`): each turn adds its
    forwards to the groups' times (a second capture used to add into the first one's runs, doubling each time)."""
    from opforge.model.groups import candidate_groups, capture

    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
    groups = candidate_groups(model)
    first, second = torch.ones(2, 8), torch.zeros(2, 8)
    capture(model, (first,), groups, runs=2)
    capture(model, (second,), groups, runs=3)
    assert {len(g.times_s) for g in groups} == {5}
    assert all(t > 0 for g in groups for t in g.times_s)
    linear = next(g for g in groups if g.path == "0")
    assert torch.equal(linear.inputs[0], first)  # what the first turn saw: the task's shapes come from it
