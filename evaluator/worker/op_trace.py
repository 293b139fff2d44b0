"""What PyTorch computes, by operator name: the ops that move, view or allocate memory but compute nothing
(`LAYOUT_OPS`), and a dispatch mode that counts the others (`OpTrace`: the reference's compute ops for a task's
facts, and the trusted worker's trace). A candidate's calls are judged by the profiler observer (`observer.py`)."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any, Callable

from torch.utils._python_dispatch import TorchDispatchMode

LAYOUT_OPS = frozenset("""
empty empty_like empty_strided zeros zeros_like ones ones_like full full_like new_empty new_zeros new_ones new_full
new_empty_strided copy_ clone contiguous view reshape _unsafe_view expand as_strided t transpose permute squeeze
unsqueeze select slice detach alias lift_fresh _to_copy to resize_ set_ fill_ zero_ split split_with_sizes chunk unbind
_local_scalar_dense lift view_as unfold flatten unflatten narrow movedim numpy_T _reshape_alias item is_nonzero
arange scalar_tensor
""".split())


class OpTrace(TorchDispatchMode):
    """Records the compute ops (not layout or allocation ops) that PyTorch runs while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types_: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__.rstrip("_") if func.overloadpacket.__name__ != "copy_" else "copy_"
        namespace = getattr(func, "namespace", "aten")
        if namespace != "aten":  # a candidate's own operator (myops::relu) is not PyTorch's relu
            name = f"{namespace}::{name}"
        if name not in LAYOUT_OPS and func.overloadpacket.__name__ not in LAYOUT_OPS:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def _disable_dynamo_once_loaded(wrapped: Callable[..., Any]) -> None:
    """PyTorch wraps a dispatch mode's `__torch_dispatch__` with `torch._disable_dynamo`, whose first call imports
    `torch._dynamo` (1-2 s of CPU) to keep dynamo from compiling the mode's frames. Where dynamo is not loaded,
    nothing is compiling and the plain function runs; once it is (a task that calls torch.compile), the first call
    after that wraps it with `torch._dynamo.disable` exactly as PyTorch would. The trusted reference's op trace so
    costs no dynamo import. Where a PyTorch version wraps differently, its own wrapper runs (slower, never wrong)."""
    raw = getattr(wrapped, "__wrapped__", None)
    if raw is None:
        return

    def when_loaded(*args: Any, **kwargs: Any) -> Any:
        disable = getattr(sys.modules.get("torch._dynamo"), "disable", None)  # None also while dynamo is importing
        if disable is None:
            return raw(*args, **kwargs)
        disabled = disable(raw, True, wrapping=False)
        setattr(raw, "__dynamo_disable", disabled)  # torch._disable_dynamo's own cache, filled as it would fill it
        return disabled(*args, **kwargs)

    setattr(raw, "__dynamo_disable", when_loaded)


_disable_dynamo_once_loaded(OpTrace.__dict__["__torch_dispatch__"])
