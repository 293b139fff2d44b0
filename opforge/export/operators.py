"""From picked kernels to the operators a package exports: names, signatures, and where each kernel may run.

A kernel's dispatch bucket is what the evaluator verified it on: for each shape variant of the task (the benchmark
shape and every SHAPES entry, all of which every correct kernel passed), the kinds and dtypes of the forward's
arguments and their sizes; a tensor argument admits the evaluated number of dimensions and, per dimension, any size
between the smallest and largest evaluated. Variants with other dtypes make another bucket. The shapes come from the
trusted reference worker, on the meta device (`Evaluator.check_task`): nothing is executed in this process.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from evaluator import TaskError, default_evaluator
from evaluator.correctness import tolerance_for
from opforge.display import format_speedup
from opforge.export.selection import ExportError, Pick
from opforge.export.sources import (class_name, forward_info, identifier, init_call, kernel_info,
                                    literal_tolerance)

RESERVED = {"module_state", "module_config", "kernel_id", "self"}
RESERVED_CLASSES = {"Any", "Tensor", "MODULES", "OPERATORS", "inspect", "nn", "ops"}
SCALAR_KINDS = {"True": "bool", "False": "bool"}


@dataclass
class KernelPlan:
    id: str                                   # module name under <package>.kernels
    pick: Pick
    language: str
    launches: tuple[str, ...]
    traceable: bool
    buckets: list[list[dict[str, Any]]]       # one list of input specs per bucket

    @property
    def speedup(self) -> float | None:
        """As the run reports it: the re-measurements' median where it was re-measured (`Pick.speedup`)."""
        return self.pick.speedup

    @property
    def device(self) -> dict[str, Any]:
        result = self.pick.evaluation.result
        return {"kind": result.device.kind, "name": result.device.name, "interpreted": result.interpreted}


@dataclass
class OperatorPlan:
    name: str                                 # the op's name, the reference module's name
    task_name: str
    class_name: str
    arg_names: tuple[str, ...]
    arg_kinds: tuple[str, ...]                # "tensor" or a scalar kind, from the benchmark shape
    outputs: int
    tuple_output: bool
    report: Any                               # evaluator.verify.task_check.TaskReport
    tolerance: dict[str, Any]
    kernels: list[KernelPlan] = field(default_factory=list)

    @property
    def source(self) -> str:
        return self.kernels[0].pick.task.source

    def template_context(self) -> dict[str, Any]:
        annotations = [_ANNOTATION[k] for k in self.arg_kinds]
        args = [{"name": n, "annotation": a} for n, a in zip(self.arg_names, annotations)]
        returns = (f"tuple[{', '.join(['Tensor'] * self.outputs)}]" if self.tuple_output else "Tensor")
        kernels = [{"id": k.id, "language": k.language, "device": k.device, "inputs": bucket,
                    "launches": k.launches, "traceable": k.traceable, "speedup": k.speedup,
                    "speedup_text": format_speedup(k.speedup), "device_label": k.pick.evaluation.result.device_label}
                   for k in self.kernels for bucket in k.buckets]
        call, signature = init_call(self.source)
        pack = "(" + ", ".join(self.arg_names) + ("," if len(self.arg_names) == 1 else "") + ")"
        return {"name": self.name, "reference": self.name, "class_name": self.class_name, "args": args, "pack": pack,
                "returns": returns, "input_names": self.arg_names, "outputs": self.outputs,
                "tuple_output": self.tuple_output, "kernels": kernels, "init_call": call,
                "init_signature": signature,
                "summary": f"The `{self.task_name}` task's Model, running an exported kernel where it was verified."}


_ANNOTATION = {"tensor": "Tensor", "int": "int", "float": "float", "bool": "bool"}


def plan_operators(picks: tuple[Pick, ...]) -> list[OperatorPlan]:
    """One operator per task (by digest), kernels fastest first; names unique within the package."""
    by_task: dict[str, list[Pick]] = defaultdict(list)
    for pick in picks:
        by_task[pick.task.digest].append(pick)
    plans: list[OperatorPlan] = []
    used_names: set[str] = set()
    used_classes: set[str] = set(RESERVED_CLASSES)
    for task_picks in by_task.values():
        task = task_picks[0].task
        name = _unique(identifier(task.name), used_names, "_{}")
        cls = _unique(class_name(task.name), used_classes, "{}")
        plans.append(_plan(name, cls, task_picks))
    return plans


