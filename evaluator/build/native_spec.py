"""What one `load_c` call asks to build (`NativeSpec`), and the C prototypes of the functions it binds.

Shared by the public `load_c` (`native.py`), the local build (`native_build.py`) and, inside the evaluator, the
trusted build stage: a spec is plain data (name, sources, function names, flags from an allow-list, language), so a
sandboxed worker can send it to its driver and the driver can check it without running any of the candidate's code.

A bound function's prototype `RET NAME(ARGS)` is parsed from the sources: pointer arguments take contiguous CPU
tensors of the pointee's dtype (`void*`: any dtype), scalar arguments take Python numbers.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

import torch

MAX_SOURCE_CHARS = 2 * 2**20
LANGUAGES = ("c", "c++")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
# Code-generation, warning and debug flags: the builder adds its own output, position and link flags, so nothing
# here can name a file, a plugin or a linker option (-o, -I, -include, -fplugin, -Wl,..., @file stay refused). A
# named -march is refused too (its instructions may be ones this CPU lacks: `-march=native` says what it has); the
# ISA extensions (-mavx512vnni...) are the kernel's own promise, a SIGILL at run time where it is wrong. The same
# families as `load_inline`'s flags (`cpu_extension.ALLOWED_CFLAGS`), so that one kernel's flags pass both: an
# honest C++ kernel built with `-pthread` or `-Wall` was refused here before 2026-11-29.
_FLAG = re.compile(r"-O[0-3s]|-Ofast|-march=(native|x86-64|x86-64-v[234])|-mtune=native|-fopenmp(-simd)?|"
                   r"-ffast-math|-funroll-loops|-fno-math-errno|"
                   r"-fno-trapping-math|-ffp-contract=(fast|off|on)|-mavx|-mavx2|-mfma|-mavx512[a-z0-9]+|-mf16c|"
                   r"-mbmi2?|-mpopcnt|-msse4(\.[12])?|-mssse3|-mamx-(tile|bf16|int8|fp16)|-mavxvnni|"
                   r"-std=(c99|gnu99|c11|c17|gnu11|gnu17|(c|gnu)\+\+(14|17|20))|"
                   r"-[DU][A-Za-z_][A-Za-z0-9_]{0,99}(=[A-Za-z0-9_.+-]{0,100})?|"
                   r"-fno-strict-aliasing|-ftree-vectorize|-fopt-info-vec|"
                   r"-mprefer-vector-width=(128|256|512)|-fPIC|-pthread|-g|-g0|-w|-W[a-z][a-z0-9-]*(=[0-9]+)?|"
                   r"-fno-exceptions|-fno-rtti|-fvisibility=(hidden|default)")
ALLOWED_FLAGS = ("-O0..-O3, -Ofast, -Os, -march=native|x86-64|x86-64-v2|x86-64-v3|x86-64-v4, -mtune=native, "
                 "-fopenmp(-simd), -ffast-math, -funroll-loops, "
                 "-fno-math-errno, -fno-trapping-math, -ffp-contract=fast|off|on, -mavx, -mavx2, -mfma, "
                 "-mavx512<part>, -mf16c, -mbmi, -mbmi2, -mpopcnt, -msse4*, -mssse3, -mamx-tile|bf16|int8|fp16, "
                 "-mavxvnni, -std=c99|c11|c17|c++14|c++17|c++20 (or gnu), -DNAME[=VALUE], -UNAME, "
                 "-fno-strict-aliasing, -ftree-vectorize, -fopt-info-vec, -mprefer-vector-width=128|256|512, "
                 "-fPIC, -pthread, -g, -g0, -w, -W<warning>, -fno-exceptions, -fno-rtti, -fvisibility=hidden|default")

# C type (qualifiers dropped, words normalised) -> (ctypes type of a scalar of it, dtypes a pointer to it takes).
_I8, _U8, _I16, _U16 = torch.int8, torch.uint8, torch.int16, torch.uint16
_I32, _U32, _I64, _U64 = torch.int32, torch.uint32, torch.int64, torch.uint64
TYPES: dict[str, tuple[Any, tuple[torch.dtype, ...]]] = {
    "float": (ctypes.c_float, (torch.float32,)), "double": (ctypes.c_double, (torch.float64,)),
    "_Float16": (None, (torch.float16,)), "__fp16": (None, (torch.float16,)), "__bf16": (None, (torch.bfloat16,)),
    "char": (ctypes.c_int8, (_I8, _U8)), "signed char": (ctypes.c_int8, (_I8,)), "int8_t": (ctypes.c_int8, (_I8,)),
    "unsigned char": (ctypes.c_uint8, (_U8,)), "uint8_t": (ctypes.c_uint8, (_U8,)),
    "bool": (ctypes.c_bool, (torch.bool,)), "_Bool": (ctypes.c_bool, (torch.bool,)),
    "short": (ctypes.c_int16, (_I16,)), "int16_t": (ctypes.c_int16, (_I16,)),
    "unsigned short": (ctypes.c_uint16, (_U16,)), "uint16_t": (ctypes.c_uint16, (_U16,)),
    "int": (ctypes.c_int32, (_I32,)), "int32_t": (ctypes.c_int32, (_I32,)),
    "unsigned int": (ctypes.c_uint32, (_U32,)), "uint32_t": (ctypes.c_uint32, (_U32,)),
    "long": (ctypes.c_int64, (_I64,)), "long long": (ctypes.c_int64, (_I64,)), "int64_t": (ctypes.c_int64, (_I64,)),
    "ptrdiff_t": (ctypes.c_int64, (_I64,)), "ssize_t": (ctypes.c_int64, (_I64,)),
    "unsigned long": (ctypes.c_uint64, (_U64,)), "unsigned long long": (ctypes.c_uint64, (_U64,)),
    "uint64_t": (ctypes.c_uint64, (_U64,)), "size_t": (ctypes.c_uint64, (_U64,)),
    "void": (None, ()),
}
_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "register", "static", "inline",
               "__inline", "__inline__", "extern"}
_TYPE_WORDS = {"unsigned", "signed", "char", "short", "int", "long", "float", "double", "void", "bool", "_Bool",
               *(t for t in TYPES if " " not in t)}


class PrototypeError(ValueError):
    """A bound function is missing from the sources or its prototype is not one `load_c` can call."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One parameter: `ctype` its C type without qualifiers ("float"), `pointer` whether it is `ctype*`."""

    name: str
    ctype: str
    pointer: bool

    def describe(self, index: int) -> str:
        return f"argument {index} {self.name!r}" if self.name else f"argument {index}"


