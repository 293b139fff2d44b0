"""A run's task at more than one shape: where the task gives no SHAPES, the variants derived from its sizes
(`evaluator.derived_shapes`) that the reference runs on the meta device are added to it before the run starts.

The task with its derived variants is the task of the run: what every candidate is verified against (each variant
gets its own correctness trials; timing stays at the benchmark shape), what the store keeps, and what an export's
kernels are then verified for. The check is the trusted reference worker's, on the meta device only: shapes, no
memory or compute, so a huge task costs nothing at its real size, and a task the meta device cannot run keeps its
single shape, said in a note."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evaluator import Task, TaskError
from evaluator.derived_shapes import candidates, with_shapes

Check = Callable[[Task], object]  # raises TaskError where the reference cannot run the task (on the meta device)


@dataclass(frozen=True, slots=True)
class ShapedTask:
    task: Task
    note: str = ""  # one sentence for the user: which variants were added, or why none


def meta_check() -> Check:
    """The default evaluator's task check on the meta device, with no fall-back to a run at the task's real size."""
    from evaluator import default_evaluator

    def check(task: Task) -> object:
        return default_evaluator().check_task(task, "meta", cpu_fallback=False)
    return check


def with_derived_shapes(task: Task, check: Check | None = None) -> ShapedTask:
    """`task` with the derived variants the reference runs (all of them at once, else each alone)."""
    tried = candidates(task.source, task.label)
    if not tried:
        return ShapedTask(task)
    check = check or meta_check()
    kept = tried if _runs(check, with_shapes(task, tried)) else [s for s in tried if _runs(check, with_shapes(task, [s]))]
    if not kept:
        return ShapedTask(task, f"{task.label} gives no SHAPES and its reference runs at none of the sizes derived "
                                f"from it on the meta device: kernels are verified at its one shape only")
    words = ", ".join(f"{k}={v}" for s in kept for k, v in s.items())
    return ShapedTask(with_shapes(task, kept), f"{task.label} gives no SHAPES: kernels are also verified at {words} "
                                               "(derived from its sizes; timed at its own)")


def _runs(check: Check, task: Task) -> bool:
    try:
        check(task)
    except TaskError:
        return False
    return True
