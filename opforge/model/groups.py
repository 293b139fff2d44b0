"""The model's candidate groups and what each saw in one forward: inputs, output, time.

A group is a submodule (its path in `named_modules()`), or a window of two or three consecutive children of an
nn.Sequential (`network[0:2]`: a Linear with its activation), which forward hooks see as one call from the first
child's input to the last child's output. Times are inclusive (a block's time holds its layers') and the median over
a few forwards after a warm-up one; the model's own time is taken the same way, so shares are comparable.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

WINDOWS = (3, 2)  # Sequential window lengths tried, longest first


@dataclass
class Group:
    path: str                        # "blocks.0", or "network[0:2]" for a window
    parent: str                      # the Sequential's path for a window, else the module's own
    start: int | None                # window bounds, None for a module
    stop: int | None
    module: nn.Module                # the module, or an nn.Sequential of the window's children (same objects)
    kind: str                        # class names: "Block", "Linear+ReLU"
    inputs: tuple[Any, ...] = ()
    output: Any = None
    times_s: list[float] = field(default_factory=list)

    @property
    def time_s(self) -> float:
        return statistics.median(self.times_s) if self.times_s else 0.0

    @property
    def is_window(self) -> bool:
        return self.start is not None

    def children_paths(self) -> list[str]:
        if self.start is None:
            return [self.path]
        prefix = f"{self.parent}." if self.parent else ""
        return [f"{prefix}{i}" for i in range(self.start, self.stop or self.start)]


def candidate_groups(model: nn.Module) -> list[Group]:
    """Every submodule (the root excluded) and every Sequential window, in pre-order (a window before its children)."""
    groups: list[Group] = []
    for path, module in model.named_modules():
        if isinstance(module, nn.Sequential):
            children = list(module.children())
            for length in WINDOWS:
                for start in range(0, len(children) - length + 1):
                    window = nn.Sequential(*children[start:start + length])
                    kind = "+".join(type(c).__name__ for c in children[start:start + length])
                    groups.append(Group(f"{path}[{start}:{start + length}]", path, start, start + length, window, kind))
        if path and not isinstance(module, nn.ModuleList | nn.ModuleDict):
            groups.append(Group(path, path, None, None, module, type(module).__name__))
    return groups


def capture(model: nn.Module, inputs: tuple[Any, ...], groups: list[Group], runs: int = 5) -> list[float]:
    """Run the model `runs` times (after one warm-up), recording each group's inputs and output (first run) and time;
    returns the model's times. Called again on the same groups, it adds `runs` more times to each (an interleaved
    comparison captures two models in turns)."""
    modules = dict(model.named_modules())
    starts: dict[int, list[float]] = {}
    hooks = []
    offset = max((len(g.times_s) for g in groups), default=0)
    record: dict[str, Any] = {"on": False, "first": offset == 0, "run": offset}

    def pre(key: int, group: Group | None):
        def hook(_m: nn.Module, args: tuple[Any, ...]) -> None:
            if record["on"]:
                starts.setdefault(key, []).append(time.perf_counter())
                if group is not None and record["first"]:
                    group.inputs = _detach(args)
        return hook

    def post(key: int, groups_here: list[Group]):
        def hook(_m: nn.Module, _args: tuple[Any, ...], output: Any) -> None:
            if record["on"] and starts.get(key):
                elapsed = time.perf_counter() - starts[key].pop()
                for g in groups_here:
                    _add_time(g, record["run"], elapsed)
                    if record["first"]:
                        g.output = _detach(output)
        return hook

    by_path = {g.path: g for g in groups if g.start is None}
    windows = [g for g in groups if g.start is not None]
    for path, module in modules.items():
        if path and path in by_path:
            key = id(module)
            hooks.append(module.register_forward_pre_hook(pre(key, by_path[path])))
            hooks.append(module.register_forward_hook(post(key, [by_path[path]])))
    window_starts: dict[tuple[int, int], float] = {}
    for w in windows:
        seq = modules[w.parent]
        first, last = seq[w.start], seq[(w.stop or 0) - 1]
        hooks.append(first.register_forward_pre_hook(_window_pre(w, window_starts, record)))
        hooks.append(last.register_forward_hook(_window_post(w, window_starts, record)))
    model_times: list[float] = []
    try:
        with torch.no_grad():
            model(*inputs)
            record["on"] = True
            for i in range(runs):
                record["run"] = offset + i
                t0 = time.perf_counter()
                model(*inputs)
                model_times.append(time.perf_counter() - t0)
                record["first"] = False
    finally:
        for h in hooks:
            h.remove()
    return model_times


def _add_time(group: Group, run: int, elapsed_s: float) -> None:
    """A module called several times in one forward adds up within the run."""
    while len(group.times_s) <= run:
        group.times_s.append(0.0)
    group.times_s[run] += elapsed_s


def _window_pre(w: Group, starts: dict[tuple[int, int], float], record: dict[str, Any]):
    def hook(_m: nn.Module, args: tuple[Any, ...]) -> None:
        if record["on"]:
            starts[(id(w), 0)] = time.perf_counter()
            if record["first"]:
                w.inputs = _detach(args)
    return hook


def _window_post(w: Group, starts: dict[tuple[int, int], float], record: dict[str, Any]):
    def hook(_m: nn.Module, _args: tuple[Any, ...], output: Any) -> None:
        if record["on"] and (id(w), 0) in starts:
            _add_time(w, record["run"], time.perf_counter() - starts.pop((id(w), 0)))
            if record["first"]:
                w.output = _detach(output)
    return hook


def _detach(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, tuple):
        return tuple(_detach(v) for v in value)
    if isinstance(value, list):
        return [_detach(v) for v in value]
    return value


def tensor_spec(value: Any) -> Any:
    """Shapes and dtypes of a captured value, for tables and JSON."""
    if isinstance(value, Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, tuple | list):
        return [tensor_spec(v) for v in value]
    return {"value": repr(value)}
