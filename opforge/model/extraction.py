"""`opforge model extract`: each hot group as a KernelBench task file at the model's shapes.

- A group that matches a built-in task (matching.py) becomes that task's file with the model's constants, its native
  seed copied beside it as `NAME.cpp.py`: `opforge bench --suite DIR --coder tune --backend cpp` starts from it.
- A torch.nn leaf module without a seed (an LSTM, a convolution...) becomes a task whose Model builds the same
  module class with the same constructor arguments and whose get_inputs() draws the captured shapes; it goes into
  `DIR/needs_llm/`, the suite an LLM run (`--coder llm`) takes, since the offline tuner has nothing to start from.

`DIR/model.json` records, per group, the model file, the paths the group occupies, the task, its constructor
arguments and the order its parameters load in: what `opforge model export` needs to build `patch(model)`.
"""

from __future__ import annotations

import inspect
import re
import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from opforge.model.loading import LoadedModel, ModelError
from opforge.model.matching import with_constants
from opforge.model.profiling import HotGroup, Profile

PLAN = "model.json"
LLM_DIR = "needs_llm"


def extract(loaded: LoadedModel, prof: Profile, out: Path) -> dict[str, Any]:
    out = Path(out)
    if out.exists() and any(p.name != PLAN and not p.name.startswith(".") for p in out.iterdir()) \
            and not (out / PLAN).is_file():
        raise ModelError(f"{out} is not empty and holds no earlier extraction; give --out a new or empty directory.")
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    used: set[str] = set()
    for group in prof.groups:
        entry = group.to_json()
        name = _unique(group.name, used)
        entry["name"] = name
        entry["state"] = [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in _state(group.groups[0].module)]
        if group.match is not None:
            task_path = out / f"{name}.py"
            source = group.match.task.path.read_text(encoding="utf-8")
            header = (f"# Extracted by `opforge model extract` from {loaded.path.name}: {', '.join(group.paths)} "
                      f"({group.kind}), {group.share:.0%} of the model's time.\n# The built-in task "
                      f"{group.match.task.label} at the model's shapes; its native seed is beside this file.\n")
            task_path.write_text(header + with_constants(source, group.match.constants), encoding="utf-8")
            seed = group.match.task.seed_path.read_text(encoding="utf-8")
            (out / f"{name}.cpp.py").write_text(seed, encoding="utf-8")
            entry.update(task=task_path.name, suite=".", seeded=True)
        else:
            leaf_source = leaf_task_source(loaded, group)
            if leaf_source is None:
                entry.update(task=None, seeded=False, note="not a torch.nn module with plain constructor arguments; "
                                                           "write its task by hand")
                entries.append(entry)
                continue
            (out / LLM_DIR).mkdir(exist_ok=True)
            task_path = out / LLM_DIR / f"{name}.py"
            task_path.write_text(leaf_source, encoding="utf-8")
            entry.update(task=f"{LLM_DIR}/{task_path.name}", suite=LLM_DIR, seeded=False)
        entries.append(entry)
    plan = {"model": str(loaded.path.resolve()), "model_ms": prof.model_ms, "device": prof.device,
            "groups": entries}
    (out / PLAN).write_text(json.dumps(plan, indent=1) + "\n", encoding="utf-8")
    return plan


def _unique(base: str, used: set[str]) -> str:
    name, n = base, 1
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    return name


def _state(module: nn.Module) -> list[Tensor]:
    return [t for _, t in module.named_parameters()] + [t for _, t in module.named_buffers()]


def constructor_args(module: nn.Module) -> dict[str, Any] | None:
    """A torch.nn module's constructor arguments read back from its attributes (None where one is not plain)."""
    args: dict[str, Any] = {}
    for name, param in _init_parameters(type(module)):
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("device", "dtype"):
            continue
        if not hasattr(module, name):
            if param.default is inspect.Parameter.empty:
                return None
            continue
        value = getattr(module, name)
        if name == "bias" and (value is None or isinstance(value, Tensor)):
            value = value is not None
        if isinstance(value, Tensor) or not _plain(value):
            return None
        args[name] = value
    return _accepted(type(module), args, module)


def _init_parameters(cls: type) -> list[tuple[str, inspect.Parameter]]:
    """The first constructor in the class's MRO with named parameters (nn.LSTM's is RNNBase's: `*args, **kwargs`)."""
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        params = list(inspect.signature(vars(klass)["__init__"]).parameters.items())
        if any(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self" for n, p in params):
            return params
    return []


def _accepted(cls: type, args: dict[str, Any], module: nn.Module) -> dict[str, Any] | None:
    """Drop arguments the class itself does not take (RNNBase's `mode` for nn.LSTM), then check that the rebuilt
    module holds parameters of the same shapes."""
    args = dict(args)
    for _ in range(len(args) + 1):
        try:
            with torch.device("meta"):
                rebuilt = cls(**args)
        except (TypeError, ValueError) as exc:  # "unexpected keyword 'mode'", "proj_size ... only for LSTM"
            bad = next((k for k in args if re.search(rf"\b{re.escape(k)}\b", str(exc))), None)
            if bad is None:
                return None
            del args[bad]
            continue
        same = [tuple(t.shape) for t in _state(rebuilt)] == [tuple(t.shape) for t in _state(module)]
        return args if same else None
    return None


def _plain(value: Any) -> bool:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return True
    return isinstance(value, (tuple, list)) and all(_plain(v) for v in value)


def leaf_task_source(loaded: LoadedModel, group: HotGroup) -> str | None:
    module = group.groups[0].module
    if group.groups[0].is_window or not type(module).__module__.startswith("torch.nn"):
        return None
    args = constructor_args(module)
    inputs = group.groups[0].inputs
    if args is None or not inputs or not all(isinstance(x, Tensor) for x in inputs):
        return None
    call = ", ".join(f"{k}={v!r}" for k, v in args.items())
    names = [f"x{i}" for i in range(len(inputs))]
    draws = ", ".join(f"torch.randn({', '.join(str(s) for s in x.shape)}, dtype=torch.{str(x.dtype).split('.')[-1]})"
                      for x in inputs)
    flat = not isinstance(group.groups[0].output, Tensor)
    body = ("        return tuple(torch.utils._pytree.tree_leaves(self.layer({args})))" if flat
            else "        return self.layer({args})").format(args=", ".join(names))
    return f'''"""Extracted by `opforge model extract` from {loaded.path.name}: {', '.join(group.paths)} ({group.kind}),
{group.share:.0%} of the model's time. No built-in task computes this, so there is no seed kernel: an LLM run
(`opforge bench --suite THIS_FOLDER --coder llm`) writes one. The reference is the model's own layer class.
"""

import torch
import torch.nn as nn
import torch.utils._pytree


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.{type(module).__name__}({call})

    def forward(self, {", ".join(f"{n}: torch.Tensor" for n in names)}):
{body}


def get_inputs():
    return [{draws}]


def get_init_inputs():
    return []
'''
