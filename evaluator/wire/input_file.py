"""Where a timed call's inputs come from on a CPU: a shared-memory file that the reference's worker writes, the driver
flushes from every cache, and the candidate's worker maps read-only.

Until 2026-11-28 each worker drew its own timed inputs and evicted them from the caches itself, so native code in
the candidate's process could patch both out: keep its inputs warm, or do the next call's work while "drawing" it,
before the driver's `go` started the clock (issue 33, class 3). Now, for every timed call of either side:

1. the reference's worker (trusted: it runs the task's code only) draws the call's inputs from the driver's seed and
   copies them into the file (`InputWriter.write`); its reply says where each lies (`InputLayout`);
2. the driver flushes those bytes out of every cache level through its own mapping of the file (`DriverInputs.flush`:
   a cache line is the same line whichever process's mapping names it), while it reads the candidate's CPU by the
   kernel's accounting: a worker waiting for its `go` uses none (`clock_checks.QuietWindow`);
3. the driver's `go` carries the layout; the worker makes its inputs as views of its own mapping (`InputReader`): the
   candidate's is of a read-only descriptor, so it can neither change the bytes the reference will recompute from nor
   see them before the driver has written them, and whatever it does before its `go` is on the driver's CPU account.

Both sides' calls read their inputs from the same kind of memory (a shared file's 4 KiB pages), cold alike. Inputs
the file cannot carry (a non-contiguous or non-CPU tensor, an object other than a tensor, a number or None) keep the
in-worker draw, and the verdict says so (`blocks.Measurement.inputs`).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

from evaluator.wire.output_slot import ALIGN_BYTES, Layout, Span
from evaluator.wire.frames import _DTYPES, ProtocolError

PLAIN_TYPES = (bool, int, float, type(None))
MAX_INPUTS = 64


@dataclass(frozen=True)
class InputLayout:
    """A call's inputs in order: each a tensor's span in the file (and whether it requires grad) or a plain value."""

    items: tuple[Span | bool | int | float | None, ...]
    grads: tuple[bool, ...]  # per item; False for plain values

    def to_wire(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for item, grad in zip(self.items, self.grads, strict=True):
            if isinstance(item, Span):
                out.append({"dtype": str(item.dtype), "shape": list(item.shape), "offset": item.offset, "grad": grad})
            else:
                out.append({"value": item})
        return out

    def tensor_spans(self) -> list[Span]:
        return [item for item in self.items if isinstance(item, Span)]

    @classmethod
    def parse(cls, raw: object, file_bytes: int) -> InputLayout:
        """A layout from a worker's reply or the driver's `go`, checked against the file's size (ProtocolError)."""
        if not isinstance(raw, (list, tuple)) or len(raw) > MAX_INPUTS:
            raise ProtocolError(f"an input layout must be a list of at most {MAX_INPUTS} entries")
        tensors = [e for e in raw if isinstance(e, dict) and "value" not in e]
        spans = iter(Layout.parse([{k: e.get(k) for k in ("dtype", "shape", "offset")} for e in tensors],
                                  file_bytes).spans)
        items: list[Span | bool | int | float | None] = []
        grads: list[bool] = []
        for entry in raw:
            if not isinstance(entry, dict):
                raise ProtocolError("an input layout entry must be an object")
            if "value" in entry:
                value = entry["value"]
                if not isinstance(value, PLAIN_TYPES):
                    raise ProtocolError("a plain input must be a bool, an int, a float or None")
                items.append(value)
                grads.append(False)
            else:
                items.append(next(spans))
                grads.append(entry.get("grad") is True)
        return cls(tuple(items), tuple(grads))


def shareable(inputs: list[Any]) -> bool:
    """Whether the file can carry these inputs exactly: contiguous CPU tensors of the wire's dtypes, plain values."""
    if len(inputs) > MAX_INPUTS:
        return False
    for x in inputs:
        if type(x) is torch.Tensor:
            if x.device.type != "cpu" or not x.is_contiguous() or str(x.dtype) not in _DTYPES or x.is_sparse:
                return False
        elif type(x) not in PLAIN_TYPES:
            return False
    return True