@dataclass(frozen=True, slots=True)
class Prototype:
    name: str
    returns: str  # a scalar type or "void"
    args: tuple[Arg, ...]


@dataclass(frozen=True, slots=True)
class NativeSpec:
    """What one `load_c` call asks to build; `digest` names it (with the compiler's version) in a build cache."""

    name: str
    sources: tuple[str, ...]
    functions: tuple[str, ...]
    flags: tuple[str, ...] = ()
    language: str = "c"

    @classmethod
    def from_call(cls, name: Any, sources: Any, functions: Any, flags: Any = (), language: Any = "c") -> "NativeSpec":
        """The spec of a `load_c` call; raises TypeError or ValueError (one sentence) for anything it cannot build."""
        if isinstance(sources, str):
            sources = (sources,)
        if isinstance(functions, str):
            functions = (functions,)
        if isinstance(flags, str):
            flags = tuple(flags.split())
        for what, value in (("sources", sources), ("functions", functions), ("flags", flags)):
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"load_c({name!r}): {what} must be a string or a list of strings")
        spec = cls(str(name), tuple(sources), tuple(functions), tuple(f.strip() for f in flags), str(language))
        spec.validate()
        return spec

    def validate(self) -> None:
        """Raises ValueError (one sentence) unless every field is safe to hand to a compiler."""
        where = f"load_c({self.name[:60]!r})"
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"{where}: the name must be a C identifier")
        if self.language not in LANGUAGES:
            raise ValueError(f"{where}: language must be 'c' or 'c++', not {self.language[:20]!r}")
        if not self.sources or not any(s.strip() for s in self.sources):
            raise ValueError(f"{where}: the sources are empty")
        if sum(map(len, self.sources)) > MAX_SOURCE_CHARS:
            raise ValueError(f"{where}: the sources are longer than {MAX_SOURCE_CHARS} characters")
        if not self.functions:
            raise ValueError(f"{where}: functions must name at least one function to bind")
        for fn in self.functions:
            if not _NAME.fullmatch(fn):
                raise ValueError(f"{where}: the function name {fn[:60]!r} is not a C identifier")
        if len(set(self.functions)) != len(self.functions):
            raise ValueError(f"{where}: functions names a function twice")
        for flag in self.flags:
            if not _FLAG.fullmatch(flag):
                raise ValueError(f"{where}: the flag {flag[:60]!r} is not allowed (allowed: {ALLOWED_FLAGS})")
        self.prototypes()

    def prototypes(self) -> tuple[Prototype, ...]:
        text = strip_comments("\n".join(self.sources))
        return tuple(parse_prototype(text, fn, self.name) for fn in self.functions)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sources": list(self.sources), "functions": list(self.functions),
                "flags": list(self.flags), "language": self.language}

    @classmethod
    def from_json(cls, data: Any) -> "NativeSpec":
        """Rebuilds a spec sent by an untrusted worker; raises ValueError for anything malformed."""
        if not isinstance(data, dict):
            raise ValueError("the native build spec is not an object")
        try:
            return cls.from_call(data["name"], data["sources"], data["functions"], data.get("flags", ()),
                                 data.get("language", "c"))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed native build spec: {exc}") from None

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()


