"""Where a timed call's outputs are judged: a shared-memory file that the driver made and reads itself.

The driver creates one memory file (`memfd_create`) per worker and hands it to the worker with its channel
(`launch.Zygote.spawn`). Inside every timed call's window, in both roles alike, the worker copies the call's outputs
into it (`WorkerSlot.write`, the copy that used to be a clone of each output) and says where each lies in its reply
(`Layout`). The driver then reads the bytes itself with `pread` on its own descriptor (`DriverSlot.read`), for the
calls it picked (`Reservoir`): nothing the verdict depends on leaves the candidate's process through code that runs
in it, so a send path patched from C (a call that computes part of its outputs and completes them on their way out)
has nothing to patch, and the worker is never told which calls were read.

A layout is the candidate's word and is checked like a frame's header (`frames.decode_tensors`): dtypes from the wire's
list, shapes of non-negative ints, every span inside the file. A forged layout can only point the driver at other
bytes of the same file, which are then compared with the reference's recompute like any output.

The file is the worker's to write at any time; what keeps it still while the driver reads is the quiet window
(`blocks._block`): the driver reads the candidate's CPU by the kernel's accounting before and after its read, and a
worker that ran while it should have been waiting for the driver's next word is refused.

Where the driver may read another process's memory whatever its dumpable flag (CAP_SYS_PTRACE: a driver running as
root, `direct_reads_possible`), a CPU call's outputs are not copied at all (`Time.direct_outputs`): the worker names
where each contiguous output lies in its own memory (`WorkerSlot.describe`, a layout of addresses) and the driver
copies the bytes out with `process_vm_readv` for the calls it picked, inside the same quiet window. The copy had been
most of the driver's window around a call (12-13 ms of a 14 ms window for a 31 MiB ReLU output on a loaded 2-core
machine, against 5-9 ms for the call), and its cost follows the cache state each kernel leaves, so the two roles'
remainders beyond their timers differed by as much as a forged timer takes (`clock_checks.call_gap`). The address is
the candidate's word too, and needs no trust: whatever memory it names must hold the right values when the driver
reads it, while the worker is quiet, so they were computed inside the call's window.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import random
from dataclasses import dataclass

import torch

from evaluator.wire.frames import _DTYPES, MAX_FRAME_BYTES, ProtocolError

ALIGN_BYTES = 64
_ADDRESS_END = 1 << 64


@dataclass(frozen=True)
class Span:
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int
    nbytes: int


@dataclass(frozen=True)
class Layout:
    """Where a call's tensor outputs lie in the slot, in their order."""

    spans: tuple[Span, ...]

    def to_wire(self) -> list[dict[str, object]]:
        return [{"dtype": str(s.dtype), "shape": list(s.shape), "offset": s.offset} for s in self.spans]

    @classmethod
    def parse(cls, raw: object, file_bytes: int | None) -> Layout:
        """A layout from the worker's reply, checked against the slot's size (None: offsets are addresses in the
        worker's memory, `WorkerSlot.describe`); ProtocolError where it is malformed."""
        if not isinstance(raw, list) or len(raw) > 64:
            raise ProtocolError("an output layout must be a list of at most 64 entries")
        spans = []
        total = 0
        for entry in raw:
            if not isinstance(entry, dict):
                raise ProtocolError("an output layout entry must be an object")
            dtype = _DTYPES.get(str(entry.get("dtype")))
            shape, offset = entry.get("shape"), entry.get("offset")
            if dtype is None:
                raise ProtocolError(f"unsupported output dtype {entry.get('dtype')!r}")
            if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
                raise ProtocolError("an output shape must be a list of non-negative ints")
            if not isinstance(offset, int) or offset < 0:
                raise ProtocolError("an output offset must be a non-negative int")
            numel = 1
            for s in shape:
                numel *= s
            nbytes = numel * torch.empty((), dtype=dtype).element_size()
            total += nbytes
            if total > MAX_FRAME_BYTES or (file_bytes is None and offset + nbytes > _ADDRESS_END):
                raise ProtocolError("an output is larger than a frame may be, or lies beyond the address space")
            if file_bytes is not None and offset + nbytes > file_bytes:
                raise ProtocolError("an output lies outside the shared output file")
            spans.append(Span(dtype, tuple(shape), offset, nbytes))
        return cls(tuple(spans))


