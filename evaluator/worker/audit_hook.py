"""The candidate worker's audit hook: what reaches the harness's own objects (frames, the garbage collector's object
graph, raw memory, tracing, the harness's classes) is refused to all but a few library functions that keep frames to
themselves, and the harness's classes to untrusted code (the candidate's file, code it generates); every refusal is
recorded for the verdict. Python's audit hooks cannot be removed once added.
"""

from __future__ import annotations

import builtins
import os
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from evaluator.worker.library_globals import GenuineGlobals, ModuleFingerprint

# What reaches the harness's own objects (frames, the garbage collector's object graph, raw memory, tracing): refused
# to all but the frame users below and load_c's loader, whatever the stack (see `install`).
_REACHING_EVENTS = frozenset({
    "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
_REACHING_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# The name the code raising a reaching event calls it by (an attribute's event: the attribute's own name).
_EVENT_CALLS = {event: event.rpartition(".")[2] for event in _REACHING_EVENTS}
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
                     "_walk_tb_with_full_positions": frozenset({"traceback.py"}),
                     "*": frozenset()},              # formatting: strings out; the walkers only for itself
    "inspect.py": {"*": frozenset({"torch/_jit_internal.py", "torch/_sources.py", "torch/jit/frontend.py",
                                   "inspect.py"})},  # TorchScript's name resolution
    "torch/library.py": {"*": frozenset()},          # source locations of registrations
    "torch/_library/utils.py": {"*": frozenset()},
    "torch/_jit_internal.py": {"*": frozenset({"torch/_jit_internal.py", "torch/jit/_script.py",
                                                 "torch/jit/frontend.py", "torch/jit/_recursive.py"})},
}

# Frame users that would hand out the reprs of the locals of every frame they walk when asked to (the argument that
# asks): traceback's `StackSummary.extract(walk_stack(None), capture_locals=True)` is the harness's stack as text.
_LOCALS_CAPTURE = {"traceback.py": "capture_locals"}


