"""The pointers on the worker's path to its clock, compared by the driver with the zygote the worker was forked from.

The candidate's worker times each call with `time.perf_counter_ns`, and native code in the candidate can redirect
that path without writing a page of code (`code_pages.py` sees those): the builtin's `vectorcall` or method-table
entry (an int of the real time returned with a lag taken off its digits), a slot of the interpreter library's GOT
(the `clock_gettime` the interpreter calls), the dynamic linker's pointer to the kernel's vDSO clock, or the vDSO's
own code. A timer that falls behind during the candidate's calls alone passes every check that reads the worker's
clock between calls, and hides within what the driver's clock allows around a call (`clock_checks.call_gap`).

The worker is a fork of a zygote that never runs candidate code, so every object, table and slot on that path sits
at the same address in both processes and, in an honest worker, holds the same bytes: the driver (as root: both are
undumpable) reads them from `/proc/<pid>/mem` of each after the candidate's timed calls and refuses a difference.
What is compared:

- the builtin function object behind the timer (its address reported by the zygote in its `ready` line): its type,
  method entry, self, module and vectorcall, and the method entry it points to;
- the harness's reference to that builtin, which `HostClock.mark` reads at every mark (the `_now_ns` entry of the
  timing module's dict, also reported by the zygote: `timing.timer_reference`), key and value;
- every GOT slot of the interpreter's library and executable that the zygote had bound (a lazily bound slot that the
  zygote never used is skipped: the worker may bind it honestly, to wherever the dynamic linker finds its symbol);
- the dynamic linker's read-only globals (`_rtld_global_ro`, which holds the vDSO's entry points);
- the vDSO itself.

Not compared: the other Python-level objects on the path (the harness's timer functions and their code, whose
bytecode the interpreter rewrites as it specialises it, and the timer objects a worker builds after its fork), which
the worker's own fingerprints check as a first line; libraries other than the interpreter's. x86-64 and aarch64 ELF files only; elsewhere nothing is read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from evaluator.driver.connection import Refused
from evaluator.result import Status

_SLOT_TYPES = {62: (6, 7), 183: (1025, 1026)}  # e_machine: (GLOB_DAT, JUMP_SLOT) of x86-64, aarch64
# PyCFunctionObject of CPython 3.11 (no debug build): refcount, type, m_ml, m_self, m_module, m_weakreflist,
# vectorcall. The refcount and the weak-reference list change honestly; the rest never does.
_CFUNCTION_FIELDS = ((8, 32), (48, 8))  # (offset, length): type, m_ml, m_self, m_module; vectorcall
_METHOD_DEF_SIZE = 32  # ml_name, ml_meth, ml_flags (and padding), ml_doc


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    offset: int
    path: str


@dataclass(frozen=True)
class Span:
    """Bytes to compare: where, how many, and what they are (for the reason)."""
    address: int
    length: int
    what: str
    unbound: tuple[int, int] | None = None  # a GOT slot: the range of its own file, where an unbound slot points


def mappings(pid: int) -> list[Mapping]:
    out = []
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in parts[0].split("-"))
            out.append(Mapping(start, end, int(parts[2], 16), parts[5].strip() if len(parts) > 5 else ""))
    return out


@dataclass(frozen=True)
class _Elf:
    machine: int
    slots: tuple[int, ...]  # offsets (from the load base) of GOT slots: GLOB_DAT and JUMP_SLOT relocations
    symbols: dict[str, tuple[int, int]]  # dynamic symbol: (value, size)


@lru_cache(maxsize=16)
def _read_elf(path: str) -> _Elf | None:
    """The GOT slots and dynamic symbols of an ELF64 little-endian file; None for anything else."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    machine = struct.unpack_from("<H", data, 0x12)[0]
    if machine not in _SLOT_TYPES:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]

    def name(at: int) -> str:
        return data[at:data.index(b"\0", at)].decode("ascii", "replace")

    by_name = {name(names_at + s[0]): s for s in sections}
    glob_dat, jump_slot = _SLOT_TYPES[machine]
    slots: list[int] = []
    for section in (".rela.dyn", ".rela.plt"):
        s = by_name.get(section)
        if s is None:
            continue
        for at in range(s[4], s[4] + s[5], 24):
            r_offset, r_info = struct.unpack_from("<QQ", data, at)
            if r_info & 0xFFFFFFFF in (glob_dat, jump_slot):
                slots.append(r_offset)
    symbols: dict[str, tuple[int, int]] = {}
    dynsym, dynstr = by_name.get(".dynsym"), by_name.get(".dynstr")
    if dynsym is not None and dynstr is not None:
        for at in range(dynsym[4], dynsym[4] + dynsym[5], 24):
            st_name, _, _, _, value, size = struct.unpack_from("<IBBHQQ", data, at)
            if st_name and value:
                symbols[name(dynstr[4] + st_name)] = (value, size)
    return _Elf(machine, tuple(sorted(slots)), symbols)


