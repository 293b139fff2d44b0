"""Evidence that kernels wrote the outputs: a ledger of the bytes Triton kernels stored (under the interpreter).

Under `TRITON_INTERPRET=1` every store of a kernel goes through the interpreter's builder, so the worker can record
exactly which bytes each launch wrote and what it wrote there. After a call, every byte of every output must be the
last value a kernel stored at that address (or a copy, cast or constant fill of such bytes that PyTorch made, seen
by `CopyGrants`): work done by numpy, plain Python, PyTorch under another name, another thread or a custom operator
cannot produce those bytes. A launch counts only when it stored something, so a grid of zero programs, a launch
that raises, or a kernel with every store masked off is not a launch.

The ledger only grants: a candidate that dodges `CopyGrants` (pops the mode) loses the grants and is refused, it
cannot gain anything. Native code and CUDA have no ledger; there, launches count when they return (see
docs/EVALUATOR.md, "Known limits").
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

_np_concat, _np_unique, _np_searchsorted, _np_arange = np.concatenate, np.unique, np.searchsorted, np.arange
_np_uint8, _np_uint64, _np_int64 = np.uint8, np.uint64, np.int64
_tensor_numpy = torch.Tensor.numpy
_contiguous = torch.Tensor.contiguous
_exact_type = type

# Results of these operators are pure copies or casts of their tensor arguments.
COPY_OPS = frozenset({"clone", "copy_", "_to_copy", "cat", "stack", "contiguous", "_copy_from",
                      "_copy_from_and_resize", "flip", "roll", "repeat"})
# Results of these hold one constant (allocation with a value).
FILL_OPS = frozenset({"zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "fill_", "zero_", "new_zeros",
                      "new_ones", "new_full", "scalar_tensor"})


def _byte_addresses(t: torch.Tensor) -> Any:
    """The address of every byte of `t`, in its logical (row-major) element order."""
    item = t.element_size()
    offsets = np.zeros((), dtype=_np_int64)
    for size, stride in zip(t.shape, t.stride()):
        offsets = offsets[..., None] + _np_arange(size, dtype=_np_int64) * stride
    elems = (offsets.reshape(-1) * item + t.data_ptr()).astype(_np_uint64)
    return (elems[:, None] + _np_arange(item, dtype=_np_uint64)).reshape(-1)


def _bytes_of(t: torch.Tensor) -> Any:
    flat = _contiguous(t.detach()).reshape(-1)
    return _tensor_numpy(flat.view(torch.uint8) if flat.element_size() else flat).reshape(-1)


class StoreLedger:
    """Every byte stored during one call, in order: (byte addresses, byte values) chunks; the last write wins."""

    def __init__(self) -> None:
        self.active = False
        self._addr: list[Any] = []
        self._vals: list[Any] = []
        self._index: tuple[Any, Any] | None = None
        self.stored_bytes = 0  # by kernels, since the last `take_stored`

    def begin(self) -> None:
        self._addr.clear()
        self._vals.clear()
        self._index = None
        self.active = True

    def end(self) -> None:
        self.active = False

    def take_stored(self) -> int:
        n, self.stored_bytes = self.stored_bytes, 0
        return n

    # -- recording ------------------------------------------------------------------------------------------------
    def record_elements(self, ptrs: Any, values: Any, mask: Any | None) -> None:
        """A kernel's store: element addresses, their values (numpy) and the mask of lanes that stored."""
        ptrs = np.asarray(ptrs, dtype=_np_uint64)
        values = np.broadcast_to(np.asarray(values), ptrs.shape)
        if mask is not None:
            keep = np.broadcast_to(np.asarray(mask, dtype=bool), ptrs.shape)
            ptrs, values = ptrs[keep], values[keep]
        else:
            ptrs, values = ptrs.reshape(-1), values.reshape(-1)
        if not ptrs.size:
            return
        item = values.dtype.itemsize
        raw = np.ascontiguousarray(values).view(_np_uint8).reshape(-1, item)
        self.stored_bytes += raw.size
        if self.active:
            self._addr.append((ptrs[:, None] + _np_arange(item, dtype=_np_uint64)).reshape(-1))
            self._vals.append(raw.reshape(-1).copy())
            self._index = None

    def record_tensor(self, t: torch.Tensor) -> None:
        """Bytes PyTorch wrote that count as the kernels' (a copy of covered bytes, a constant fill)."""
        if self.active and t.numel():
            self._addr.append(_byte_addresses(t))
            self._vals.append(_bytes_of(t).copy())
            self._index = None

    # -- judging --------------------------------------------------------------------------------------------------
    def _lookup(self) -> tuple[Any, Any]:
        if self._index is None:
            if not self._addr:
                self._index = (np.zeros(0, dtype=_np_uint64), np.zeros(0, dtype=_np_uint8))
            else:
                addr, vals = _np_concat(self._addr)[::-1], _np_concat(self._vals)[::-1]
                unique, first = _np_unique(addr, return_index=True)  # first in reverse order: the last write
                self._index = (unique, vals[first])
                self._addr[:], self._vals[:] = [unique], [vals[first]]
        return self._index

    def uncovered(self, t: torch.Tensor) -> int:
        """How many elements of `t` hold bytes that no kernel stored there (or that changed since)."""
        if not t.numel():
            return 0
        unique, vals = self._lookup()
        addr, have = _byte_addresses(t), _bytes_of(t)
        if not unique.size:
            return t.numel()
        pos = np.minimum(_np_searchsorted(unique, addr), unique.size - 1)
        ok = (unique[pos] == addr) & (vals[pos] == have)
        return int((~ok.reshape(t.numel(), -1).all(axis=1)).sum())