class _Mapped:
    """A mapping of the file that follows its size (the reference's writes may grow it)."""

    def __init__(self, fd: int, writable: bool) -> None:
        self.fd, self.writable = fd, writable
        self.map: mmap.mmap | None = None
        self.bytes = 0

    def fit(self, need: int) -> mmap.mmap:
        size = os.fstat(self.fd).st_size
        if self.writable and need > size:
            size = -(-max(need, 2 * size, mmap.PAGESIZE) // mmap.PAGESIZE) * mmap.PAGESIZE
            os.ftruncate(self.fd, size)
        if need > size:
            raise ProtocolError("an input lies outside the shared input file")
        if self.map is None or self.bytes != size:
            if self.map is not None:
                try:
                    self.map.close()
                except BufferError:  # views of an earlier call still alive: that mapping stays until they go
                    pass
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if self.writable else 0)
            self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, prot)
            self.bytes = size
        return self.map


class InputWriter:
    """The reference's worker's end: a call's inputs copied into the file, one after another."""

    def __init__(self, fd: int) -> None:
        self.file = _Mapped(fd, writable=True)

    def write(self, inputs: list[Any]) -> InputLayout:
        items: list[Span | bool | int | float | None] = []
        grads: list[bool] = []
        offset = 0
        for x in inputs:
            if type(x) is torch.Tensor:
                nbytes = x.numel() * x.element_size()
                items.append(Span(x.dtype, tuple(x.shape), offset, nbytes))
                grads.append(bool(x.requires_grad))
                offset += -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES
            else:
                items.append(x)
                grads.append(False)
        buf = self.file.fit(max(offset, 1))
        for x, item in zip(inputs, items, strict=True):
            if isinstance(item, Span) and item.nbytes:
                dst = torch.frombuffer(buf, dtype=item.dtype, count=x.numel(), offset=item.offset).view(x.shape)
                with torch.no_grad():
                    dst.copy_(x)
                del dst
        return InputLayout(tuple(items), tuple(grads))


class InputReader:
    """A worker's inputs made from a layout: views of its own mapping of the file (read-only in the candidate's)."""

    def __init__(self, fd: int, writable: bool) -> None:
        self.file = _Mapped(fd, writable)
        self.fd = fd

    def file_bytes(self) -> int:
        return os.fstat(self.fd).st_size

    def inputs(self, raw_layout: object) -> list[Any]:
        layout = InputLayout.parse(raw_layout, self.file_bytes())
        spans = layout.tensor_spans()
        buf = self.file.fit(max((s.offset + s.nbytes for s in spans), default=1))
        out: list[Any] = []
        for item, grad in zip(layout.items, layout.grads, strict=True):
            if not isinstance(item, Span):
                out.append(item)
                continue
            numel = item.nbytes // max(1, torch.empty((), dtype=item.dtype).element_size())
            if item.nbytes:
                t = _frombuffer(buf, item.dtype, numel, item.offset).view(item.shape)
            else:
                t = torch.empty(item.shape, dtype=item.dtype)
            out.append(t.requires_grad_(True) if grad and t.is_floating_point() else t)
        return out


def _frombuffer(buf: mmap.mmap, dtype: torch.dtype, count: int, offset: int) -> torch.Tensor:
    import warnings
    with warnings.catch_warnings():  # a read-only mapping: PyTorch warns that the tensor is not writable (it is not)
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(buf, dtype=dtype, count=count, offset=offset)


class DriverInputs:
    """The driver's end: the file, a descriptor of it for each worker (read-only for the candidate's), and the flush
    of a call's inputs out of the caches through its own mapping."""

    def __init__(self, flush_lines: Callable[[list[torch.Tensor]], object] | None) -> None:
        self.fd = os.memfd_create("opforge-inputs", os.MFD_CLOEXEC)
        self.flush_lines = flush_lines
        self.file = _Mapped(self.fd, writable=False)

    def worker_fd(self, role: str) -> int:
        """A new descriptor for a worker of `role` (the caller closes it once sent): the reference's may write, the
        candidate's only read (a read-only open of the same file: its mapping cannot be made writable)."""
        if role == "reference":
            return os.dup(self.fd)
        return os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC)

    def layout(self, raw: object) -> InputLayout:
        return InputLayout.parse(raw, os.fstat(self.fd).st_size)

    def flush(self, layout: InputLayout) -> None:
        """Every byte of the layout's tensors written back and dropped from every cache level (a no-op without the
        harness's line flush: then the inputs are as cold as another core's write left them)."""
        spans = [s for s in layout.tensor_spans() if s.nbytes]
        if self.flush_lines is None or not spans:
            return
        buf = self.file.fit(max(s.offset + s.nbytes for s in spans))
        views = [_frombuffer(buf, torch.uint8, s.nbytes, s.offset) for s in spans]
        self.flush_lines(views)
        del views

    def close(self) -> None:
        if self.file.map is not None:
            try:
                self.file.map.close()
            except BufferError:
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass
