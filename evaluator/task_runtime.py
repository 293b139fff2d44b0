"""Running a task's own code: its module, its shape variants, its inputs and its model.

Imported by both workers (the trusted reference worker and the sandboxed candidate worker) before any candidate code,
so the two build bit-identical inputs from the same seed. The module is executed privately: it is never registered in
`sys.modules`, so a candidate cannot find the task (or the reference model) by name.
"""

from __future__ import annotations

import types
from typing import Any

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
DEFAULT_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-7, torch.float16: 1e-2, torch.bfloat16: 1e-2}
NORMAL_SCALE = 4.0  # the second distribution: standard normal, scaled so that negatives and large magnitudes appear


class TaskRuntimeError(Exception):
    pass


class TaskRuntime:
    def __init__(self, source: str, name: str, device: str):
        self.name = name
        self.device = torch.device(device)
        self.module = types.ModuleType(f"_opforge_task_{name}")
        self.module.__file__ = f"<task {name}>"
        code = compile(source, f"<task {name}>", "exec")
        exec(code, self.module.__dict__)  # noqa: S102 - the task file is the user's trusted reference
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.module, attr):
                raise TaskRuntimeError(f"does not define {attr}")
        shapes = getattr(self.module, "SHAPES", None) or []
        if not isinstance(shapes, (list, tuple)) or not all(isinstance(v, dict) for v in shapes):
            raise TaskRuntimeError("SHAPES must be a list of dicts of module-level names to values")
        self._originals = {k: self.module.__dict__.get(k) for v in shapes for k in v}
        self.variants: list[dict[str, Any]] = [{}] + [dict(v) for v in shapes]

    def _apply(self, variant: int) -> None:
        for key, value in self._originals.items():
            self.module.__dict__[key] = value
        self.module.__dict__.update(self.variants[variant])

    def init_inputs(self, variant: int) -> list[Any]:
        self._apply(variant)
        return list(self.module.get_init_inputs())

    def inputs(self, variant: int, seed: int, distribution: str = "task") -> list[Any]:
        """The task's inputs for one trial. Distribution 'normal' redraws every float tensor from N(0, 1) * 4;
        'perturbed' is the task's draw with a single element of one float input changed by at least 1 (a probe for
        caches keyed on a sample of the input's values)."""
        self._apply(variant)
        torch.manual_seed(seed)
        if self.device.type == "meta":
            with torch.device("meta"):
                return list(self.module.get_inputs())
        produced = self.module.get_inputs()
        if not isinstance(produced, (list, tuple)):
            raise TaskRuntimeError(f"get_inputs() returned a {type(produced).__name__}, not a list of tensors")
        raw = list(produced)
        if not any(isinstance(x, torch.Tensor) for x in raw) or not all(
                isinstance(x, (torch.Tensor, int, float, bool)) for x in raw):
            raise TaskRuntimeError("get_inputs() must return tensors (and plain numbers), got "
                                   + ", ".join(type(x).__name__ for x in raw))
        out: list[Any] = []
        gen = torch.Generator().manual_seed(seed ^ 0x5DEECE66D)
        for x in raw:
            if isinstance(x, torch.Tensor):
                if distribution == "normal" and x.dtype in FLOAT_DTYPES:
                    x = (torch.randn(x.shape, generator=gen, dtype=torch.float32) * NORMAL_SCALE).to(x.dtype)
                x = x.to(self.device)
            out.append(x)
        floats = [i for i, x in enumerate(out) if isinstance(x, torch.Tensor) and x.dtype in FLOAT_DTYPES and x.numel()]
        if distribution == "perturbed" and floats:
            which = floats[int(torch.randint(0, len(floats), (1,), generator=gen))]
            x = out[which].clone()
            spot = int(torch.randint(0, x.numel(), (1,), generator=gen))
            delta = float(torch.randn((), generator=gen))
            x.view(-1)[spot] += (1.0 + abs(delta)) * (1 if delta >= 0 else -1)
            out[which] = x
        return out

    def reference_model(self, variant: int, init_seed: int) -> torch.nn.Module:
        init = self.init_inputs(variant)
        torch.manual_seed(init_seed)
        if self.device.type == "meta":
            with torch.device("meta"):
                return self.module.Model(*init)
        return self.module.Model(*init).to(self.device)

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        tol = getattr(self.module, "TOLERANCE", None)
        if isinstance(tol, dict):
            return float(tol.get("atol", 1e-4)), float(tol.get("rtol", 1e-4))
        t = DEFAULT_TOLERANCE.get(dtype, 0.0)
        return t, t


def describe(values: list[Any]) -> list[dict[str, Any]]:
    """Shapes and dtypes of a list of inputs or outputs, for reports and `task check`."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append({"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")})
        else:
            out.append({"value": repr(v)[:60]})
    return out


def as_outputs(value: Any) -> list[Any]:
    """A forward's result as a flat list: a tensor, or a tuple/list of tensors."""
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]
