"""`opforge model export`: the bench's best kernels for an extracted model as one package, usable two ways.

The package is `opforge export`'s (opforge/export/, docs/EXPORT.md: drop-in modules, torch.library ops, the manifest
with the evidence, its own tests), plus:

- `NAME.patch(model)` (model_patch.py, with model_groups.json): swaps the model's groups for the drop-in modules;
- `NAME.layers`: one Kernel Hub layer per module group (a stateless nn.Module whose forward adopts the kernelized
  module's parameters into the drop-in), for `kernels.kernelize`;
- `build/torch-cpu/`: the Kernel Hub's build layout (metadata.json, an `__init__.py` that imports the package copied
  beside it), so `kernels.get_local_kernel(DIR)` loads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from opforge.export import ExportError, ExportResult, export_package, suite_runs
from opforge.export.sources import forward_info
from opforge.export.writer import MARKER
from opforge.model.extraction import PLAN
from opforge.model.loading import ModelError
from store import Store

TEMPLATES = Path(__file__).resolve().parent / "templates"
HUB_VARIANT = "torch-cpu"


def export_model(store: Store, extracted: Path, out: Path, name: str,
                 min_speedup: float | None = 1.0) -> tuple[ExportResult, list[dict[str, Any]]]:
    """The package for an extracted model; `min_speedup`: only kernels at least that many times as fast as their
    group's PyTorch are swapped in (1 by default: a slower one would slow the model down; the left-out groups are
    named in the notes and run as PyTorch)."""
    plan_path = Path(extracted) / PLAN
    if not plan_path.is_file():
        raise ModelError(f"{extracted} holds no {PLAN}; run `opforge model extract MODEL.py --out {extracted}` first.")
    plan = json.loads(plan_path.read_text(encoding="utf-8"))
    run_ids, notes = suite_runs(store, str(Path(extracted).resolve()))
    result = export_package(store, run_ids, out, name=name, min_speedup=min_speedup,
                            source={"suite": str(Path(extracted).resolve()), "model": plan["model"]})
    operators = {op["name"]: op for op in result.operators}
    groups = []
    for entry in plan["groups"]:
        task = Path(entry["task"]).stem if entry.get("task") else None
        if not entry.get("seeded") or task not in operators:
            continue
        source = (Path(extracted) / entry["task"]).read_text(encoding="utf-8")
        names = forward_info(source).names or ("x",)
        groups.append({"operator": task, "class": operators[task]["class"], "paths": entry["paths"],
                       "args": list(names),
                       "init_args": entry["builtin"]["init_args"], "state": entry["state"],
                       "window": any("[" in p for p in entry["paths"]), "share": entry["share"]})
    if not groups:
        raise ExportError(f"No group of {extracted} has an exported kernel; run `opforge bench --suite {extracted} "
                          f"--coder tune --backend cpp` first.")
    _add_model_files(out, result.package, groups, [*notes, *result.notes])
    return result, groups


def _add_model_files(out: Path, package: str, groups: list[dict[str, Any]], notes: list[str]) -> None:
    pkg = out / package
    written = [f"{package}/model_patch.py", f"{package}/model_groups.json", f"{package}/layers.py"]
    shutil.copyfile(TEMPLATES / "model_patch.py", pkg / "model_patch.py")
    (pkg / "model_groups.json").write_text(json.dumps(groups, indent=1) + "\n", encoding="utf-8")
    (pkg / "layers.py").write_text(_layers_source(groups), encoding="utf-8")
    with (pkg / "__init__.py").open("a", encoding="utf-8") as init:
        init.write("\n# Added by `opforge model export`: the whole-model entry points.\n"
                   "from . import layers  # noqa: E402\nfrom .model_patch import patch  # noqa: E402\n")
    variant = out / "build" / HUB_VARIANT
    if variant.exists():
        shutil.rmtree(variant)
    shutil.copytree(pkg, variant / package, ignore=shutil.ignore_patterns("__pycache__"))
    metadata = {"id": f"{package}_opforge", "name": package.replace("_", "-"), "version": 1,
                "license": "Apache-2.0", "backend": {"type": "cpu"}, "python-depends": []}
    (variant / "metadata.json").write_text(json.dumps(metadata, indent=1) + "\n", encoding="utf-8")
    (variant / "__init__.py").write_text(_hub_init(package), encoding="utf-8")
    written += [p.relative_to(out).as_posix() for p in variant.rglob("*") if p.is_file()]
    marker = out / MARKER
    listed = json.loads(marker.read_text(encoding="utf-8"))
    listed["files"] = sorted(set(listed["files"]) | set(written))
    marker.write_text(json.dumps(listed, indent=1) + "\n", encoding="utf-8")


def _layers_source(groups: list[dict[str, Any]]) -> str:
    lines = ['"""Kernel Hub layers: stateless modules whose forward replaces a kernelized module\'s (see model_patch).',
             "", "Map a model class's `kernel_layer_name` to one of these with kernels.LocalLayerRepository or",
             'LayerRepository(layer_name=...). Inference only (has_backward = False)."""', "",
             "from __future__ import annotations", "", "from torch import nn", "",
             "from .model_patch import hub_forward", ""]
    done = set()
    for g in groups:
        if g["window"] or g["class"] in done:
            continue
        done.add(g["class"])
        lines += ["", f"class {g['class']}(nn.Module):", "    has_backward = False", "    can_torch_compile = True",
                  "", f"    def forward(self, {', '.join(g['args'])}):",
                  f"        return hub_forward({g['operator']!r}, self, ({', '.join(g['args'])},))", ""]
    return "\n".join(lines) + "\n"


def _hub_init(package: str) -> str:
    return f'''"""Kernel Hub entry of {package}: loads the package beside this file (or the installed one) under its own
name, so its modules import as `{package}.*`, and exposes its layers and `patch`."""

import importlib.util
import sys
from pathlib import Path

if "{package}" in sys.modules:
    _package = sys.modules["{package}"]
else:
    _here = Path(__file__).resolve().parent / "{package}"
    _spec = importlib.util.spec_from_file_location("{package}", _here / "__init__.py",
                                                   submodule_search_locations=[str(_here)])
    assert _spec is not None and _spec.loader is not None
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["{package}"] = _package
    _spec.loader.exec_module(_package)

layers = _package.layers
patch = _package.patch
'''
