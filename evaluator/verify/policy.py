"""The static pre-check: an AST pass that refuses the obvious before any compute is spent.

A cheap first filter, not the defence: everything it refuses is also caught (or made harmless) at run time by the
sandbox, the guards and the driver's checks. Its value is a fast, specific reason for the coder.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from evaluator.source_ast import parse_source

BANNED_MODULES = {
    "ctypes": "loads native code behind the harness's back",
    "cffi": "loads native code behind the harness's back",
    "gc": "can reach the harness's objects",
    "inspect": "can reach the harness's frames",
    "subprocess": "starts processes",
    "multiprocessing": "starts processes",
    "socket": "opens network connections",
    "urllib": "opens network connections",
    "http": "opens network connections",
    "requests": "opens network connections",
    "_thread": "starts threads that can work after the call returns",
    "concurrent": "starts threads that can work after the call returns",
    "asyncio": "runs work outside the call",
    "signal": "interferes with the harness's signals",
    "pickle": "deserialises arbitrary objects",
    "marshal": "deserialises code",
    "importlib": "imports modules dynamically",
    "builtins": "replaces Python's builtins",
    "sysconfig": "is not needed by a kernel",
    "resource": "changes process limits",
    "pty": "starts processes",
    "shutil": "manipulates files",
    "evaluator": "is the harness that judges it", "opforge": "is the harness that judges it",
    "store": "is the harness's store", "agents": "is the harness's agents",
}
BANNED_CALLS = {
    "exec": "runs dynamically built code", "eval": "runs dynamically built code",
    "compile": "builds code dynamically", "__import__": "imports modules dynamically",
    "globals": "reads module globals", "vars": "reads object internals", "locals": "reads frame locals",
    "open": "opens files", "breakpoint": "stops the harness", "setattr": "patches objects dynamically",
    "delattr": "patches objects dynamically",
}
_ANY = None
_OS = frozenset({"os", "sys", "posix", "pathlib", "Path"})
_RNG = frozenset({"torch", "random", "np", "numpy", "cuda"})
# attribute -> (the roots it is banned on, or None for any root; why)
BANNED_ATTRIBUTES: dict[str, tuple[frozenset[str] | None, str]] = {
    "_getframe": (_ANY, "reads the harness's frames"), "modules": (frozenset({"sys"}), "reaches other modules"),
    "settrace": (_ANY, "traces the harness"), "setprofile": (_ANY, "traces the harness"),
    "__globals__": (_ANY, "reads other code's globals"), "__code__": (_ANY, "rewrites functions"),
    "__closure__": (_ANY, "reads closures"), "__subclasses__": (_ANY, "walks the class tree"),
    "__builtins__": (_ANY, "reaches the builtins"), "_C": (frozenset({"torch"}), "uses PyTorch's private bindings"),
    "manual_seed": (_RNG, "sets the random seed (inputs come from seeds the candidate must not control)"),
    "manual_seed_all": (_RNG, "sets the random seed"), "seed": (_RNG, "controls the random generator"),
    "initial_seed": (_RNG, "reads the random seed"), "get_rng_state": (_RNG, "reads the random generator's state"),
    "set_rng_state": (_RNG, "sets the random generator's state"), "default_generator": (_RNG, "uses the global RNG"),
    "system": (_OS, "runs shell commands"), "popen": (_OS, "runs shell commands"), "fork": (_OS, "starts processes"),
    "kill": (_OS, "sends signals"), "killpg": (_OS, "sends signals"), "_exit": (_OS, "exits without a result"),
    "abort": (_OS, "crashes the process"), "setsid": (_OS, "leaves the process group"),
    "execv": (_OS, "replaces the process"), "execve": (_OS, "replaces the process"),
    "spawnv": (_OS, "starts processes"), "posix_spawn": (_OS, "starts processes"), "remove": (_OS, "deletes files"),
    "unlink": (_OS, "deletes files"), "rmdir": (_OS, "deletes files"), "chdir": (_OS, "changes directory"),
    "write_text": (_ANY, "writes files"), "write_bytes": (_ANY, "writes files"), "exit": (_OS, "exits early"),
    "tb_frame": (_ANY, "reads the harness's frames"), "f_back": (_ANY, "reads the harness's frames"),
    "f_locals": (_ANY, "reads the harness's frames"), "f_globals": (_ANY, "reads the harness's frames"),
    "gi_frame": (_ANY, "reads the harness's frames"), "cr_frame": (_ANY, "reads the harness's frames"),
    "ag_frame": (_ANY, "reads the harness's frames"), "_current_frames": (_ANY, "reads the harness's frames"),
    "createResolutionCallbackFromFrame": (_ANY, "reads the harness's frames"),
    "set_eval_frame": (_ANY, "intercepts the harness's frames"),
    "_dispatch_library": (_ANY, "replaces PyTorch's own kernels"),
}
# Calls that only ask (threads, devices, dtypes): a fallback clause may use them to pick a configuration.
QUERY_CALLS = frozenset({
    "get_num_threads", "get_num_interop_threads", "is_available", "device_count", "get_device_properties",
    "get_device_capability", "get_device_name", "current_device", "get_default_dtype", "is_built", "is_tensor",
    "is_floating_point", "is_complex", "finfo", "iinfo", "is_initialized", "cpu_count", "mem_get_info",
})
# Flags a kernel may set (they change PyTorch's own numerics in the candidate's process only).
FLAG_PREFIXES = ("torch.backends.",)
# The one public part of the harness a candidate may import: `from evaluator.native import load_c` (native kernels).
NATIVE_MODULE, NATIVE_NAMES = "evaluator.native", ("load_c",)
PATCHABLE_ROOTS = {"torch", "time", "triton", "tl", "F", "nn", "np", "numpy", "os", "sys", "math", "random"}
REFERENCE_NAMES = {"Model", "get_inputs", "get_init_inputs"}


@dataclass(frozen=True, slots=True)
class Violation:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def check_source(source: str, allow_torch: bool = False) -> list[Violation]:
    """Every policy violation in the candidate's source (empty when it passes). Raises SyntaxError when unparsable."""
    tree = parse_source(source)
    found: list[Violation] = []
    aliases = _module_aliases(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                _check_module(alias.name, line, found)
        elif isinstance(node, ast.ImportFrom):
            if node.module == NATIVE_MODULE and node.level == 0:
                if any(a.name not in NATIVE_NAMES for a in node.names):
                    found.append(Violation(line, f"imports from {NATIVE_MODULE} more than {', '.join(NATIVE_NAMES)}, "
                                                 "the only part of the harness a candidate may use"))
            else:
                _check_module(node.module or "", line, found)
            for alias in node.names:
                roots, why = BANNED_ATTRIBUTES.get(alias.name, (frozenset(), ""))
                if why and (roots is None or (node.module or "").split(".")[0] in roots | {"torch"}):
                    found.append(Violation(line, f"imports {node.module}.{alias.name}, which {why}"))
                if alias.name in REFERENCE_NAMES:
                    found.append(Violation(line, f"imports {alias.name} from the task: the reference is not "
                                                 "available to candidates"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
            found.append(Violation(line, f"calls {node.func.id}(), which {BANNED_CALLS[node.func.id]}"))
        elif isinstance(node, ast.Attribute) and node.attr in BANNED_ATTRIBUTES:
            roots, why = BANNED_ATTRIBUTES[node.attr]
            root = _attribute_root(node)
            if roots is None or (root is not None and (root in roots or aliases.get(root, root) in roots)):
                found.append(Violation(line, f"uses {ast.unparse(node)}, which {why}"))
        elif isinstance(node, ast.Name) and node.id in REFERENCE_NAMES and isinstance(node.ctx, ast.Load):
            found.append(Violation(line, f"refers to the reference's {node.id}; candidates must stand alone "
                                         "(inheriting from or calling the reference is a fallback to PyTorch)"))
        elif isinstance(node, ast.Name) and node.id == "__builtins__":
            found.append(Violation(line, "reaches __builtins__"))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                root = _attribute_root(target)
                if isinstance(target, ast.Subscript) and ast.unparse(target.value) == "os.environ":
                    continue  # setting build variables such as TORCH_CUDA_ARCH_LIST; the environment holds no secrets
                if ast.unparse(target).startswith(FLAG_PREFIXES):
                    continue
                if root is not None and aliases.get(root, root) in PATCHABLE_ROOTS:
                    found.append(Violation(line, f"assigns to {ast.unparse(target)}: patching {root} is not allowed"))
        elif isinstance(node, ast.Try) and not allow_torch:
            for handler in node.handlers:
                if _calls_torch(handler, aliases):
                    found.append(Violation(handler.lineno, "falls back to PyTorch in an except clause; a kernel "
                                                           "that fails must fail visibly"))
                    break
    return sorted(set(found), key=lambda v: v.line)


def _check_module(name: str, line: int, found: list[Violation]) -> None:
    top = name.split(".")[0]
    if top in BANNED_MODULES:
        found.append(Violation(line, f"imports {name}, which {BANNED_MODULES[top]}"))


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to modules, mapped to the module's top-level name (import torch.nn.functional as F -> F)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = node.module.split(".")[0]
    return out


def _attribute_root(target: ast.expr) -> str | None:
    if not isinstance(target, (ast.Attribute, ast.Subscript)):
        return None
    node: ast.expr = target
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _calls_torch(handler: ast.ExceptHandler, aliases: dict[str, str]) -> bool:
    for node in ast.walk(handler):
        if isinstance(node, ast.Call):
            func = node.func
            root = _attribute_root(func) if isinstance(func, ast.Attribute) else None
            if root and isinstance(func, ast.Attribute) and aliases.get(root, root) == "torch" \
                    and func.attr not in QUERY_CALLS:
                return True
    return False
