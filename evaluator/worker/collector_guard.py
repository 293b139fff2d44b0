"""The candidate's worker keeps the garbage collector from saving what it frees.

With `gc.DEBUG_SAVEALL` set, a collection puts every unreachable object in `gc.garbage` instead of freeing it: a
candidate keeping a cycle through its own forward's frame finds that finished frame there, and a finished frame
keeps its caller's frame as `f_back`, so it walks up into the worker's live frames and their locals. Nothing on that
way raises an audit event (`gc.set_debug`, `gc.collect`, a list read, `f_back`, `f_locals`), and a Python-level
replacement of `gc.set_debug` does not hold: a fresh instance of the `gc` module (`importlib.util.module_from_spec`)
brings its own. So the C function behind `set_debug` is swapped in the `gc` module's method table, which every
instance shares, for the one behind `gc.is_tracked` (the same calling convention: one object in, a bool out):
`set_debug` still answers, and the flags stay 0.
"""

from __future__ import annotations

import ctypes
import gc

_METH_O = 0x0008  # PyMethodDef.ml_flags of a C function taking one argument
_POINTER = ctypes.sizeof(ctypes.c_void_p)


def _method_def(builtin: object) -> int:
    """The address of the PyMethodDef a builtin function calls through: PyCFunctionObject's `m_ml`, right after the
    object header (reference count, type)."""
    address = ctypes.c_void_p.from_address(id(builtin) + 2 * _POINTER).value
    if not address:
        raise RuntimeError("no method table entry")
    return address


def _entry(builtin: object, name: bytes) -> int:
    """The method table entry of `builtin`, checked to be the C function `name` taking one argument."""
    entry = _method_def(builtin)
    if ctypes.c_char_p.from_address(entry).value != name or \
            ctypes.c_int.from_address(entry + 2 * _POINTER).value != _METH_O:
        raise RuntimeError(f"gc.{name.decode()} is not the C function this guard expects")
    return entry


def forbid_saving() -> str | None:
    """Make `gc.set_debug` of every `gc` module instance leave the flags at 0 (for the rest of this process); None
    when it holds, else why not (this Python's `gc` is not laid out as expected: the worker then refuses to run
    candidates rather than run them with the hole open)."""
    try:
        gc.set_debug(0)
        target = _entry(gc.set_debug, b"set_debug")
        harmless = _entry(gc.is_tracked, b"is_tracked")
        function = ctypes.c_void_p.from_address(harmless + _POINTER).value
        ctypes.c_void_p.from_address(target + _POINTER).value = function
    except (RuntimeError, ValueError, OSError) as error:
        return f"the garbage collector's flags could not be fixed: {error}"
    gc.set_debug(gc.DEBUG_SAVEALL)
    if gc.get_debug() != 0:
        return "the garbage collector's flags could not be fixed: gc.set_debug still sets them"
    return None