def _plan(name: str, cls: str, picks: list[Pick]) -> OperatorPlan:
    task = picks[0].task
    try:
        report = default_evaluator().check_task(task.task, "meta")
    except TaskError as exc:
        raise ExportError(f"The task of run {picks[0].run.id} cannot be loaded to read its shapes: {exc}") from None
    fwd = forward_info(task.source)
    kinds = tuple(_kind(spec) for spec in report.inputs[0])
    names = fwd.names if fwd.names is not None and len(fwd.names) == len(kinds) else tuple(
        f"input{i}" for i in range(len(kinds)))
    names = tuple(f"{n}_" if n in RESERVED else n for n in names)
    outputs = len(report.outputs[0])
    plan = OperatorPlan(name=name, task_name=task.name, class_name=cls, arg_names=names, arg_kinds=kinds,
                        outputs=outputs, tuple_output=fwd.tuple_return or outputs > 1, report=report,
                        tolerance=_tolerance(task.source, report))
    buckets = _buckets(report, kinds)
    interpreted: list[list[dict[str, Any]]] | None = None  # the sizes a Triton kernel on a CPU was checked at
    for pick in sorted(picks, key=lambda p: -p.speedup):
        info = kernel_info(pick.candidate.source)
        proven = buckets
        verdict = pick.evaluation.result
        if verdict.device.kind == "cpu" and verdict.backend in (None, "triton"):  # checked in Triton's interpreter
            if interpreted is None:
                interpreted = _buckets(default_evaluator().check_task(task.task, "meta", interpreter_shape=True), kinds)
            proven = interpreted
        plan.kernels.append(KernelPlan(id=f"{name}_{pick.candidate.digest[:12]}", pick=pick, language=info.language,
                                       launches=info.launches, traceable=info.traceable, buckets=proven))
    return plan


def _kind(spec: dict[str, Any]) -> str:
    if "shape" in spec:
        return "tensor"
    value = str(spec.get("value", ""))
    if value in SCALAR_KINDS:
        return SCALAR_KINDS[value]
    return "float" if any(c in value.lower() for c in ".einf") else "int"


def _buckets(report: Any, kinds: tuple[str, ...]) -> list[list[dict[str, Any]]]:
    """Group the variants by argument kinds and dtypes; per group, each tensor dimension's smallest and largest size.
    Only groups with the benchmark shape's kinds (the op's signature) are kept."""
    groups: dict[tuple[Any, ...], list[list[dict[str, Any]]]] = defaultdict(list)
    for specs in report.inputs:
        key = tuple(("tensor", s["dtype"], len(s["shape"])) if "shape" in s else (_kind(s),) for s in specs)
        groups[key].append(list(specs))
    out = []
    for key, variants in groups.items():
        if tuple(k[0] for k in key) != kinds:
            continue
        bucket = []
        for i, k in enumerate(key):
            if k[0] != "tensor":
                bucket.append({"kind": k[0]})
                continue
            dims = [(min(v[i]["shape"][d] for v in variants), max(v[i]["shape"][d] for v in variants))
                    for d in range(k[2])]
            bucket.append({"kind": "tensor", "dtype": k[1], "dims": tuple(dims)})
        out.append(bucket)
    return out


def _tolerance(source: str, report: Any) -> dict[str, Any]:
    literal = literal_tolerance(source)
    if literal is not None:
        return {**literal, "from": "the task's TOLERANCE"}
    if "TOLERANCE" in source:
        return {"atol": None, "rtol": None, "from": "the task's TOLERANCE (computed; see the reference file)"}
    import torch

    dtypes = sorted({o["dtype"] for o in report.outputs[0] if "dtype" in o})
    atol, rtol = max((tolerance_for(getattr(torch, d), None) for d in dtypes), default=(0.0, 0.0))
    return {"atol": atol, "rtol": rtol, "from": f"opforge's default for {', '.join(dtypes) or 'the outputs'}"}


def _unique(base: str, used: set[str], suffix: str) -> str:
    name, n = base, 1
    while name in used:
        n += 1
        name = base + suffix.format(n)
    used.add(name)
    return name
