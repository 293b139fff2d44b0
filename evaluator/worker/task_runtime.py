"""Running a task's own code: its module, its shape variants, its inputs and its model.

Imported by both workers (the trusted reference worker and the sandboxed candidate worker) before any candidate code,
so the two build bit-identical inputs from the same seed. The module is executed privately: it is never registered in
`sys.modules`, so a candidate cannot find the task (or the reference model) by name.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from evaluator.worker.fast_draws import FastDraws

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
DEFAULT_TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-7, torch.float16: 1e-2, torch.bfloat16: 1e-2}
NORMAL_SCALE = 4.0  # the second distribution: standard normal, scaled so that negatives and large magnitudes appear
LARGE_SCALES = (1e5, 1e3)  # the large-magnitude trial: the first of these that keeps the reference finite
REDRAW_CHUNK_VALUES = (1 << 15) - 1  # below ATen's grain size (32768): each step on the calling thread
JITTER_SCALE = 0.5  # parameters an init seed does not change (norm layers) move by this much of their mean magnitude


class TaskRuntimeError(Exception):
    pass


class TaskRuntime:
    def __init__(self, source: str, name: str, device: str, interpreter_shape: bool = False,
                 draws: FastDraws | None = None):
        self.name = name
        self.device = torch.device(device)
        self.draws = draws  # the task's random draws on a CPU, by the driver's native generator (fast_draws.py)
        self.module = types.ModuleType(f"_opforge_task_{name}")
        self.module.__file__ = f"<task {name}>"
        code = compile(source, f"<task {name}>", "exec")
        try:
            exec(code, self.module.__dict__)  # noqa: S102 - the task file is the user's trusted reference
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(f"the task imports {exc.name!r}, which is not installed here "
                                      f"(pip install {(exc.name or '?').split('.')[0]})", name=exc.name) from None
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.module, attr):
                raise TaskRuntimeError(f"does not define {attr}")
        # The benchmark shape of a Triton candidate on the CPU (Triton's interpreter), reference and candidate alike.
        self.interpreter_shape: dict[str, Any] | None = None
        override = getattr(self.module, "INTERPRETER_SHAPE", None) if interpreter_shape else None
        if override is not None:
            if not isinstance(override, dict) or not all(isinstance(k, str) for k in override):
                raise TaskRuntimeError("INTERPRETER_SHAPE must be a dict of module-level names to values")
            self.module.__dict__.update(override)
            self.interpreter_shape = dict(override)
        # The correctness variants: SHAPES, or under the interpreter the task's INTERPRETER_SHAPES where it has them
        # (a few programs each: the interpreter runs every program in Python, 0.3-0.5 s a call at 256 of them).
        which = "INTERPRETER_SHAPES" if interpreter_shape and hasattr(self.module, "INTERPRETER_SHAPES") else "SHAPES"
        shapes = getattr(self.module, which, None) or []
        if not isinstance(shapes, (list, tuple)) or not all(isinstance(v, dict) for v in shapes):
            raise TaskRuntimeError(f"{which} must be a list of dicts of module-level names to values")
        self._originals = {k: self.module.__dict__.get(k) for v in shapes for k in v}
        self.variants: list[dict[str, Any]] = [{}] + [dict(v) for v in shapes]

    def _apply(self, variant: int) -> None:
        for key, value in self._originals.items():
            self.module.__dict__[key] = value
        self.module.__dict__.update(self.variants[variant])

    def init_inputs(self, variant: int) -> list[Any]:
        self._apply(variant)
        return list(self.module.get_init_inputs())

    def inputs(self, variant: int, seed: int, distribution: str = "task", scale: float = NORMAL_SCALE,
               made: list[torch.Tensor] | None = None) -> list[Any]:
        """The task's inputs for one trial. `made`: where given, receives every tensor the task's `get_inputs` made
        on the way, its temporaries included (kept alive until the caller drops them: a timed call flushes their cache
        lines, `timed_calls.py`). Distribution 'normal' redraws every float tensor from N(0, 1) * 4 and
        'large' from N(0, 1) * `scale`, value by value: entries that the task drew equal stay equal (RoPE's tables
        of two equal halves, a symmetric matrix), so the structure an honest kernel relies on survives.
        'perturbed' is the task's draw with one value of one float input (every entry holding it) moved away from
        zero by at least 1, keeping its sign (a probe for caches keyed on a sample of the input's values)."""
        self._apply(variant)
        seed_generators(seed)
        if self.device.type == "meta":
            with torch.device("meta"), _drawing_on(self.device, None):
                return list(self.module.get_inputs())
        with _drawing_on(self.device, self.draws, made):
            produced = self.module.get_inputs()
        if not isinstance(produced, (list, tuple)):
            raise TaskRuntimeError(f"get_inputs() returned a {type(produced).__name__}, not a list of tensors")
        raw = list(produced)
        if not any(isinstance(x, torch.Tensor) for x in raw) or not all(
                isinstance(x, (torch.Tensor, int, float, bool)) for x in raw):
            raise TaskRuntimeError("get_inputs() must return tensors (and plain numbers), got "
                                   + ", ".join(type(x).__name__ for x in raw))
        out: list[Any] = []
        gen = torch.Generator(device=self.device).manual_seed(seed ^ 0x5DEECE66D)  # drawn where the inputs live
        for x in raw:
            if isinstance(x, torch.Tensor):
                if distribution in ("normal", "large") and x.dtype in FLOAT_DTYPES and x.numel():
                    sigma = NORMAL_SCALE if distribution == "normal" else scale
                    x = x.to(self.device)
                    x = self.draws.redraw(x, gen, sigma) if self.draws is not None and x.device.type == "cpu" \
                        else _redraw(x, gen, sigma)
                x = x.to(self.device)
            out.append(x)
        floats = [i for i, x in enumerate(out) if isinstance(x, torch.Tensor) and x.dtype in FLOAT_DTYPES and x.numel()]
        if distribution == "perturbed" and floats:
            which = floats[int(torch.randint(0, len(floats), (1,), generator=gen, device=self.device))]
            x = out[which].clone()
            spot = int(torch.randint(0, x.numel(), (1,), generator=gen, device=self.device))
            delta = 1.0 + abs(float(torch.randn((), generator=gen, device=self.device)))
            value = x.reshape(-1)[spot].clone()
            x[x == value] = value + (delta if bool(value >= 0) else -delta)
            out[which] = x
        return out

    def inputs_with_fresh(self, variant: int, seed: int, index: int, fresh_seed: int) -> tuple[list[Any], bool]:
        """The task's inputs for `seed` with input `index` alone drawn from `fresh_seed` (the degenerate-task check);
        a float input that the task draws the same for every seed is redrawn from N(0, 1) * 4. Also says whether the
        input changed. The global RNG ends as after `inputs(variant, seed)`, so a forward that draws (dropout) draws
        the same."""
        fresh = self.inputs(variant, fresh_seed)[index]
        out = self.inputs(variant, seed)
        x = out[index]
        if not isinstance(x, torch.Tensor):
            return out, False
        if torch.equal(fresh, x) and x.dtype in FLOAT_DTYPES and x.numel():
            gen = torch.Generator().manual_seed(fresh_seed)
            fresh = (torch.randn(x.shape, generator=gen, dtype=torch.float32) * NORMAL_SCALE).to(x.dtype).to(x.device)
        out[index] = fresh
        return out, not torch.equal(fresh, x)

    def reseeded_model(self, variant: int, init_seed: int, like: torch.nn.Module) -> tuple[torch.nn.Module, dict]:
        """The reference model built from another init seed (the degenerate-task check). Floating parameters that come
        out equal to `like`'s (a deterministic init, e.g. a norm layer's ones and zeros) are moved by a seeded random
        amount, so that whether the forward uses them still shows. Returns the model and counts of its state."""
        model = self.reference_model(variant, init_seed)
        before = dict(like.named_parameters())
        gen = torch.Generator().manual_seed(init_seed)
        facts = {"parameters": 0, "buffers": sum(1 for _ in model.buffers()), "reseeded": 0, "jittered": 0}
        with torch.no_grad():
            for name, p in model.named_parameters():
                facts["parameters"] += 1
                old = before.get(name)
                if old is None or old.shape != p.shape or not torch.equal(old, p):
                    facts["reseeded"] += 1
                elif p.dtype in FLOAT_DTYPES and p.numel():
                    scale = JITTER_SCALE * max(float(p.abs().float().mean()), 0.1)
                    noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * scale
                    p.add_(noise.to(p.dtype).to(p.device))
                    facts["jittered"] += 1
        return model, facts

    def forget_models(self) -> None:
        """Drop the task's module classes (the candidate's worker, once it holds the reference weights it needs):
        what a candidate could reach through `nn.Module.__subclasses__()` and a method's globals (the task's
        `get_inputs`, to do its work while inputs are drawn) is gone."""
        import gc
        name = self.module.__name__
        for key, value in list(self.module.__dict__.items()):
            if isinstance(value, type) and issubclass(value, torch.nn.Module) and value.__module__ == name:
                del self.module.__dict__[key]
        del key, value
        gc.collect()

    def reference_model(self, variant: int, init_seed: int) -> torch.nn.Module:
        init = self.init_inputs(variant)
        seed_generators(init_seed)
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


def _redraw(x: torch.Tensor, gen: torch.Generator, scale: float) -> torch.Tensor:
    """Every distinct value of `x` replaced by a fresh draw from N(0, 1) * scale (equal entries stay equal).

    The draw is a function of the value and of two salts drawn from `gen`: each value's float32 bits (-0.0 as 0.0)
    are hashed twice (`_mix32`) into two 24-bit uniforms, and Box-Muller turns them into a normal value (its tail
    cut at 5.9 sigma). Equal values get equal draws without sorting the input: `torch.unique` took 2 s of an
    8-million-value input; this takes about a tenth. Float64 values equal in float32 share a draw. On a CPU the
    values are hashed in chunks below ATen's grain size (`REDRAW_CHUNK_VALUES`): the twenty steps then run on the
    calling thread from cache, without an OpenMP wake-up each (half the time on 2 busy cores; the same values)."""
    salts = [int(v) for v in torch.randint(-2**31, 2**31 - 1, (2,), generator=gen, device=gen.device).tolist()]
    flat = x.detach().reshape(-1)
    chunk = REDRAW_CHUNK_VALUES if flat.device.type == "cpu" else max(flat.numel(), 1)
    fresh = torch.empty(flat.shape, dtype=torch.float32, device=flat.device)
    for start in range(0, flat.numel(), chunk):
        bits = (flat[start:start + chunk].to(torch.float32) + 0.0).contiguous().view(torch.int32)
        scratch = torch.empty_like(bits)
        u1 = _mix32(bits ^ salts[0], scratch).bitwise_right_shift_(7).to(torch.float32).add_(0.5).mul_(2.0**-24)
        u2 = _mix32(bits.bitwise_xor_(salts[1]), scratch).bitwise_right_shift_(7).to(torch.float32)
        u2.mul_(2 * torch.pi * 2.0**-24)
        fresh[start:start + chunk] = u1.log_().mul_(-2.0).sqrt_().mul_(u2.cos_()).mul_(scale)
    return fresh.reshape(x.shape).to(x.device).to(x.dtype)


def _mix32(h: torch.Tensor, scratch: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer hash finalizer (xor-shift-multiply rounds), in place on an int32 tensor: right shifts
    masked to be logical, products wrapping modulo 2**32; the result is in 0..2**31-1 (31 bits)."""
    for shift, mask, factor in ((16, 0xFFFF, 0x7FEB352D), (15, 0x1FFFF, -0x7B935975), (16, 0xFFFF, 0)):
        torch.bitwise_right_shift(h, shift, out=scratch)
        h.bitwise_xor_(scratch.bitwise_and_(mask))
        if factor:
            h.mul_(factor)  # 0x7FEB352D, then 0x846CA68B as a signed 32-bit integer
    return h.bitwise_and_(0x7FFFFFFF)


def seed_generators(seed: int) -> None:
    """What `torch.manual_seed` does for the generators a task can draw from, without its cost: before CUDA is
    initialised, `torch.manual_seed` queues a lazy CUDA seeding and formats the caller's stack for it (about 1 ms a
    call, once per timed call). Seeding CUDA's generators now where CUDA is up gives the same draws."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


# A draw's tensors handed over for flushing (`TaskRuntime.inputs`' `made`) are held alive until then; past this many
# bytes the rest are freed as they would be: they outgrow any cache, and holding them could pass a worker's memory
# limit.
MADE_MAX_BYTES = 512 * 2**20


class _DeviceRedirect(TorchFunctionMode):
    """Tensors that a task's `get_inputs` creates on a device this run does not use (`device='cuda'` on a CPU run,
    any device on meta) are created on the run's device instead, where KernelBench's own harness would move them: a
    CUDA-only task still checks on CPU or meta. A CPU request on a GPU run stays (the inputs are moved afterwards)."""

    def __init__(self, device: torch.device, draws: FastDraws | None, made: list[torch.Tensor] | None = None):
        super().__init__()
        self.device = device
        self.draws = draws
        self.made = made  # where given, every tensor a torch function returned while the task drew (`inputs`)
        self.made_bytes = 0

    def _elsewhere(self, requested: Any) -> bool:
        try:
            kind = torch.device(requested).type
        except (RuntimeError, TypeError):
            return False
        return kind != self.device.type and (self.device.type == "meta" or kind != "cpu")

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func is torch.Tensor.cuda and self._elsewhere("cuda"):
            return args[0].to(self.device)
        if kwargs.get("device") is not None and self._elsewhere(kwargs["device"]):
            kwargs = {**kwargs, "device": self.device}
        if func is torch.Tensor.to and len(args) > 1 and isinstance(args[1], (str, torch.device)) \
                and self._elsewhere(args[1]):
            args = (args[0], self.device, *args[2:])
        if self.draws is not None and (drawn := self.draws.draw(func, args, kwargs)) is not None:
            result = drawn
        else:
            result = func(*args, **kwargs)
        if self.made is not None:
            for t in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(t, torch.Tensor) and self.made_bytes < MADE_MAX_BYTES:
                    self.made.append(t)
                    self.made_bytes += t.numel() * t.element_size()
        return result


@contextlib.contextmanager
def _drawing_on(device: torch.device, draws: FastDraws | None,
                made: list[torch.Tensor] | None = None) -> Iterator[None]:
    """While a task draws its inputs: the run's device is the default one, so that `torch.randn(...)` draws there
    with that device's generator (seeded by `torch.manual_seed`; on a GPU, large inputs are not drawn by one CPU
    thread and copied); explicit devices redirected; on a CPU, `draws` (fast_draws.py) takes the draws it can; on
    meta, `torch.distributions` argument validation (which reads values with `.item()`) off, so that e.g.
    `Pareto(...).sample(shape)` works shape-only."""
    validate = torch.distributions.Distribution._validate_args
    if device.type == "meta":
        torch.distributions.Distribution.set_default_validate_args(False)
    try:
        with _DeviceRedirect(device, draws, made), torch.device(device):
            yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)


def describe(values: list[Any]) -> list[dict[str, Any]]:
    """Shapes and dtypes of a list of inputs or outputs, for reports and `task check`."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append({"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")})
        else:
            out.append({"value": repr(v)[:60]})
    return out


_exact_type, _tuple, _list = type, tuple, list  # captured before any candidate code exists


def as_outputs(value: Any) -> list[Any]:
    """A forward's result as a flat list: a tensor, or exactly a tuple or list of tensors. A subclass of tuple or
    list is not unpacked (its `__iter__` would run the candidate's code after the timer): it is one output, which
    the structural check then refuses as not a plain tensor."""
    kind = _exact_type(value)
    if kind is _tuple or kind is _list:
        return _list.copy(value) if kind is _list else [*_tuple.__iter__(value)]
    return [value]