def install(refusals: list[str], candidate_module: str) -> None:
    """Refuse frame, object-graph, tracing and raw-memory access to everyone but the few library functions known to
    use frames for themselves only (`_FRAME_USERS`: typing's module names, torch's source locations, traceback's
    formatting, TorchScript's name resolution), each for the calls its own code makes, so neither the candidate nor a
    library function it hands a callable to (a pytree map of `sys._getframe`) gets a frame, whatever the stack: a
    finalizer of the candidate's runs library code and builtins from the harness's own frames. Also refuse untrusted
    code setting attributes of functions it did not define (`__code__`, `__defaults__`: Python audits those, not
    class attributes, which `Guards.tampered` fingerprints). A frame user counts only with its module's own globals
    (`library_globals`), while the modules it relies on are unpatched. Every refusal is appended to `refusals` for
    the verdict."""
    paths = sysconfig.get_paths()
    trusted_roots = _trusted_roots(paths)
    ctypes_root = os.path.join(os.path.realpath(paths["stdlib"]), "ctypes") + os.sep
    native_file = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "native.py")
    busy = [False]
    table = {k: dict(v) for k, v in _FRAME_USERS.items()}  # a private copy: the module's dict is reachable
    getframe, realpath = sys._getframe, os.path.realpath
    trusted_files: dict[str, bool] = {}
    frame_users: dict[str, str] = {}  # code file -> its key in _FRAME_USERS ("" when none)
    ends_in, _ = _file_names(paths)
    # The module dicts loaded before the candidate (and lazy imports' own), and what the frame users (and their
    # callers, and load_c's loader) call with a frame: found once in the zygote while no module has been loaded
    # since (the same modules), else now; the names and values those modules bind are taken now either way.
    ahead = _prepared.pop() if _prepared else None
    if ahead is not None and ahead.modules_loaded == len(sys.modules):
        genuine, fingerprint = ahead.genuine, ahead.fingerprint
        fingerprint.bind()
    else:
        genuine, fingerprint = _library_state(paths)
    del ahead

    def trusted(filename: str) -> bool:
        known = trusted_files.get(filename)
        if known is None:
            known = filename.startswith("<frozen ") or realpath(filename).startswith(trusted_roots)
            trusted_files[filename] = known
        return known

    def user_key(filename: str) -> str:
        key = frame_users.get(filename)
        if key is None:
            key = ends_in(filename, table)
            frame_users[filename] = key
        return key

    def captures_locals(frame: Any, key: str) -> bool:
        """Whether a frame of this run of `key`'s frames (the asking one and its callers in the same file) was asked
        to capture locals."""
        while frame is not None and user_key(frame.f_code.co_filename) == key:
            if frame.f_locals.get(_LOCALS_CAPTURE[key]):
                return True
            frame = frame.f_back
        return False

    def allowed_user(frame: Any) -> bool:
        """Whether `frame`, the code asking, is a known frame user running with its own module's globals, called
        the way that keeps frames inside it (a function returning frames only to its own package's callers, each
        of them a frame user called that way in turn, or a caller of the list), while nothing it relies on has
        been rebound."""
        while True:
            code = frame.f_code
            key = user_key(code.co_filename)
            if not key or not genuine.holds(frame.f_globals, code.co_filename, own=True):
                return False
            if key in _LOCALS_CAPTURE and captures_locals(frame, key):
                return False  # the reprs of every local of the frames it walks: the channel's nonce and socket
            callers = table[key].get(code.co_name, table[key].get("*"))
            if callers is None:
                return False
            if not callers:
                break  # keeps its frames to itself, whoever calls it
            frame = frame.f_back
            if frame is None or not ends_in(frame.f_code.co_filename, callers):
                return False
            if not user_key(frame.f_code.co_filename):  # a caller of the list that is no frame user itself
                if not genuine.holds(frame.f_globals, frame.f_code.co_filename, own=True):
                    return False
                break
        return fingerprint.changed() is None

    def native_loader(frame: Any) -> bool:
        """Whether ctypes is used by `load_c`'s own loader and bound functions (`native.py`), through ctypes' own
        module at most: the candidate's native code runs there, and it is judged at the process boundary, since C
        can bypass every guard of this process anyway. The candidate's own ctypes use stays refused."""
        while frame is not None and realpath(frame.f_code.co_filename).startswith(ctypes_root):
            if not genuine.holds(frame.f_globals, frame.f_code.co_filename, own=True):
                return False
            frame = frame.f_back
        return frame is not None and realpath(frame.f_code.co_filename) == native_file and \
            genuine.holds(frame.f_globals, native_file, own=True) and fingerprint.changed() is None

    def names_its_call(code: types.CodeType, name: str) -> bool:
        """Whether the asking code names what raised the event (`sys._getframe`, `tb.tb_frame`): a builtin called
        from C has no frame of its own (a `map` of sys.settrace over the candidate's trace function, iterated by a
        frame user; weakref.finalize calling sys.settrace), and the nearest frame is then someone else's."""
        return name in code.co_names or name in code.co_consts

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
            # file's code: checked below, only for names that would be trusted.
            if len(args) < 2 or not isinstance(args[1], (str, bytes)) or not trusted(os.fsdecode(args[1])):
                return
        elif event not in _REACHING_EVENTS and not event.startswith("ctypes."):
            return
        busy[0] = True
        try:
            asking = getframe(1)
            if event in _CODE_EVENTS:
                # Whatever the stack: a finalizer of the candidate's runs from the harness's own frames, and C
                # (`map(compile, ...)`) calls code makers with no frame of its own on the stack.
                if event == "compile" and is_that_files_source(*args[:2]):
                    return
                refuse(f"compiling code under a library's file name ({os.path.basename(os.fsdecode(args[1]))})")
            if event in ("object.__setattr__", "object.__delattr__"):
                if not trusted(asking.f_code.co_filename):
                    refuse(f"setting {getattr(args[0], '__qualname__', '?')}.{args[1]}")
                return
            # Whoever is on the stack: a finalizer of the candidate's runs from the harness's own frames, and a
            # library function or builtin it names (CustomOp._register_impl, whose module's `inspect` the candidate
            # rebound; `list(map(spy, iter(inspect.stack, None)))`; sys.settrace itself) hands what it takes on.
            if event.startswith("ctypes."):
                if native_loader(asking):
                    return
            elif names_its_call(asking.f_code, args[1] if event == "object.__getattr__" else _EVENT_CALLS[event]) \
                    and allowed_user(asking):
                return
            refuse(f"{event} {args[1]}" if event == "object.__getattr__" else event)
        finally:
            busy[0] = False

    import logging
    logging.currentframe = lambda: None  # type: ignore[assignment,return-value] # log records need no caller's frame
    sys.addaudithook(hook)