def _bases(maps: list[Mapping]) -> dict[str, tuple[int, int]]:
    """Each mapped file's load base (its lowest start less that mapping's file offset) and the end of its mappings."""
    out: dict[str, tuple[int, int]] = {}
    for m in maps:
        if not m.path.startswith("/"):
            continue
        base, end = out.get(m.path, (m.start - m.offset, m.end))
        out[m.path] = (min(base, m.start - m.offset), max(end, m.end))
    return out


def _interpreter_files(maps: list[Mapping], pid: int) -> list[str]:
    exe = os.readlink(f"/proc/{pid}/exe")
    return sorted({m.path for m in maps if m.path == exe or "/libpython" in m.path})


class _Memory:
    def __init__(self, pid: int) -> None:
        self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)

    def read(self, address: int, length: int) -> bytes:
        try:
            return os.pread(self.fd, length, address)
        except OSError:
            return b""

    def close(self) -> None:
        os.close(self.fd)


def spans(zygote_pid: int, timer_object: int | None, zygote: _Memory,
          timer_reference: int | None = None) -> Iterator[Span]:
    """What to compare, found in the zygote: the timer object's fields and method entry, the harness's reference to it,
    the interpreter's bound GOT slots, the dynamic linker's read-only globals, the vDSO."""
    maps = mappings(zygote_pid)
    if timer_reference:
        yield Span(timer_reference - 8, 16, "the harness's reference to its timer builtin")
    if timer_object:
        for offset, length in _CFUNCTION_FIELDS:
            yield Span(timer_object + offset, length, "the timer builtin's object")
        method = zygote.read(timer_object + 16, 8)
        if len(method) == 8:
            yield Span(struct.unpack("<Q", method)[0], _METHOD_DEF_SIZE, "the timer builtin's method entry")
    bases = _bases(maps)
    for path in _interpreter_files(maps, zygote_pid):
        elf = _read_elf(path)
        if elf is None:
            continue
        base, end = bases[path]
        for slot in elf.slots:
            value = zygote.read(base + slot, 8)
            if len(value) == 8 and not base <= struct.unpack("<Q", value)[0] < end:  # bound, to another file
                yield Span(base + slot, 8, f"a GOT slot of {os.path.basename(path)}", (base, end))
    for path, (base, _) in bases.items():
        if "/ld-linux" in path or os.path.basename(path).startswith("ld-"):
            elf = _read_elf(path)
            if elf is not None and "_rtld_global_ro" in elf.symbols:
                at, size = elf.symbols["_rtld_global_ro"]
                yield Span(base + at, size, "the dynamic linker's read-only globals (the vDSO's entry points)")
    for m in maps:
        if m.path == "[vdso]":
            yield Span(m.start, m.end - m.start, "the vDSO")


def changed(worker_pid: int, zygote_pid: int, timer_object: int | None,
            timer_reference: int | None = None) -> list[str] | None:
    """What on the timer's path differs between the worker and its zygote; None where either cannot be read."""
    try:
        zygote, worker = _Memory(zygote_pid), _Memory(worker_pid)
    except OSError:
        return None
    try:
        found: list[str] = []
        for span in spans(zygote_pid, timer_object, zygote, timer_reference):
            theirs = zygote.read(span.address, span.length)
            mine = worker.read(span.address, span.length)
            if not theirs or mine == theirs or span.what in found:
                continue
            if span.unbound is not None and len(mine) == 8:
                # Slots the zygote bound after this worker's fork (it runs on, serving requests) are still unbound
                # here: they point into their own file, at the dynamic linker's lazy stub.
                low, high = span.unbound
                if low <= struct.unpack("<Q", mine)[0] < high:
                    continue
            found.append(span.what)
        return found
    except OSError:
        return None
    finally:
        zygote.close()
        worker.close()


def parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def refuse_changed_timer_path(worker_pid: int | None, timer_object: int | None,
                              timer_reference: int | None = None) -> bool:
    """Refuse a candidate whose worker redirected its timer's path (compared with its zygote, its parent); False
    where nothing could be read."""
    if worker_pid is None:
        return False
    zygote_pid = parent_pid(worker_pid)
    if zygote_pid is None:
        return False
    found = changed(worker_pid, zygote_pid, timer_object, timer_reference)
    if not found:
        return found is not None
    raise Refused(Status.REJECTED,
                  f"the candidate's process changed the path to its timer's clock ({'; '.join(found[:3])}), which "
                  "differs from the process it was forked from: native code that redirects the harness's clock is "
                  "refused")
