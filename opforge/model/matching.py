"""Does a group of the model compute what a built-in task computes? Then its seed kernel is a start.

A built-in task (benchmarks/: a KernelBench file with a native seed `NAME.cpp.py` beside it) is written in module
constants (`M = 1024`, `DIM = 384`: those its SHAPES entries set). A group matches the task when constants exist under
which, all checked in this order:

1. the task's `get_inputs()` has the group's input count, ranks, sizes and dtypes (constants that size an input are
   read off the group's inputs: each is probed with a distinct prime on the meta device to see where it lands);
2. the task's `Model(*get_init_inputs())` has parameters and buffers of the group's shapes and dtypes, in order
   (constants that size no input, such as a head count, are tried among the integers the group's modules hold);
3. the two run the same compute ops (the ATen ops each forward dispatches, views and copies aside: the reference's op
   signature, as the archive relates tasks by their compute ops);
4. the task's Model, given the group's parameters, reproduces the group's captured output on its captured inputs within
   the task's tolerance.

The extracted task is then the built-in file with those constants (so its seed runs unchanged), and the package's
`patch(model)` loads the group's parameters into the task's module by that same order.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.suite import SEED_SUFFIXES, list_suites, suite_tasks
from evaluator.correctness import tolerance_for

PRIMES = (1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061)
MAX_UNKNOWN = 2          # constants not read off the inputs, tried by combination
NOT_COMPUTE = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "reshape", "detach", "alias",
               "unsqueeze", "squeeze", "clone", "contiguous", "as_strided", "slice", "select", "split", "unbind",
               "split_with_sizes", "empty", "empty_like", "lift_fresh", "_to_copy", "copy_", "dropout",
               "_reshape_alias", "unflatten", "flatten", "chunk", "narrow", "zeros", "ones", "full", "arange"}


@dataclass(frozen=True)
class BuiltinTask:
    name: str                     # "transformer_block"
    label: str                    # "ops/transformer_block"
    path: Path
    seed_path: Path
    constants: tuple[str, ...]


@dataclass(frozen=True)
class Match:
    task: BuiltinTask
    constants: dict[str, int]
    init_args: list[Any]
    ops: tuple[str, ...]


@lru_cache(maxsize=1)
def builtin_tasks() -> tuple[BuiltinTask, ...]:
    """Every built-in task with a native CPU seed beside it."""
    found = []
    for suite in list_suites():
        if suite == "all":
            continue
        for path in suite_tasks(suite):
            seed = path.with_name(path.stem + SEED_SUFFIXES["cpp"])
            if not seed.is_file():
                continue
            module = _load(path)
            keys: list[str] = []
            for shape in getattr(module, "SHAPES", []) or []:
                keys += [k for k in shape if k not in keys]
            found.append(BuiltinTask(path.stem, f"{suite}/{path.stem}", path, seed, tuple(keys)))
    return tuple(found)


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"opforge_builtin_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_match(module: nn.Module, inputs: tuple[Any, ...], output: Any,
               tasks: tuple[BuiltinTask, ...] | None = None) -> Match | None:
    if not inputs or not all(isinstance(x, Tensor) for x in inputs) or not isinstance(output, Tensor):
        return None
    state = _state(module)
    for task in tasks if tasks is not None else builtin_tasks():
        try:
            found = _match_task(task, module, inputs, output, state)
        except Exception:  # noqa: BLE001 - a task that cannot be instantiated this way simply does not match
            found = None
        if found is not None:
            return found
    return None


def _state(module: nn.Module) -> list[Tensor]:
    return [t for _, t in module.named_parameters()] + [t for _, t in module.named_buffers()]


def _match_task(task: BuiltinTask, module: nn.Module, inputs: tuple[Tensor, ...], output: Tensor,
                state: list[Tensor]) -> Match | None:
    mod = _load(task.path)
    probe = dict(zip(task.constants, PRIMES))
    if len(probe) < len(task.constants):
        return None
    with _constants(mod, probe), torch.device("meta"):
        probe_inputs = mod.get_inputs()
    if len(probe_inputs) != len(inputs) or not all(isinstance(p, Tensor) for p in probe_inputs):
        return None
    known: dict[str, int] = {}
    by_prime = {p: k for k, p in probe.items()}
    for p, x in zip(probe_inputs, inputs):
        if p.dim() != x.dim() or p.dtype != x.dtype:
            return None
        for want, got in zip(p.shape, x.shape):
            key = by_prime.get(int(want))
            if key is not None and known.setdefault(key, int(got)) != int(got):
                return None
    unknown = [k for k in task.constants if k not in known]
    if len(unknown) > MAX_UNKNOWN:
        return None
    for values in itertools.product(*[_integers(module)] * len(unknown)):
        constants = {**known, **dict(zip(unknown, values))}
        found = _try(task, mod, constants, module, inputs, output, state)
        if found is not None:
            return found
    return None


def _try(task: BuiltinTask, mod: ModuleType, constants: dict[str, int], module: nn.Module,
         inputs: tuple[Tensor, ...], output: Tensor, state: list[Tensor]) -> Match | None:
    with _constants(mod, constants):
        with torch.device("meta"):
            want_inputs = mod.get_inputs()
            init_args = list(mod.get_init_inputs())
            meta_ref = mod.Model(*init_args)
        if [tuple(x.shape) for x in want_inputs] != [tuple(x.shape) for x in inputs]:
            return None
        ref_state = _state(meta_ref)
        if [(tuple(t.shape), t.dtype) for t in ref_state] != [(tuple(t.shape), t.dtype) for t in state]:
            return None
        torch.manual_seed(0)
        ref = mod.Model(*init_args).eval()
        load_ordered(ref, module)
        ops = compute_ops(module, inputs)  # on the real device: kernels chosen by device (SDPA) dispatch other ops
        if ops != compute_ops(ref, inputs):
            return None
        with torch.no_grad():
            got = ref(*inputs)
    if not isinstance(got, Tensor) or got.shape != output.shape:
        return None
    atol, rtol = _tolerance(mod, output.dtype)
    if not torch.allclose(got, output, atol=atol, rtol=rtol):
        return None
    return Match(task=task, constants=constants, init_args=init_args, ops=ops)


def _tolerance(mod: ModuleType, dtype: torch.dtype) -> tuple[float, float]:
    literal = getattr(mod, "TOLERANCE", None)
    if isinstance(literal, dict) and "atol" in literal and "rtol" in literal:
        return float(literal["atol"]), float(literal["rtol"])
    return tolerance_for(dtype, None)


def load_ordered(target: nn.Module, source: nn.Module) -> None:
    """Copy `source`'s parameters then buffers into `target`'s, by position (names may differ)."""
    with torch.no_grad():
        for dst, src in zip(_state(target), _state(source), strict=True):
            dst.copy_(src)


def _integers(module: nn.Module) -> list[int]:
    """Small integers a module holds (a head count, a group count) and its parameters' sizes: candidate constants."""
    values: set[int] = set()
    for m in module.modules():
        for value in vars(m).values():
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1 << 16:
                values.add(value)
    for t in _state(module):
        values.update(int(s) for s in t.shape)
    return sorted(values)