@dataclass(frozen=True, slots=True)
class _Prepared:
    """What `install` finds among the loaded modules, found in the candidate's zygote before it forks: a worker
    would pay about 17 ms for it (touching every module's object after the fork copies their pages)."""

    modules_loaded: int  # len(sys.modules) then: a worker where more are loaded finds them again
    genuine: GenuineGlobals
    fingerprint: ModuleFingerprint


_prepared: list[_Prepared] = []


def prepare_ahead() -> None:
    """In the candidate's zygote, once its imports are done and before it forks: each worker's `install` takes this
    over (and drops this module's reference) where no module was loaded since."""
    genuine, fingerprint = _library_state(sysconfig.get_paths())
    _prepared[:] = [_Prepared(len(sys.modules), genuine, fingerprint)]


def _library_state(paths: dict[str, str]) -> tuple[GenuineGlobals, ModuleFingerprint]:
    """The module dicts loaded now (`GenuineGlobals`), and the fingerprint of what the frame users (and their
    callers, and load_c's loader) call with a frame: their modules, the standard library's modules they hold, and
    the builtins, as bound now."""
    realpath = os.path.realpath
    ends_in, standard_library = _file_names(paths)
    genuine = GenuineGlobals(realpath)
    relied_on = set(_FRAME_USERS) | {c for v in _FRAME_USERS.values() for cs in v.values() for c in cs} | {
        "evaluator/native.py", "ctypes/__init__.py"}
    tails = tuple(os.sep + name for name in relied_on)  # a cheap filter first: realpath costs ~30 us a module
    files = [(m, f) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType) and
             isinstance(f := getattr(m, "__file__", None), str) and f.endswith(tails)]
    fingerprint = ModuleFingerprint([m for m, f in files if ends_in(f, relied_on)] + [builtins], standard_library)
    return genuine, fingerprint


def _trusted_roots(paths: dict[str, str]) -> tuple[str, ...]:
    return tuple({os.path.realpath(p) + os.sep for p in (
        paths["stdlib"], paths["purelib"], paths["platlib"],
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))})


def _file_names(paths: dict[str, str]) -> tuple[Callable[[str, Iterable[str]], str],
                                                Callable[[types.ModuleType], bool]]:
    """`ends_in(filename, endings)`: the name in `endings` a file has below its library root ('typing.py',
    'torch/library.py'), or ''; `standard_library(module)`: whether a module is the standard library's."""
    realpath = os.path.realpath
    stdlib_root = realpath(paths["stdlib"]) + os.sep
    site_roots = tuple({realpath(paths["purelib"]) + os.sep, realpath(paths["platlib"]) + os.sep})
    # The roots a library file is named from, the most specific first: site-packages lies inside the stdlib's folder.
    name_roots = sorted(_trusted_roots(paths), key=len, reverse=True)

    def ends_in(filename: str, endings: Iterable[str]) -> str:
        real = realpath(filename)
        rel = next((real[len(root):] for root in name_roots if real.startswith(root)), real)
        return rel if rel in endings else ""

    def standard_library(module: types.ModuleType) -> bool:
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            return False
        real = file if file.startswith(stdlib_root) else realpath(file)  # the usual case needs no realpath
        return real.startswith(stdlib_root) and not real.startswith(site_roots)

    return ends_in, standard_library
