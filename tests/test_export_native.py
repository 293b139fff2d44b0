"""`opforge export` of a native CPU (`cpp`) run: the package carries its own `load_c` (no opforge in the fresh
environment), builds the C kernel at first use, dispatches CPU tensors of proven sizes to it and others to the
reference, passes its own tests (torch.compile of the drop-in module included), and without a compiler says so in one
sentence and uses the reference."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from store_fixtures import CPU, H100, make_task, ok_result
from test_export import _fresh_venv

from evaluator import Candidate
from opforge.export.compile_evidence import add_to_manifest, trace_record
from opforge.export.native_vendor import rewrite_kernel, vendored_loader
from opforge.export.selection import select
from opforge.export.sources import kernel_info
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "tests" / "honest" / "relu_openmp_c.py"
PACKAGE = "relu_native"

CHECK = """
import json, sys, warnings
import torch
import {package} as pkg
try:
    import evaluator
except ImportError:
    pass
else:
    sys.exit("opforge's evaluator is importable in the fresh environment")
m = pkg.Relu()
x = torch.randn(16, 512)                        # the evaluated sizes: the C kernel
assert torch.equal(m(x), torch.relu(x))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = torch.randn(2, 16, 512)                 # a third dimension, never evaluated: the reference
    assert torch.equal(m(y), torch.relu(y))
compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
assert torch.equal(compiled(x), torch.relu(x))  # torch.compile traces a module that calls the op
print(json.dumps({{"stats": pkg.stats(), "native": pkg._native.__file__,
                  "warnings": [(w.category.__name__, str(w.message)) for w in caught]}}))
"""


NO_COMPILER = """
import warnings
import torch
import {package} as pkg
m = pkg.Relu()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(m(torch.randn(2, 16, 512)).shape)     # never evaluated: the reference, compiler or not
print([str(w.message) for w in caught if w.category is pkg.FallbackWarning])
try:
    m(torch.randn(16, 512))                     # evaluated: the C kernel must be built, and cannot be
except pkg.CompilerMissingError as exc:
    print("raised:", exc)
