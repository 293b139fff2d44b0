"""What an export needs to know about task and candidate sources, read from their syntax trees (never executed here).

- the reference forward's parameters and whether it returns a tuple;
- the task's TOLERANCE, when it is a literal;
- a candidate's language (Triton, CUDA through load_inline, native C/C++ through load_c, or plain PyTorch) and, for Triton, which module-level
  kernels its Python code launches as `kernel[grid](...)`: those can be wrapped with `torch.library.wrap_triton` so
  that `torch.library.triton_op` traces them, unless they are used any other way (called from another kernel,
  passed around, `.run(...)`), in which case the kernel is registered as an opaque custom op.
"""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass

from evaluator.source_ast import parse_source

TRITON_DECORATORS = {"jit", "autotune", "heuristics"}


@dataclass(frozen=True, slots=True)
class ForwardInfo:
    names: tuple[str, ...] | None  # the forward's parameters after self; None: *args, keyword-only or defaults
    tuple_return: bool             # some `return` gives a tuple or list literal


@dataclass(frozen=True, slots=True)
class KernelInfo:
    language: str                  # "triton", "cuda", "cpp" (load_c) or "torch"
    launches: tuple[str, ...]      # module-level Triton kernels launched as name[grid](...)
    traceable: bool                # every launch can go through wrap_triton


def forward_info(task_source: str) -> ForwardInfo:
    model = _class(parse_source(task_source), "Model")
    forward = None if model is None else next(
        (n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
    if forward is None:
        return ForwardInfo(None, False)
    a = forward.args
    plain = not (a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs)
    names = tuple(arg.arg for arg in a.args[1:]) if plain else None
    returns = [n.value for n in ast.walk(forward) if isinstance(n, ast.Return) and n.value is not None]
    return ForwardInfo(names, any(isinstance(r, (ast.Tuple, ast.List)) for r in returns))


def init_call(task_source: str) -> tuple[str, str]:
    """The reference constructor's required arguments as a call ('dim') and its whole signature ('dim, eps=1e-05')."""
    model = _class(parse_source(task_source), "Model")
    init = None if model is None else next(
        (n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:
        return "", ""
    a = init.args
    positional = a.args[1:]
    required = positional[: len(positional) - len(a.defaults)]
    signature = ast.unparse(ast.arguments(posonlyargs=[], args=positional, vararg=a.vararg, kwonlyargs=a.kwonlyargs,
                                          kw_defaults=a.kw_defaults, kwarg=a.kwarg, defaults=a.defaults))
    return ", ".join(arg.arg for arg in required), signature


def literal_tolerance(task_source: str) -> dict[str, float] | None:
    for node in parse_source(task_source).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TOLERANCE" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            if isinstance(value, dict):
                return {"atol": float(value.get("atol", 1e-4)), "rtol": float(value.get("rtol", 1e-4))}
    return None


def kernel_info(candidate_source: str) -> KernelInfo:
    tree = parse_source(candidate_source)
    if any(isinstance(n, ast.ImportFrom) and n.module == "evaluator.native" for n in ast.walk(tree)):
        return KernelInfo("cpp", (), False)  # native C/C++ on the CPU through load_c (export/native_vendor.py)
    if "load_inline" in candidate_source or "cpp_extension" in candidate_source:
        return KernelInfo("cuda", (), False)
    jitted = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and any(
        _decorator_name(d) in TRITON_DECORATORS for d in n.decorator_list)}
    if not jitted:
        return KernelInfo("torch", (), False)
    inside = {n.id for fn in jitted.values() for n in ast.walk(fn) if isinstance(n, ast.Name)}
    launched: set[str] = set()
    launch_values: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in jitted):
            launched.add(node.func.value.id)
            launch_values.add(id(node.func.value))
    in_kernels = {id(n) for fn in jitted.values() for n in ast.walk(fn)}
    other_uses = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in jitted
                  and id(n) not in launch_values and id(n) not in in_kernels}
    # wrap_triton takes a JITFunction or an Autotuner (heuristics beneath an autotune are fine); a kernel whose
    # outermost decorator is @triton.heuristics is a Heuristics object, which it refuses.
    wrappable = all(_decorator_name(jitted[name].decorator_list[0]) in ("jit", "autotune") for name in launched)
    traceable = bool(launched) and wrappable and not (launched & inside) and not other_uses
    return KernelInfo("triton", tuple(sorted(launched)), traceable)


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def identifier(text: str, prefix: str = "op") -> str:
    """A lower-case Python identifier from a task name: '19_ReLU' -> 'op_19_relu'."""
    name = re.sub(r"\W+", "_", text.lower()).strip("_")
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = f"{prefix}_{name}".rstrip("_")
    return name


def class_name(text: str) -> str:
    """A CamelCase class name from a task name: 'gelu_tanh' -> 'GeluTanh', '19_ReLU' -> 'Op19ReLU'."""
    parts = [p for p in re.split(r"[^0-9A-Za-z]+", text) if p]
    name = "".join(p[0].upper() + p[1:] for p in parts) or "Op"
    return f"Op{name}" if name[0].isdigit() else name
