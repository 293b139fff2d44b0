"""What PyTorch computed during one call of the candidate, judged by what it does, not by its name.

The observer is PyTorch's own profiler (its RecordFunction callbacks, in C++): it sees every operator that reaches
the dispatcher, under any name (a decomposition, `einsum` traced as `bmm`, the operators inside a custom operator of a
new namespace), and a candidate cannot hide from it by popping dispatch modes. Switching the profiler off and on
again inside the call loses the harness's opening marker, which is itself refused. Threads are covered separately:
the worker counts thread starts during a call (`Guards.thread_starts`).

It is the profiler's CPU-only state (`ProfilerState.CPU`, what `profile(use_kineto=False)` asked for), entered
directly: the same RecordFunction callbacks and input shapes, without Kineto's set-up and tear-down around every
call, which cost 0.4-0.6 ms a watched call here (10 us this way), on both sides, since the reference pays the watch's
cost too. Its events come back per thread, names and shapes only, not parsed into `FunctionEvent` trees.

A call may allocate, view, copy, cast and query metadata freely. Other operators are compute; their work is the size
of their largest argument, summed over the call (so a computation split into small chunks adds up). Compute whose
work reaches the output's scale -- the smallest output's elements, or a 64th of the largest input's when that is
more (a final reduction over a few partial sums stays below it) -- is work the kernels must do.
"""

from __future__ import annotations

from typing import Any

import torch

from evaluator.worker.op_trace import LAYOUT_OPS

MARKER = "opforge::call"
_enable = torch.autograd._enable_profiler_legacy
_disable = torch.autograd._disable_profiler_legacy
_record_function = torch.autograd.profiler.record_function
_CONFIG = torch.autograd.ProfilerConfig(torch.autograd.ProfilerState.CPU, True, False, False, False, False,
                                        torch._C._profiler._ExperimentalConfig())  # shapes; no memory, stacks, flops
# Beyond LAYOUT_OPS: copies, casts, constant fills and metadata queries that compute nothing.
FREE_OPS = LAYOUT_OPS | frozenset("""
cat stack _copy_from _copy_from_and_resize constant_pad_nd flip roll repeat masked_fill_ result_type is_same_size
_has_compatible_shallow_copy_type size stride numel dim is_contiguous storage_offset _nested_tensor_size
resolve_conj resolve_neg _conj _neg_view real imag empty_permuted as_strided_ index_put_ index_select select_backward
""".split())


class CallObserver:
    """`with observer:` around one call; then `compute_at_scale(outputs)`."""

    def __init__(self) -> None:
        self._events: list[tuple[str, Any]] | None = None  # (name, input shapes) of every operator seen
        self._top: list[tuple[str, int]] = []  # (name, elements read) of the outermost compute operators

    def __enter__(self) -> "CallObserver":
        _enable(_CONFIG)
        with _record_function(MARKER):
            pass
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            threads = _disable()
        except Exception:  # noqa: BLE001 - a profiler the candidate switched off: judged as missing the marker
            self._events = None
            return
        self._events = [(e.name(), e.shapes()) for events in threads for e in events if e.kind() == "push"]
        # The outermost compute operators: each counted unless an operator around it was; an operator that counts
        # nothing (a custom operator of another namespace, einsum's tensor list whose shapes the profiler does not
        # record, a copy) leaves the operators inside it to count.
        self._top = []
        for events in threads:
            counted: list[bool] = []  # per open operator: whether it or one around it was counted
            for e in events:
                if e.kind() == "push":
                    inside = bool(counted) and counted[-1]
                    size = _compute_size(e.name(), e.shapes())
                    if not inside and size > 1:
                        self._top.append((e.name(), size))
                    counted.append(inside or size > 1)
                elif e.kind() == "pop" and counted:
                    counted.pop()

    def compute_at_scale(self, outputs: list[Any], inputs: list[Any]) -> list[str] | None:
        """Names of the compute operators that ran on data of the output's size; None when the observation was
        tampered with (the profiler switched off or restarted inside the call). The strict rule ("kernels only")."""
        observed = self.compute_work()
        if observed is None:
            return None
        work, found = observed
        sizes = [o.numel() for o in outputs if isinstance(o, torch.Tensor)]
        largest_input = max((x.numel() for x in inputs if isinstance(x, torch.Tensor)), default=0)
        scale = max(2, min(sizes) if sizes else 2, largest_input // 64)
        return found if work >= scale else []

    def compute_work(self) -> tuple[int, list[str]] | None:
        """(PyTorch's compute work in the call, the compute operators' names): each compute operator counts the
        elements of its largest argument, nested operators too, so the reference measured alike (`torch_rule.py`)
        counts its decompositions as the candidate's would. None when the observation was tampered with."""
        events = self._events
        if events is None or not any(name == MARKER for name, _ in events):
            return None
        found: set[str] = set()
        work = 0
        for name, shapes in events:
            if not name.startswith("aten::"):
                continue
            short = name[6:]
            if short in FREE_OPS or short.rstrip("_") in FREE_OPS:
                continue
            size = max((_numel(shape) for shape in (shapes or ())), default=0)
            if size > 1:
                work += size
                found.add(name)
        return work, sorted(found)


    def glue_work(self) -> tuple[int, list[str]] | None:
        """(the elements that PyTorch's outermost compute operators read, their names): the measure of the rule for
        PyTorch inside a candidate (`torch_rule.py`), taken of the reference's call alike, so a fused operator
        (mse_loss) counts what it reads, not its inner steps.
        None when the observation was tampered with."""
        events = self._events
        if events is None or not any(name == MARKER for name, _ in events):
            return None
        return sum(size for _, size in self._top), sorted({name for name, _ in self._top})


def _compute_size(name: str, shapes: Any) -> int:
    """The elements a compute operator reads (its tensor arguments' elements); 0 for what is not ATen compute."""
    if not name.startswith("aten::"):
        return 0
    short = name[6:]
    if short in FREE_OPS or short.rstrip("_") in FREE_OPS:
        return 0
    return sum(_numel(shape) for shape in (shapes or ()))


def _numel(shape: Any) -> int:
    if not isinstance(shape, (list, tuple)) or not shape or not all(isinstance(d, int) for d in shape):
        return 0
    n = 1
    for d in shape:
        n *= d
    return n