# -- prototypes --------------------------------------------------------------------------------------------------------
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_NOISE = re.compile(r'extern\s*"C"|__attribute__\s*\(\(.*?\)\)|\bstd::', re.S)


def strip_comments(text: str) -> str:
    return _NOISE.sub(" ", _COMMENTS.sub(" ", text))


def parse_prototype(text: str, fn: str, library: str) -> Prototype:
    """The prototype of `fn` in `text` (comments stripped): its definition `RET fn(ARGS) {`, else a declaration."""
    pattern = re.compile(rf"(?m)(?:^|(?<=[;{{}}]))[ \t]*([A-Za-z_][\w \t*]*?)[ \t]*\n?[ \t]*\b{fn}\s*\(([^()]*)\)\s*"
                         r"(\{|;)")
    found = [m for m in pattern.finditer(text)]
    if not found:
        raise PrototypeError(f"load_c({library!r}): the sources define no function {fn}(...) with a prototype "
                             f"'RET {fn}(ARGS)' that load_c can read")
    match = next((m for m in found if m.group(3) == "{"), found[0])
    where = f"load_c({library!r}): {fn}()"
    ret_type, ret_pointer, _ = _parse_decl(match.group(1), where, "the return type", named=False)
    if ret_pointer or (ret_type != "void" and TYPES[ret_type][0] is None):
        raise PrototypeError(f"{where} must return void or a scalar (int, int64_t, float, double...), not "
                             f"{match.group(1).strip()!r}")
    params = [p.strip() for p in match.group(2).split(",")]
    if params in ([""], ["void"]):
        return Prototype(fn, ret_type, ())
    args = []
    for i, param in enumerate(params, 1):
        ctype, pointer, name = _parse_decl(param, where, f"argument {i}", named=True)
        if not pointer and (ctype == "void" or TYPES[ctype][0] is None):
            raise PrototypeError(f"{where}: argument {i} {param!r} is neither a pointer nor a scalar load_c can pass")
        args.append(Arg(name, ctype, pointer))
    return Prototype(fn, ret_type, tuple(args))


def _parse_decl(decl: str, where: str, what: str, named: bool) -> tuple[str, bool, str]:
    """(C type, is a pointer, parameter name) of one declaration such as `const float* restrict x`."""
    text = decl.strip()
    pointer = False
    if text.endswith("]"):  # float x[] / float x[restrict]
        text, pointer = text[:text.index("[")], True
    stars = text.count("*")
    if stars > 1 or (stars and pointer):
        raise PrototypeError(f"{where}: {what} {decl!r} is a pointer to a pointer; pass flat tensors instead")
    pointer = pointer or stars == 1
    words = [w for w in text.replace("*", " ").split() if w not in _QUALIFIERS]
    name = ""
    if named and len(words) > 1 and words[-1] not in _TYPE_WORDS:
        name = words.pop()
    ctype = _normalise(words)
    if ctype is None:
        raise PrototypeError(f"{where}: {what} {decl.strip()!r} has a type load_c does not know (use float, double, "
                             "int64_t, int32_t, uint8_t, bool, void*...)")
    return ctype, pointer, name


def _normalise(words: list[str]) -> str | None:
    if not words:
        return None
    if len(words) == 1 and words[0] in TYPES:
        return words[0]
    unsigned = "unsigned" in words
    rest = [w for w in words if w not in ("signed", "unsigned", "int")]
    if any(w not in ("char", "short", "long") for w in rest):
        return None
    base = " ".join(rest) or "int"
    if base == "char" and "signed" in words:
        base = "signed char"
    elif unsigned:
        base = f"unsigned {base}"
    return base if base in TYPES else None
