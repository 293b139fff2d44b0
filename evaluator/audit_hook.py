"""The candidate worker's audit hook: what reaches the harness's own objects (frames, the garbage collector's object
graph, raw memory, tracing, the harness's classes) is refused to untrusted code (the candidate's file, code it
generates), and every refusal is recorded for the verdict. Python's audit hooks cannot be removed once added.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from typing import Any

# What reaches the harness's own objects (frames, the garbage collector's object graph, raw memory, tracing): refused
# to code that is not torch's, Triton's or the harness's while the candidate is on the stack (see `install`).
_REACHING_EVENTS = frozenset({
    "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
_REACHING_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# What makes a code object, with the file name it will claim (`compile`: source, file name; `code.__new__`: code,
# file name, ...): the hook trusts code by that name, so only a library's own source may claim a library's file.
_CODE_EVENTS = frozenset({"compile", "code.__new__"})
# Library code that may use frames while the candidate is on the stack: file (its path's ending) -> function name
# ("*": any) -> the files its caller must be in for the frames to stay inside (empty: whoever calls it).
_FRAME_USERS: dict[str, dict[str, frozenset[str]]] = {
    "typing.py": {"*": frozenset()},                 # module names for TypeVar, NewType, NamedTuple...
    "typing_extensions.py": {"*": frozenset()},
    "collections/__init__.py": {"*": frozenset()},   # namedtuple's __module__
    "enum.py": {"*": frozenset()},                   # the functional API's __module__
    "dataclasses.py": {"*": frozenset()},
    "abc.py": {"*": frozenset()},
    "warnings.py": {"*": frozenset()},
    "traceback.py": {"walk_tb": frozenset({"traceback.py"}), "walk_stack": frozenset({"traceback.py"}),
                     "*": frozenset()},              # formatting: strings out; the walkers only for itself
    "inspect.py": {"*": frozenset({"torch/_jit_internal.py", "torch/_sources.py", "torch/jit/frontend.py",
                                   "inspect.py"})},  # TorchScript's name resolution
    "torch/library.py": {"*": frozenset()},          # source locations of registrations
    "torch/_library/utils.py": {"*": frozenset()},
    "torch/_jit_internal.py": {"*": frozenset({"torch/_jit_internal.py", "torch/jit/_script.py",
                                                 "torch/jit/frontend.py", "torch/jit/_recursive.py"})},
}


def install(refusals: list[str], candidate_module: str) -> None:
    """While untrusted code (the candidate's file, code it generates) is on the stack, refuse frame, object-graph,
    tracing and raw-memory access to everyone but the few library functions known to use frames for themselves only
    (`_FRAME_USERS`: typing's module names, torch's source locations, traceback's formatting, TorchScript's name
    resolution), so neither the candidate nor a library function it hands a callable to (a pytree map of
    `sys._getframe`) gets a frame. Also refuse untrusted code setting attributes of functions it did not define
    (`__code__`, `__defaults__`: Python audits those, not class attributes, which `Guards.tampered` fingerprints).
    Every refusal is appended to `refusals` for the verdict."""
    paths = sysconfig.get_paths()
    stdlib_root = os.path.realpath(paths["stdlib"]) + os.sep
    trusted_roots = tuple({os.path.realpath(p) + os.sep for p in (
        paths["stdlib"], paths["purelib"], paths["platlib"],
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))})
    ctypes_root = os.path.join(os.path.realpath(paths["stdlib"]), "ctypes") + os.sep
    native_file = os.path.join(os.path.dirname(os.path.realpath(__file__)), "native.py")
    busy = [False]
    table = {k: dict(v) for k, v in _FRAME_USERS.items()}  # a private copy: the module's dict is reachable
    getframe, realpath = sys._getframe, os.path.realpath
    trusted_files: dict[str, bool] = {}
    frame_users: dict[str, str] = {}  # code file -> its key in _FRAME_USERS ("" when none)

    def trusted(filename: str) -> bool:
        known = trusted_files.get(filename)
        if known is None:
            known = filename.startswith("<frozen ") or realpath(filename).startswith(trusted_roots)
            trusted_files[filename] = known
        return known

    def user_key(filename: str) -> str:
        key = frame_users.get(filename)
        if key is None:
            real = realpath(filename)
            rel = real[len(stdlib_root):] if real.startswith(stdlib_root) else real
            key = next((k for k in table if rel.endswith(k)), "")
            frame_users[filename] = key
        return key

    def allowed_user(frame: Any) -> bool:
        """Whether `frame`, the code asking, is a known frame user and is called the way that keeps frames
        inside it (a function returning frames only to its own package's callers)."""
        code = frame.f_code
        key = user_key(code.co_filename)
        if not key:
            return False
        callers = table[key].get(code.co_name, table[key].get("*"))
        if callers is None:
            return False
        if not callers:
            return True  # keeps its frames to itself, whoever calls it
        caller = frame.f_back
        return caller is not None and user_key(caller.f_code.co_filename) in callers

    def native_loader(frame: Any) -> bool:
        """Whether ctypes is used by `load_c`'s own loader and bound functions (`native.py`), through ctypes' own
        module at most: the candidate's native code runs there, and it is judged at the process boundary, since C
        can bypass every guard of this process anyway. The candidate's own ctypes use stays refused."""
        while frame is not None and realpath(frame.f_code.co_filename).startswith(ctypes_root):
            frame = frame.f_back
        return frame is not None and realpath(frame.f_code.co_filename) == native_file

    def untrusted_on_stack(frame: Any) -> bool:
        while frame is not None:
            if not trusted(frame.f_code.co_filename):
                return True
            frame = frame.f_back
        return False

    def is_that_files_source(source: Any, filename: str | bytes) -> bool:
        """Whether `source` is the named file's own text: the import system compiling a library module that has no
        cached bytecode, while the candidate's code (a lazy import inside its forward) is on the stack."""
        if not isinstance(source, (str, bytes)):
            return False  # an AST: the import system never compiles one
        try:
            with open(filename, "rb") as f:
                text = f.read()
        except OSError:
            return False
        return text == (source.encode("utf-8") if isinstance(source, str) else source)

    def refuse(what: str) -> None:
        refusals.append(f"the candidate reached for the harness's internals ({what})")
        raise RuntimeError(f"opforge refused {what}: candidates may not reach frames, the object graph, raw "
                           "memory or the harness's classes")

    def hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        if event in ("object.__setattr__", "object.__delattr__"):
            target = args[0] if args else None
            if not isinstance(target, (type, types.FunctionType)):
                return
            if getattr(target, "__module__", None) == candidate_module:
                return
        elif event == "object.__getattr__":
            if len(args) < 2 or args[1] not in _REACHING_ATTRIBUTES:
                return
        elif event in _CODE_EVENTS:
            # Trust follows the file a code object names, so code may name a library's file only if it is that
            # file's code: checked below, against the stack, only for names that would be trusted.
            if len(args) < 2 or not isinstance(args[1], (str, bytes)) or not trusted(os.fsdecode(args[1])):
                return
        elif event not in _REACHING_EVENTS and not event.startswith("ctypes."):
            return
        busy[0] = True
        try:
            asking = getframe(1)
            if event in _CODE_EVENTS:
                if not untrusted_on_stack(asking) or (event == "compile" and is_that_files_source(*args[:2])):
                    return
                refuse(f"compiling code under a library's file name ({os.path.basename(os.fsdecode(args[1]))})")
            if event in ("object.__setattr__", "object.__delattr__"):
                if not trusted(asking.f_code.co_filename):
                    refuse(f"setting {getattr(args[0], '__qualname__', '?')}.{args[1]}")
                return
            if allowed_user(asking) or (event.startswith("ctypes.") and native_loader(asking)):
                return
            frame: Any = asking  # a FrameType, then f_back's None at the bottom of the stack
            while frame is not None:
                if not trusted(frame.f_code.co_filename):
                    refuse(f"{event} {args[1]}" if event == "object.__getattr__" else event)
                frame = frame.f_back
        finally:
            busy[0] = False

    import logging
    logging.currentframe = lambda: None  # type: ignore[assignment,return-value] # log records need no caller's frame
    sys.addaudithook(hook)