class WorkerSlot:
    """The worker's end: the file mapped into its memory, grown to fit a call's outputs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.map: mmap.mmap | None = None
        self.bytes = 0

    def _fit(self, need: int) -> mmap.mmap:
        if self.map is None or need > self.bytes:
            size = max(need, 2 * self.bytes, mmap.PAGESIZE)
            size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
            if self.map is not None:
                self.map.close()
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            self.bytes = size
        return self.map

    @staticmethod
    def describe(outputs: list[torch.Tensor]) -> Layout | None:
        """Where `outputs` lie in this process's memory, copied nowhere: None unless every one is a contiguous tensor
        in host memory (the caller then copies them into the file, `write`)."""
        spans = []
        for t in outputs:
            if not (t.is_cpu and t.is_contiguous()):
                return None
            nbytes = t.numel() * t.element_size()
            spans.append(Span(t.dtype, tuple(t.shape), t.data_ptr() if nbytes else 0, nbytes))
        return Layout(tuple(spans))

    def write(self, outputs: list[torch.Tensor]) -> Layout:
        """Copy `outputs` (exact tensors, any device or strides) into the file, one after another; their layout."""
        spans, offset = [], 0
        for t in outputs:
            nbytes = t.numel() * t.element_size()
            spans.append(Span(t.dtype, tuple(t.shape), offset, nbytes))
            offset += -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES
        buf = self._fit(offset)
        for t, span in zip(outputs, spans, strict=True):
            if span.nbytes:
                dst = torch.frombuffer(buf, dtype=t.dtype, count=t.numel(), offset=span.offset).view(t.shape)
                dst.copy_(t.detach())
                del dst
        return Layout(tuple(spans))


class DriverSlot:
    """The driver's end: its own descriptor of the file, read with `pread` (nothing of the worker's runs)."""

    def __init__(self) -> None:
        self.fd = os.memfd_create("opforge-outputs", os.MFD_CLOEXEC)

    def file_bytes(self) -> int:
        return os.fstat(self.fd).st_size

    def read(self, raw_layout: object, direct_pid: int | None = None) -> list[torch.Tensor]:
        """The outputs a reply's layout names, copied out of the file now, or with `direct_pid` out of that process's
        memory (`describe`); ProtocolError where the layout is malformed or names bytes that are not there."""
        from evaluator.worker.heap import malloc_bytes
        layout = Layout.parse(raw_layout, None if direct_pid is not None else self.file_bytes())
        out = []
        for span in layout.spans:
            raw = malloc_bytes(span.nbytes) if span.nbytes else torch.empty(0, dtype=torch.uint8)
            if direct_pid is not None:
                got = read_memory(direct_pid, span.offset, raw) if span.nbytes else 0
                if got != span.nbytes:
                    raise ProtocolError("its reply named outputs that are not in its memory")
            else:
                got = os.preadv(self.fd, [raw.numpy().data], span.offset) if span.nbytes else 0
                if got != span.nbytes:
                    raise ProtocolError("the shared output file was shorter than its layout")
            out.append(raw.view(span.dtype).reshape(span.shape))
        return out

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


class Reservoir:
    """Which timed calls' outputs the driver reads and has the reference recompute: a uniform sample of `size` of
    all the candidate's timed calls so far (reservoir sampling), decided after each call with fresh randomness.
    There is no budget to count: call i is read with probability size/i however many were read before, and the
    worker is not told. A candidate that moves the median must return stale or unfinished outputs in at least half
    of its timed calls, and a uniform sample of `size` of them misses every one with probability at most 2**-size."""

    def __init__(self, size: int, rng: random.Random | None = None) -> None:
        self.size = max(1, size)
        self.rng = rng or random.SystemRandom()
        self.seen = 0
        self.kept: list[tuple[int, list[torch.Tensor]]] = []

    def pick(self) -> int | None:
        """For the call just made: None (not read), or the index in `kept` its outputs go to."""
        self.seen += 1
        if len(self.kept) < self.size:
            return len(self.kept)
        j = self.rng.randrange(self.seen)
        return j if j < self.size else None

    def put(self, index: int, seed: int, outputs: list[torch.Tensor]) -> None:
        if index == len(self.kept):
            self.kept.append((seed, outputs))
        else:
            self.kept[index] = (seed, outputs)


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def read_memory(pid: int, address: int, into: torch.Tensor) -> int:
    """Copy `into.nbytes` bytes at `address` of process `pid` into the (contiguous, host) tensor `into`, with
    `process_vm_readv`; returns how many were copied (fewer where a page is not mapped there)."""
    libc = _libc()
    done, total = 0, into.numel() * into.element_size()
    while done < total:
        local = _Iovec(into.data_ptr() + done, total - done)
        remote = _Iovec(address + done, total - done)
        got = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            break
        done += got
    return done


def direct_reads_possible() -> bool:
    """Whether this process may read a worker's memory (`read_memory`) although the worker made itself undumpable:
    CAP_SYS_PTRACE in its effective set, and Yama not set to refuse every reader (`ptrace_scope` 3)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    if not caps >> 19 & 1:  # CAP_SYS_PTRACE
        return False
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as f:
            return int(f.read().strip() or 0) < 3
    except (OSError, ValueError):
        return True  # no Yama


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.process_vm_readv.restype = ctypes.c_ssize_t
        _LIBC.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p,
                                           ctypes.c_ulong, ctypes.c_ulong]
    return _LIBC