class CopyGrants(TorchDispatchMode):
    """While a call runs (interpreter only): PyTorch copies and casts of kernel-written bytes, and constant fills,
    count as written by kernels. Popping this mode only loses grants."""

    def __init__(self, ledger: StoreLedger) -> None:
        super().__init__()
        self.ledger = ledger

    def __torch_dispatch__(self, func: Any, types_: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in FILL_OPS or name in COPY_OPS:
            results = out if isinstance(out, (tuple, list)) else [out]
            sources = [a for a in _flat(args) + _flat(list((kwargs or {}).values()))
                       if _exact_type(a) is torch.Tensor]
            if name == "copy_":
                sources = sources[1:2]
            if name in FILL_OPS or all(self.ledger.uncovered(s) == 0 for s in sources if s.numel()):
                for r in results:
                    if isinstance(r, torch.Tensor) and r.device.type == "cpu":
                        self.ledger.record_tensor(r)
        return out


def _flat(values: list[Any] | tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_flat(v))
        else:
            out.append(v)
    return out


def install(ledger: StoreLedger) -> bool:
    """Route the interpreter's stores through `ledger`; False when Triton's interpreter is not available."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = interpreter.InterpreterBuilder
    load: Callable[..., Any] = builder.create_masked_load
    store, rmw, cas = builder.create_masked_store, builder.create_atomic_rmw, builder.create_atomic_cas

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
        result = store(self, ptrs, value, mask, cache_policy)
        ledger.record_elements(ptrs.data, value.data, mask.data)
        return result

    def _after_atomic(self: Any, ptr: Any, mask: Any) -> None:  # what the memory holds now
        now = load(self, ptr, mask, None, None, True)
        ledger.record_elements(ptr.data, now.data, None if mask is None else mask.data)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any) -> Any:
        result = rmw(self, op, ptr, val, mask, sem, scope)
        _after_atomic(self, ptr, mask)
        return result

    def create_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, sem: Any, scope: Any) -> Any:
        result = cas(self, ptr, cmp, val, sem, scope)
        full = type(ptr)(np.ones_like(ptr.data, dtype=bool), None)
        _after_atomic(self, ptr, full)
        return result

    builder.create_masked_store = create_masked_store
    builder.create_atomic_rmw = create_atomic_rmw
    builder.create_atomic_cas = create_atomic_cas
    return True
