"""`opforge model profile`: the model's time, its hot groups (with the built-in task each matches, if any) and its
hot ATen ops.

Groups are chosen top-down: the first group (in pre-order, Sequential windows before single children) that matches a
built-in task is taken and nothing inside it is considered again; torch.nn leaf modules outside every match that take
at least MIN_SHARE of the model's time are reported as groups without a seed. Groups of the same task at the same
constants (the four blocks of a stack) are one group with several paths: one task, one kernel, swapped in at each.
"""

from __future__ import annotations

import os
import platform
import statistics
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from evaluator.sandbox.zygote_env import KINETO_QUIET
from opforge.model.groups import Group, candidate_groups, capture, tensor_spec
from opforge.model.loading import LoadedModel
from opforge.model.matching import Match, find_match

MIN_SHARE = 0.02
HOT_OPS = 12


@dataclass
class HotGroup:
    paths: list[str]
    kind: str
    time_ms: float
    share: float
    inputs: Any
    output: Any
    match: Match | None
    groups: list[Group] = field(default_factory=list)

    @property
    def name(self) -> str:
        if self.match is not None:
            return self.match.task.name
        return self.paths[0].replace(".", "_").replace("[", "_").replace(":", "_").replace("]", "")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "paths": self.paths, "kind": self.kind,
                               "time_ms": round(self.time_ms, 3), "share": round(self.share, 4),
                               "inputs": self.inputs, "output": self.output, "builtin": None}
        if self.match is not None:
            out["builtin"] = {"task": self.match.task.label, "seed": self.match.task.seed_path.name,
                              "constants": self.match.constants, "init_args": self.match.init_args,
                              "compute_ops": list(self.match.ops)}
        return out


@dataclass
class Profile:
    model: str
    device: str
    model_ms: float
    groups: list[HotGroup]
    hot_ops: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "device": self.device, "model_ms": round(self.model_ms, 3),
                "groups": [g.to_json() for g in self.groups], "hot_ops": self.hot_ops}

    def table(self) -> str:
        lines = [f"{self.model} on {self.device}: {self.model_ms:.2f} ms per forward (median)", "",
                 f"{'group':<34} {'kind':<22} {'ms':>8} {'share':>6}  input shapes -> built-in task"]
        for g in self.groups:
            shapes = ", ".join(_shape_text(s) for s in g.inputs)
            where = g.match.task.label if g.match else "no seed: an LLM run writes it"
            paths = g.paths[0] + (f" (+{len(g.paths) - 1})" if len(g.paths) > 1 else "")
            lines.append(f"{paths:<34} {g.kind:<22} {g.time_ms:>8.2f} {g.share:>6.1%}  {shapes} -> {where}")
        lines += ["", f"{'hot ATen op':<44} {'self ms':>8} {'share':>6}  input shapes"]
        for op in self.hot_ops:
            lines.append(f"{op['op']:<44} {op['self_ms']:>8.2f} {op['share']:>6.1%}  {op['shapes']}")
        return "\n".join(lines)


def _shape_text(spec: Any) -> str:
    if isinstance(spec, dict) and "shape" in spec:
        return f"{spec['dtype']}{list(spec['shape'])}"
    return str(spec)


def device_label() -> str:
    return f"CPU {platform.processor() or platform.machine()} ({torch.get_num_threads()} threads)"


def profile_model(loaded: LoadedModel, runs: int = 5) -> Profile:
    groups = candidate_groups(loaded.model)
    model_times = capture(loaded.model, loaded.inputs, groups, runs)
    model_ms = statistics.median(model_times) * 1e3
    chosen = _choose(loaded.model, groups, model_ms)
    return Profile(model=str(loaded.path), device=device_label(), model_ms=model_ms, groups=chosen,
                   hot_ops=hot_ops(loaded.model, loaded.inputs))


def _choose(model: nn.Module, groups: list[Group], model_ms: float) -> list[HotGroup]:
    covered: list[str] = []
    hot: dict[tuple[Any, ...], HotGroup] = {}

    def inside(paths: list[str]) -> bool:
        return any(p == c or p.startswith(c + ".") for p in paths for c in covered)

    for g in groups:
        if not g.times_s or inside(g.children_paths()):
            continue
        match = find_match(g.module, g.inputs, g.output)
        leaf = not any(True for _ in g.module.children()) and type(g.module).__module__.startswith("torch.nn")
        share = g.time_s * 1e3 / model_ms if model_ms else 0.0
        if match is None and not (leaf and not g.is_window and share >= MIN_SHARE):
            continue
        covered += g.children_paths()
        key: tuple[Any, ...] = ((match.task.label, tuple(sorted(match.constants.items()))) if match
                                else ("leaf", g.path))
        if key in hot:
            hot[key].paths.append(g.path)
            hot[key].time_ms += g.time_s * 1e3
            hot[key].share += share
            hot[key].groups.append(g)
        else:
            hot[key] = HotGroup(paths=[g.path], kind=g.kind, time_ms=g.time_s * 1e3, share=share,
                                inputs=tensor_spec(list(g.inputs)), output=tensor_spec(g.output), match=match,
                                groups=[g])
    return sorted(hot.values(), key=lambda h: -h.time_ms)


def hot_ops(model: nn.Module, inputs: tuple[Any, ...], runs: int = 3) -> list[dict[str, Any]]:
    """The ATen ops with the most self time under PyTorch's profiler, by op and input shapes."""
    # Kineto prints a line as the profiler starts and stops unless told otherwise before its first start: noise in
    # the profile's table (as the zygotes' environment says it).
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
    with torch.no_grad():
        model(*inputs)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(runs):
                model(*inputs)
    events = [e for e in prof.key_averages(group_by_input_shape=True) if e.key.startswith("aten::")]
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:HOT_OPS]
    return [{"op": e.key, "shapes": str(e.input_shapes), "calls_per_forward": e.count // runs,
             "self_ms": e.self_cpu_time_total / 1e3 / runs, "share": e.self_cpu_time_total / total} for e in top]
