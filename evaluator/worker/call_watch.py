"""Watching one call of the candidate: what it started, what PyTorch computed, which bytes its kernels stored.

Three observers around each call, none of which the candidate can switch off without being refused for it:
- thread starts (every Python thread goes through `_thread.start_new_thread`, wrapped before candidate code loads):
  work in a thread joined before the call returns leaves the thread count as it was, and the profiler sees one
  thread only, so a call may start none;
- PyTorch's profiler (`observer.py`): compute at the output's scale, by what it does, not by its name;
- under the interpreter, the ledger of kernel stores and the grants for PyTorch's copies of them
  (`kernel_stores.py`): every output byte must be a kernel's.
Under the interpreter every call, checked or timed, is watched alike, so a candidate cannot tell them apart.

The copy grants are a Python dispatch mode: every ATen operator of the call goes through Python, about 8 us an
operator here, inside the timed marks. They serve Triton kernels only (a call that launched another kernel is not
judged by the ledger), so they are entered only for a candidate whose source names Triton (`backend.names_triton`,
decided by the driver for the whole evaluation, so checked and timed calls still look alike). Without them nothing is
skipped but grants: the ledger still records every Triton store, and a call that launched Triton kernels alone is
judged by it, without PyTorch's copies counted as the kernels' (stricter).
"""

from __future__ import annotations

import _thread
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from evaluator.worker.guards import Guards
from evaluator.worker.kernel_stores import CopyGrants
from evaluator.worker.observer import CallObserver


def install_thread_counter(starts: list[int]) -> None:
    """Count every Python thread started from now on into `starts[0]`."""
    import threading
    real = _thread.start_new_thread

    def start_new_thread(*args: Any, **kwargs: Any) -> Any:
        starts[0] += 1
        return real(*args, **kwargs)

    _thread.start_new_thread = start_new_thread
    if getattr(threading, "_start_new_thread", None) is real:
        threading._start_new_thread = start_new_thread  # type: ignore[attr-defined]


