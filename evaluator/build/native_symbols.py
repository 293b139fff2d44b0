"""What a native candidate library may call: the C and C++ runtimes, never PyTorch's libraries or their BLAS.

PyTorch's profiler sees work that reaches the dispatcher. A `load_c` library that resolves a symbol of libtorch (an
ATen kernel's entry point, `at::native::...`) or of the BLAS that libtorch carries (`sgemm_`, `cblas_sgemm`, MKL's,
oneDNN's) computes with PyTorch below that view, and so does one that looks such a symbol up at run time (`dlsym`,
`dl_iterate_phdr`). A library loads into the worker after `import torch`, so the dynamic loader would resolve those
names for it; this check, made by the driver on the library's bytes before the worker ever receives them, refuses
them instead (issue 33, class 6):

- every symbol the library leaves undefined must be defined by one of the runtimes a C or C++ kernel may use
  (`RUNTIMES`: libc, libm and its vector maths, libgomp, libstdc++, libgcc_s, libatomic, the dynamic loader's
  thread-local storage), whatever else is loaded in
  the process that runs it; a weak reference counts like any other (it would bind to libtorch's all the same);
- the runtimes' symbol look-ups (`dlopen`, `dlsym`, `dl_iterate_phdr` and their kin) are not among them.

What it cannot see: a library that finds libtorch's code by reading its own process's memory (parsing
/proc/self/maps and ELF tables itself, no symbol named). docs/EVALUATOR.md lists that as open.

The library is read as ELF64 (the x86-64 and aarch64 builds this project makes); a file it cannot read is refused.
"""

from __future__ import annotations

import ctypes
import functools
import re
import struct
from pathlib import Path

RUNTIMES = ("libc.so.6", "libm.so.6", "libmvec.so.1", "libgomp.so.1", "libstdc++.so.6", "libgcc_s.so.1",
            "libatomic.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1",
            "libomp.so", "libomp.so.5", "libquadmath.so.0",  # clang's OpenMP, __float128
            "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1")  # the loader: __tls_get_addr for thread_local data
# Looking symbols up at run time would undo the check: the runtimes' own look-up functions are refused by name.
LOOKUPS = re.compile(r"^(_?_?libc_)?(dl(open|sym|vsym|mopen|addr|addr1|info|close|error|_iterate_phdr)|_dl_\w+)$")
# Names the toolchain leaves undefined in every shared library, resolved (or left null) harmlessly.
TOOLCHAIN_WEAK = frozenset({"__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
                            "__cxa_finalize", "_Jv_RegisterClasses"})

_SHT_DYNSYM = 11
_SHN_UNDEF = 0


class UnreadableLibrary(ValueError):
    """Bytes that are not a 64-bit little-endian ELF file with a dynamic symbol table."""