class _OpNames(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        if name not in NOT_COMPUTE:
            self.names.add(name)
        return func(*args, **(kwargs or {}))


def compute_ops(module: nn.Module, inputs: tuple[Any, ...]) -> tuple[str, ...]:
    """The ATen compute ops one forward dispatches (no autograd: as inference runs them)."""
    mode = _OpNames()
    with torch.no_grad(), mode:
        module(*inputs)
    return tuple(sorted(mode.names))


class _constants:
    """Set a task module's constants for a while (its get_inputs() and get_init_inputs() read them when called)."""

    def __init__(self, mod: ModuleType, values: dict[str, int]) -> None:
        self.mod, self.values = mod, values
        self.saved: dict[str, Any] = {}

    def __enter__(self) -> None:
        for k, v in self.values.items():
            self.saved[k] = getattr(self.mod, k)
            setattr(self.mod, k, v)

    def __exit__(self, *exc: object) -> None:
        for k, v in self.saved.items():
            setattr(self.mod, k, v)


def with_constants(source: str, constants: dict[str, int]) -> str:
    """The task file's source with each constant's module-level assignment set to the model's value."""
    for name, value in constants.items():
        pattern = re.compile(rf"^{re.escape(name)}\s*=\s*[^\n]*$", re.MULTILINE)
        source, n = pattern.subn(f"{name} = {value}", source, count=1)
        if n != 1:
            raise ValueError(f"the task has no module-level assignment of {name}")
    return source

