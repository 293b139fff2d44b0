"""Whether a library's frame runs a library's code as the library wrote it: with its own module's globals, unpatched.

The audit hook (`audit_hook.py`) trusts a frame by the file its code object names, and lets a few library functions
use frames (`_FRAME_USERS`). A code object is not a function, though: the same trusted code runs with whatever
globals it is given (`types.FunctionType(code, globals)` and `exec` of a library file's own compiled source raise no
audit event), and a module's globals can be rebound (module attribute writes are not audited). Either way the names
a library function calls with a frame (`inspect.getframeinfo(sys._getframe(n))`, `getouterframes(...)`) are the
candidate's, and the frame lands in candidate code. So a frame is trusted only if its globals are the dict of a module
the import system made (`GenuineGlobals`), and the frame users are allowed only while the modules they and what they
call rely on still hold the values they had before the candidate loaded (`ModuleFingerprint`).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

# Values whose rebinding changes what library code calls: modules, functions, classes, builtins.
_CALLABLE_KINDS = (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType)
# Hooks the standard library expects to be rebound (`warnings.catch_warnings(record=True)` swaps them for its block,
# logging.captureWarnings for good), called with a warning's text and place, never a frame.
_REBOUND_HOOKS = {"warnings": frozenset({"showwarning", "_showwarnmsg_impl", "formatwarning", "_formatwarnmsg_impl"})}


class GenuineGlobals:
    """The module dicts a library frame may run with: every module loaded before the candidate (taken at
    construction), and a module imported later (a lazy import) when it is the plain module registered in
    `sys.modules` under the name its globals hold and its `__file__` is the frame's code file."""

    def __init__(self, realpath: Callable[[str], str] = os.path.realpath) -> None:
        # Bound now: what the hook calls must not be looked up later in globals or builtins the candidate can reach.
        self._realpath, self._modules, self._type = realpath, sys.modules, type
        self._get: Callable[..., Any] = dict.get
        self._known: dict[int, dict[str, Any]] = {}  # id -> the dict itself (held, so the id stays its own)
        for module in list(sys.modules.values()):
            space = getattr(module, "__dict__", None)
            if type(space) is dict:
                self._known[id(space)] = space

    def holds(self, space: Any, code_file: str, own: bool = False) -> bool:
        """Whether `space` (a frame's f_globals) is a genuine module's dict for code from `code_file` (with `own`,
        the dict of that very file's module). Reads nothing through candidate-defined methods: exact dicts and
        modules only."""
        get, kind = self._get, self._type
        if kind(space) is not dict:
            return False
        if get(self._known, id(space)) is space:
            return not own or self._same_file(get(space, "__file__"), code_file)
        name = get(space, "__name__")
        module = get(self._modules, name) if kind(name) is str else None
        if kind(module) is not types.ModuleType or module.__dict__ is not space:
            return False
        if not self._same_file(get(space, "__file__"), code_file):
            return False
        self._known[id(space)] = space
        return True

    def _same_file(self, file: Any, code_file: str) -> bool:
        return self._type(file) is str and self._realpath(file) == self._realpath(code_file)


class ModuleFingerprint:
    """The modules, functions, classes and builtins that `modules` (and, transitively, the standard library's
    modules they hold) bind at construction or at the last `bind`, compared by identity: a rebinding
    (`inspect.getframeinfo = spy`, `torch._library.utils.inspect = spy`) shows as the first changed name."""

    def __init__(self, modules: Iterable[types.ModuleType], follow: Callable[[types.ModuleType], bool]) -> None:
        self.modules = followed(modules, follow)
        self._entries: list[tuple[str, dict[str, Any], tuple[str, ...], tuple[Any, ...]]] = []
        self._get: Callable[..., Any] = dict.get
        self._zip = zip
        self.bind()

    def bind(self) -> None:
        """Take the names and values the modules bind now: what `changed` compares with from here on. The modules
        followed stay those found at construction (a zygote finds them once; each worker binds before its
        candidate loads)."""
        self._entries = []
        for module in self.modules:
            space = vars(module)
            hooks = _REBOUND_HOOKS.get(module.__name__, frozenset())
            names = tuple(k for k, v in space.items() if isinstance(v, _CALLABLE_KINDS) and k not in hooks)
            self._entries.append((module.__name__, space, names, tuple(space[k] for k in names)))

    def changed(self) -> str | None:
        """The first name rebound or removed since `bind` ('inspect.getframeinfo'), or None."""
        missing, get = object(), self._get
        for label, space, names, values in self._entries:
            for name, value in self._zip(names, values):
                if get(space, name, missing) is not value:
                    return f"{label}.{name}"
        return None


def followed(modules: Iterable[types.ModuleType],
             follow: Callable[[types.ModuleType], bool]) -> tuple[types.ModuleType, ...]:
    """`modules` and, transitively, the modules they hold for which `follow` says so (asked once per module)."""
    seen: dict[int, types.ModuleType] = {}
    judged: dict[int, bool] = {}
    todo = [m for m in modules if isinstance(m, types.ModuleType)]
    while todo:
        module = todo.pop()
        if id(module) in seen:
            continue
        seen[id(module)] = module
        for value in list(vars(module).values()):
            if isinstance(value, types.ModuleType) and id(value) not in seen:
                if id(value) not in judged:
                    judged[id(value)] = follow(value)
                if judged[id(value)]:
                    todo.append(value)
    return tuple(seen.values())