def install_host_export_counter(exported: list[int]) -> None:
    """Count the elements that leave tensors for the host (`.numpy()`, `np.asarray`, `.tolist()`, `.item()`) into
    `exported[0]`: numpy and plain Python never reach PyTorch's dispatcher, so host work at the output's scale shows
    here, even when a kernel then copies its result into the output."""
    import torch
    tensor = torch.Tensor
    for name in ("numpy", "__array__", "tolist", "item"):
        real = getattr(tensor, name)

        def counted(self: Any, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            exported[0] += self.numel()
            return _real(self, *args, **kwargs)

        setattr(tensor, name, counted)


@contextlib.contextmanager
def watched(guards: Guards, observe: bool, seen: dict[str, Any], grants: bool = True,
            closing: Callable[[], None] | None = None) -> Iterator[None]:
    """Around one call: thread starts; with `observe`, the profiler; under the interpreter, the ledger and (with
    `grants`) the copy grants. What was seen lands in `seen`, for `problem`. `closing`, once the call returned:
    after the grants, before the profiler stops (its stop costs in proportion to the operators the call ran)."""
    starts0, exported0 = guards.thread_starts[0], guards.host_exports[0]
    observer = CallObserver() if observe else None
    seen["grants"] = grants
    with contextlib.ExitStack() as stack:
        if guards.stores_accounted:
            guards.ledger.begin()
            stack.callback(guards.ledger.end)
        if observer is not None:
            stack.enter_context(observer)
        with contextlib.ExitStack() as granted:
            if guards.stores_accounted and grants:
                granted.enter_context(CopyGrants(guards.ledger))
            yield
        if closing is not None:
            closing()
    seen["threads"] = guards.thread_starts[0] - starts0
    seen["exported"] = guards.host_exports[0] - exported0
    seen["observer"] = observer


def problem(guards: Guards, outputs: list[Any], kernels: dict[str, int], seen: dict[str, Any],
            inputs: list[Any], glue: bool = False, glue_limit: int | None = None) -> str | None:
    """What the watch of one call found: threads started, PyTorch computing on data of the output's size, or
    outputs whose bytes no kernel stored. With `glue` (the rule for PyTorch inside a candidate, `torch_rule.py`),
    PyTorch's compute is the driver's to judge against the reference's; here only a timed call that did more of it
    than `glue_limit` (the most a checked call did) is refused, and values that PyTorch's compute wrote (a sum of a
    kernel's output) are not counted as unwritten."""
    if seen.get("threads"):
        return (f"the candidate started {seen['threads']} thread(s) during a call (work there is out of the "
                "harness's sight)")
    scale = output_scale(outputs, inputs)
    if seen.get("exported", 0) >= scale:
        return (f"the candidate moved {seen['exported']} values from tensors to the host during a call (numpy or "
                "Python work at the output's scale): that work must be done by its kernels")
    observer = seen.get("observer")
    if observer is not None and glue:
        work = observer.glue_work()
        if work is None:
            return "the candidate switched PyTorch's profiler off during a call (it observes the call's work)"
        if glue_limit is not None and work[0] > glue_limit:
            return (f"a timed call computed more with PyTorch ({', '.join(work[1][:4])}) than any call whose results "
                    "were checked: the timed calls did other work than the checked ones")
        # PyTorch's share is the driver's to judge; output values that its compute wrote (no more of them than the
        # elements it read) are not a kernel's to write
        return unwritten_output(guards, outputs, kernels, seen.get("grants", True), allowance=work[0])
    elif observer is not None:
        ops = observer.compute_at_scale(outputs, inputs)
        if ops is None:
            return "the candidate switched PyTorch's profiler off during a call (it observes the call's work)"
        if ops:
            none = "" if any(kernels.values()) else (" (it launched no custom kernel; PyTorch-only candidates need "
                                                    "--allow-torch)")
            return (f"the candidate computed with PyTorch on data of the output's size ({', '.join(ops[:4])}"
                    f"{', ...' if len(ops) > 4 else ''}): that work must be done by its kernels{none}")
    return unwritten_output(guards, outputs, kernels, seen.get("grants", True))


def output_scale(outputs: list[Any], inputs: list[Any]) -> int:
    """The work a call may do outside its kernels: below the smallest output's elements, or a 64th of the largest
    input's when that is more (a final reduction over a few partial sums), and at least two."""
    import torch
    sizes = [o.numel() for o in outputs if isinstance(o, torch.Tensor)]
    largest_input = max((x.numel() for x in inputs if isinstance(x, torch.Tensor)), default=0)
    return max(2, min(sizes) if sizes else 2, largest_input // 64)


def unwritten_output(guards: Guards, outputs: list[Any], kernels: dict[str, int], grants: bool = True,
                     allowance: int = 0) -> str | None:
    """Under the interpreter, for a call whose launches were all Triton kernels: the first output holding bytes
    that no kernel stored (work done on the host, by PyTorch, in another thread...). Native and CUDA kernels
    write outside the ledger, so a call that used one is not judged here. `grants`: whether the call ran with the
    copy grants (a source that does not name Triton runs without). `allowance`: under the rule for PyTorch inside a
    candidate, the elements PyTorch's compute read in the call: at most that many values of the outputs may be its."""
    if not guards.stores_accounted or any(not k.startswith("triton:") for k in kernels):
        return None
    for i, out in enumerate(outputs):
        if guards.exact_type(out) is guards.tensor_type and out.device.type == "cpu":
            missing = guards.ledger.uncovered(out)
            allowed = min(allowance, missing)
            allowance -= allowed
            if missing > allowed:
                why = "" if grants else (" (the candidate's source does not name Triton, so PyTorch's copies of "
                                         "its kernels' outputs did not count as theirs)")
                return (f"{missing} of the {out.numel()} values of output {i} were not written by any kernel "
                        f"(computed outside the launched kernels){why}")
    return None
