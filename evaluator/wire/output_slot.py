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
"""

from __future__ import annotations

import mmap
import os
import random
from dataclasses import dataclass

import torch

from evaluator.wire.frames import _DTYPES, MAX_FRAME_BYTES, ProtocolError

ALIGN_BYTES = 64


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
    def parse(cls, raw: object, file_bytes: int) -> Layout:
        """A layout from the worker's reply, checked against the slot's size; ProtocolError where it is malformed."""
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
            if offset + nbytes > file_bytes or total > MAX_FRAME_BYTES:
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

    def read(self, raw_layout: object, buffer: type | None = None) -> list[torch.Tensor]:
        """The outputs a reply's layout names, copied out of the file now (ProtocolError where it is malformed or
        the file is shorter than it says)."""
        from evaluator.worker.heap import malloc_bytes
        layout = Layout.parse(raw_layout, self.file_bytes())
        out = []
        for span in layout.spans:
            raw = malloc_bytes(span.nbytes) if span.nbytes else torch.empty(0, dtype=torch.uint8)
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