"""


@pytest.mark.slow
def test_a_native_run_exports_a_package_that_builds_its_c_kernel_in_a_fresh_venv(tmp_path):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {**os.environ, "OPFORGE_NATIVE_BUILD_CACHE": str(tmp_path / "cache-opforge")}
    run = subprocess.run([*OPFORGE, "optimize", str(TASK), "--backend", "cpp", "--seed-kernel", str(SEED),
                          "--budget", "1", "--runner", "local", "--confirm", "0", "--timing-s", "0.2", "--db", url,
                          "--json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=400, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    run_id = json.loads(run.stdout.strip().splitlines()[-1])["run_id"]
    out = tmp_path / "pkg"
    done = subprocess.run([*OPFORGE, "export", str(run_id), "--out", str(out), "--name", PACKAGE, "--db", url],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / PACKAGE / "manifest.json").read_text())
    [kernel] = manifest["kernels"]
    assert kernel["language"] == "cpp" and kernel["vendored_load_c"]
    assert "from evaluator" not in (out / PACKAGE / "kernels" / f"{kernel['id']}.py").read_text()
    traced = manifest["torch_compile"]  # recorded at export: a model calling the op traced whole, no graph break
    assert traced["traced"] and traced["device"] == "cpu", traced
    [op] = traced["operators"]
    assert op["operator"] == "relu" and op["fullgraph"] and op["graph_breaks"] == 0 and op["matches_reference"]
    assert op["ops_in_graph"] == [f"{PACKAGE}.relu.default"] and op["fallbacks"] == [], op

    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(out), "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), "-q"], check=True, timeout=300)
    [wheel] = wheels.glob("*.whl")
    venv = _fresh_venv(tmp_path)
    python = str(venv / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, timeout=300)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET", "CC", "CXX")}
    clean["OPFORGE_NATIVE_BUILD_CACHE"] = str(tmp_path / "cache-package")  # built here, at first use
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()

    check = subprocess.run([python, "-c", CHECK.format(package=PACKAGE)], cwd=cwd, env=clean, capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    seen = json.loads(check.stdout.strip().splitlines()[-1])
    assert seen["native"].startswith(str(venv))
    assert seen["stats"]["relu"][kernel["id"]] >= 1 and seen["stats"]["relu"]["reference"] >= 1
    fallbacks = [msg for category, msg in seen["warnings"] if category == "FallbackWarning"]
    assert len(fallbacks) == 1 and "x has 3 dimensions" in fallbacks[0], seen["warnings"]
    assert any((tmp_path / "cache-package").rglob("*.so"))  # the package built its kernel itself

    selftest = subprocess.run([python, "-m", f"{PACKAGE}.selftest"], cwd=cwd, env=clean, capture_output=True,
                              text=True, timeout=400)
    assert selftest.returncode == 0, selftest.stdout[-4000:] + selftest.stderr[-2000:]
    assert " passed" in selftest.stdout, selftest.stdout[-2000:]

    no_compiler = {**clean, "PATH": str(tmp_path / "empty-path"), "OPFORGE_NATIVE_BUILD_CACHE": str(tmp_path / "c3")}
    bare = subprocess.run([python, "-c", NO_COMPILER.format(package=PACKAGE)], cwd=cwd, env=no_compiler,
                          capture_output=True, text=True, timeout=300)
    assert bare.returncode == 0, bare.stderr[-2000:]
    lines = bare.stdout.strip().splitlines()
    assert lines[0] == "torch.Size([2, 16, 512])" and "x has 3 dimensions" in lines[1], lines  # never proven: reference
    assert lines[2] == (f"raised: {PACKAGE}.relu: the native kernel {kernel['id']}, verified for these arguments on "
                        "this CPU, is built at first use, but no C compiler was found (looked for $CC, gcc and cc); "
                        "install one (e.g. `apt install gcc` or `dnf install gcc`) or set CC to a compiler's path"), lines


def test_the_compile_record_says_why_when_the_package_cannot_be_traced(tmp_path):
    (tmp_path / "broken_pkg").mkdir()
    (tmp_path / "broken_pkg" / "__init__.py").write_text("raise ImportError('this package is damaged')\n")
    record = trace_record(tmp_path, "broken_pkg")
    assert record["traced"] is False and "status 1" in record["error"] and "this package is damaged" in record["error"]
    (tmp_path / "broken_pkg" / "manifest.json").write_text('{"format": "opforge-export/1"}\n')
    add_to_manifest(tmp_path, "broken_pkg", record)
    saved = json.loads((tmp_path / "broken_pkg" / "manifest.json").read_text())
    assert saved["format"] == "opforge-export/1" and saved["torch_compile"]["traced"] is False


def test_a_task_with_a_gpu_run_and_a_cpu_run_exports_a_kernel_for_each_device(tmp_path):
    """The CUDA (or Triton) kernel where a run has one, the native one for CPU tensors: one pick per device."""
    url = f"sqlite:///{tmp_path / 'hand.db'}"
    native_source = SEED.read_text()
    store = get_store(url)
    try:
        task = store.add_task(make_task("relu", body="# relu\n"))
        runs = []
        for source, result in (("x = 1  # a GPU kernel", dataclasses.replace(ok_result(3.0), backend="triton")),
                               (native_source, dataclasses.replace(ok_result(1.5, device=CPU), backend="cpp"))):
            run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 1})
            cand, _ = store.add_candidate(run.id, task.id, Candidate.from_source(source))
            store.add_result(cand.id, run.id, result)
            runs.append(run.id)
        picks = {p.device: p for p in select(store, runs).picks}
    finally:
        store.close()
    assert set(picks) == {H100.name, CPU.name}
    assert kernel_info(picks[CPU.name].candidate.source).language == "cpp"
    assert kernel_info(picks[H100.name].candidate.source).language != "cpp"


def test_the_vendored_loader_needs_no_opforge_and_the_kernel_imports_it():
    files = vendored_loader("pkg")
    assert set(files) == {"pkg/_native/__init__.py", "pkg/_native/spec.py", "pkg/_native/build.py",
                          "pkg/_native/entry_cache.py", "pkg/_native/verdict.py"}
    assert not any("evaluator" in line and "import" in line and not line.startswith("#")
                   for text in files.values() for line in text.splitlines())
    rewritten = rewrite_kernel(SEED.read_text(), "pkg")
    assert "from pkg._native import load_c" in rewritten and "evaluator" not in rewritten.split("SOURCE")[0]
    assert rewritten.replace("from pkg._native import ", "from evaluator.native import ") == SEED.read_text()