def dynamic_symbols(data: bytes) -> tuple[set[str], set[str]]:
    """(undefined, defined) names of an ELF64 little-endian file's dynamic symbol table."""
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise UnreadableLibrary("not a 64-bit little-endian ELF file")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        undefined: set[str] = set()
        defined: set[str] = set()
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind != _SHT_DYNSYM or not entsize:
                continue
            str_offset, str_size = sections[link][4], sections[link][5]
            strings = data[str_offset:str_offset + str_size]
            for k in range(1, size // entsize):  # entry 0 is the null symbol
                st_name, _st_info, _st_other, st_shndx = struct.unpack_from("<IBBH", data, offset + k * entsize)
                end = strings.index(b"\0", st_name)
                name = strings[st_name:end].decode("ascii", "replace")
                if name:
                    (undefined if st_shndx == _SHN_UNDEF else defined).add(name.split("@")[0])
        return undefined, defined
    except (struct.error, IndexError, ValueError) as exc:
        raise UnreadableLibrary(f"its ELF tables could not be read ({exc})") from None


@functools.cache
def runtime_symbols() -> frozenset[str]:
    """Every symbol the runtimes define, read from the files this machine loads for them (found through this
    process's own mappings once each is loaded; a runtime the machine lacks defines nothing)."""
    names: set[str] = set()
    for path in _runtime_paths():
        try:
            names |= dynamic_symbols(path.read_bytes())[1]
        except (OSError, UnreadableLibrary):
            continue
    return frozenset(n for n in names if not LOOKUPS.match(n))


def _runtime_paths() -> list[Path]:
    for soname in RUNTIMES:
        try:
            ctypes.CDLL(soname, mode=ctypes.RTLD_LOCAL)
        except OSError:
            continue
    wanted = {s.split(".so")[0] for s in RUNTIMES}
    paths: dict[str, Path] = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/"):
                path = Path(parts[5])
                stem = path.name.split(".so")[0]
                if stem in wanted and ".so" in path.name:
                    paths.setdefault(stem, path)
    return list(paths.values())


def refusal(library: bytes, name: str) -> str | None:
    """Why the built library `name` may not run as a native kernel, or None."""
    try:
        undefined, _ = dynamic_symbols(library)
    except UnreadableLibrary as exc:
        return f"load_c({name!r}): the built library cannot be checked: {exc}"
    allowed = runtime_symbols()
    foreign = sorted(s for s in undefined - TOOLCHAIN_WEAK if s not in allowed)
    if not foreign:
        return None
    lookups = [s for s in foreign if LOOKUPS.match(s)]
    shown = ", ".join((lookups or foreign)[:4]) + (" ..." if len(lookups or foreign) > 4 else "")
    if lookups:
        return (f"load_c({name!r}) looks symbols up at run time ({shown}): a native kernel may call the C and C++ "
                "runtimes only, which it links against by name")
    return (f"load_c({name!r}) calls functions that no C or C++ runtime defines ({shown}): a native kernel may not "
            "call into PyTorch's libraries or the BLAS they carry; it must do the work itself")


# A CPU `load_inline` extension links against libtorch by design and may call ATen through the dispatcher (where the
# profiler sees it, on the calling thread or ATen's own pool, which carries the profiler's state). Below the
# dispatcher it may not go: ATen's kernels by their direct entry points, the BLAS libtorch carries, or ATen work on a
# thread of its own, where the profiler's thread-local callbacks never run.
BELOW_DISPATCHER = re.compile(
    r"^(_ZN2at6native|_ZN2at3cpu|_ZN2at6vec|cblas_|mkl_|MKL_|dnnl_|mkldnn_|openblas_|fbgemm|_ZN6fbgemm|"
    r"[sdczh](gemm|gemv|axpy|dot|scal|trsm|syrk|ger)_?$)")
# at::cpu also holds what an extension asks about the CPU before it picks a path (`ATen/cpu/Utils.h`: a feature
# query, the capabilities map, AMX's permission to use its tiles, cache sizes): no tensor work, so not refused. An
# honest extension that checked for VNNI before its loop was refused as "below the dispatcher" until 2026-11-29
# (tests/honest/relu_cpp_parallel_for_cpu_query.py).
CPU_QUERIES = re.compile(r"^_ZN2at3cpu\d+(is_\w+_supported|init_amx|get_cpu_capabilities|L1d_cache_size|L2_cache_size)"
                         r"Ev$")
OWN_THREADS = re.compile(r"^(pthread_create|thrd_create|clone3?|_ZNSt6thread15_M_start_thread\w*)$")


def extension_refusal(library: bytes, name: str) -> str | None:
    """Why the built CPU extension `name` may not run as a candidate's kernel, or None."""
    try:
        undefined, _ = dynamic_symbols(library)
    except UnreadableLibrary as exc:
        return f"load_inline({name!r}): the built extension cannot be checked: {exc}"
    lookups = sorted(s for s in undefined if LOOKUPS.match(s))
    below = sorted(s for s in undefined if BELOW_DISPATCHER.match(s) and not CPU_QUERIES.match(s))
    threads = sorted(s for s in undefined if OWN_THREADS.match(s))
    if lookups:
        return (f"load_inline({name!r}) looks symbols up at run time ({', '.join(lookups[:4])}): an extension calls "
                "what it links against by name")
    if below:
        return (f"load_inline({name!r}) calls PyTorch below its dispatcher ({', '.join(below[:4])}): ATen's kernels "
                "and BLAS called directly are PyTorch's work where the evaluator cannot see it; call ATen through "
                "its operators (at::relu, torch::mm) or do the work in the extension's own code")
    if threads:
        return (f"load_inline({name!r}) starts threads of its own ({', '.join(threads[:4])}): ATen work on them is "
                "out of the profiler's sight; use OpenMP or at::parallel_for")
    return None
