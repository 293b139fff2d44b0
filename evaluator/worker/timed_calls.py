"""The worker's timed commands: `time` (timed calls on fresh inputs, each opened by the driver's `go` and closed by
the call's reply, after which the worker waits for the driver's next word while the driver may read the call's
outputs from the shared file, `output_slot.py`) and `batch` (inputs and calls whose round trip the driver times).

Functions of the worker (`self`), in both roles alike: the reference and the candidate are timed by the same code,
which is why these live beside `worker/loop.py`'s command loop rather than in the driver. The module is watched like every
evaluator module loaded in a worker (`guards.worker_modules`): a candidate that rebinds these functions is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from evaluator.worker import heap
from evaluator.worker import timing
from evaluator.wire.commands import Batch, Draw, Go, NextCall, Time, parse_as
from evaluator.wire.input_file import shareable
from evaluator.worker.task_runtime import as_outputs
from evaluator.worker.private_builtins import BUILTINS

__builtins__ = BUILTINS  # type: ignore[assignment]  # the harness's own copy (private_builtins.py)

if TYPE_CHECKING:
    from evaluator.worker.loop import Worker


def time_calls(self: Worker, cmd: Time) -> None:
    """Timed calls on fresh inputs; after each, the driver says whether to send that call's outputs back."""
    rt, timer = self.rt, self.timer
    assert rt is not None and timer is not None
    variant = int(cmd.variant)
    model = self._model(variant)
    seed: int | None = int(cmd.seed)
    warm_inputs = rt.inputs(variant, int(cmd.seed))
    if not self.heap_reserved and not timer.cuda:  # a CPU worker's heap is kept (zygote.py): settle it first
        self.heap_reserved = heap.reserve(timer.args_bytes(warm_inputs)) > 0
    deadline = timing.now_ms() + float(cmd.warmup_ms)
    with torch.set_grad_enabled(self.grad):
        while timing.now_ms() < deadline:
            timer.time_call(model, warm_inputs)
        del warm_inputs
        fewest: dict[str, int] | None = None  # per kernel, the fewest launches of any timed call
        left_running: list[float] = []  # per call, how long the device kept working after the call's end mark
        after = NextCall(next_seed=None)
        shared = bool(cmd.shared_inputs) and self.shared_inputs is not None
        self.direct_outputs = bool(cmd.direct_outputs)  # name the outputs where they lie, no copy (output_slot.py)
        while seed is not None:
            if shared:  # drawn by the reference's worker into the shared file, flushed by the driver
                inputs, evicts = _shared_call_inputs(self, variant, seed)
            else:
                inputs, evicts = _drawn_call_inputs(self, variant, seed)
            launches0 = dict(self.guards.launches)
            seen: dict[str, Any] = {}
            # The driver's own clock for the call runs from its `go` to the reply that `_close_timed_call`
            # sends: what lies between is the same code in both roles (the pool's wake, the call in its watch,
            # the copy check, the copies of the outputs), none of the checks only the candidate pays, and not
            # the profiler's stop, whose cost follows the number of operators a call ran
            # (`clock_checks._cross_check_calls`). The eviction of a cold call's inputs comes before (the harness's
            # own work, outside the watch, or the driver's with shared inputs), the wake of the pool right before
            # the call.
            timer.wake()
            call: dict[str, Any] = {}
            with self._timed_watch(seen, closing=lambda: _close_timed_call(self, call)):
                call["ms"], call["out"] = timer.time_call(model, inputs, evicted=True)
                # First after the end mark, before any code that looks a builtin up in the `builtins` module (the
                # watch's exit, PyTorch's): a hook there that does deferred work and removes itself is still in
                # place here (private_builtins.py)
                self._check_copy_ops()
            out, outputs, after = call["out"], call["outputs"], call["after"]
            left_running.append(timer.left_running_ms)
            kernels = self.guards.launches_since(launches0)
            fewest = kernels if fewest is None else {k: min(n, kernels.get(k, 0)) for k, n in fewest.items()}
            problems = self._problem(outputs, inputs, None) + (self._call_problem(outputs, kernels, seen, inputs),)
            if self.enforce and any(problems):
                self.send({"status": "rejected", "reason": f"during timing: {next(p for p in problems if p)}"})
                return
            if evicts:
                timer.forget(outputs if shared else outputs + inputs)  # shared: the driver flushes the next ones
            # The call's watch goes too, before the next `armed`: freeing a profiler record of many operators (1.7 ms
            # a call at 800 of them) would otherwise land inside the next call's window on the driver's clock.
            del out, outputs, inputs, call, seen
            seed = after.next_seed
    # The whole dispatch table (~50 ms) at the end of the blocks the driver picks at random, after the last call.
    problem = self._refuse_reason(deep=after.check)
    if self.enforce and problem:
        self.send({"status": "rejected", "reason": f"during timing: {problem}"})
        return
    self.send({"status": "timed", "kernels": fewest or {},
               "left_running_ms": sorted(left_running)[len(left_running) // 2] if left_running else 0.0})


def _drawn_call_inputs(self: Worker, variant: int, seed: int) -> tuple[list[Any], bool]:
    """A timed call's inputs drawn in this worker and evicted here (no shared file): after its `armed`, the driver's
    `go`. Returns the inputs and whether they were evicted (a cold call)."""
    assert self.rt is not None and self.timer is not None
    made: list[torch.Tensor] | None = [] if self.timer.flushes_lines else None  # the draw's temporaries
    inputs = self.rt.inputs(variant, seed, made=made)
    evicts = self.timer.evict(inputs, made)
    del made  # the temporaries freed now, their lines flushed where the call evicts
    self.send({"status": "armed"})
    parse_as(self.recv()[0], Go, "the driver's word to make a timed call")
    return inputs, evicts


def _shared_call_inputs(self: Worker, variant: int, seed: int) -> tuple[list[Any], bool]:
    """A timed call's inputs from the shared file (`input_file.py`): the reference's worker draws its own calls'
    into it before its `armed`; the candidate's wait idle while the reference's worker draws theirs and the driver
    flushes them, and its `go` says where they lie. Returns views of the file and whether the call is a cold one."""
    assert self.shared_inputs is not None and self.timer is not None
    if self.role == "reference":
        self.send({"status": "armed", "inputs": _write_inputs(self, variant, seed)})
    else:
        self.send({"status": "armed"})
    go = parse_as(self.recv()[0], Go, "the driver's word to make a timed call")
    inputs = self.shared_inputs.inputs(list(go.inputs or ()))
    return inputs, self.timer.evicts(inputs)


def _write_inputs(self: Worker, variant: int, seed: int) -> list[dict[str, object]] | None:
    """The reference's worker: the inputs of `seed` drawn and copied into the shared file (their layout), the draw's
    own tensors flushed before they are freed (their cached lines would take this worker's next output writes);
    None where the file cannot carry them."""
    assert self.rt is not None and self.timer is not None and self.input_writer is not None
    made: list[torch.Tensor] | None = [] if self.timer.flushes_lines else None
    inputs = self.rt.inputs(variant, seed, made=made)
    if not shareable(inputs):
        return None
    layout = self.input_writer.write(inputs)
    if self.timer.evicts(inputs):  # a cold call: as the worker's own draw flushed its temporaries before
        self.timer.forget(inputs + (made or []))
    return layout.to_wire()


def draw(self: Worker, cmd: Draw) -> None:
    """`draw` (the reference's worker only): a candidate's timed call's inputs into the shared file."""
    if self.role != "reference" or self.input_writer is None:
        self.send({"status": "runtime_error", "reason": "only the reference's worker draws into the shared inputs"})
        return
    self.send({"status": "drawn", "inputs": _write_inputs(self, int(cmd.variant), int(cmd.seed))})


def _close_timed_call(self: Worker, call: dict[str, Any]) -> None:
    """Right after a timed call returned, inside its watch: the copy check, the copy of the outputs into the shared
    file the driver reads (work deferred past the return is in it), or with `direct_outputs` only where they lie
    (the driver reads them from this process's memory while it waits), then the reply that stops the driver's
    clock for the call, and the wait for the driver's next word, during which the driver may read the outputs (and sees
    whether this process runs: `clock_checks.QuietWindow`). Nothing runs between the reply and the wait: the watch's
    end and the checks come after the driver's word. The builtins and copy check ran already, right after the call."""
    outputs = as_outputs(call["out"])
    call["outputs"] = outputs
    tensors = [o for o in outputs if self.guards.exact_type(o) is self.guards.tensor_type]
    named = self.outputs.describe(tensors) if self.direct_outputs else None
    layout = named if named is not None else self.outputs.write(tensors)
    self.send({"status": "rep", "ms": call["ms"], "outputs": layout.to_wire(), **({"direct": True} if named is not None else {})})
    call["after"] = parse_as(self.recv()[0], NextCall, "the driver's word after a timed call")


def batch(self: Worker, cmd: Batch) -> None:
    """Build inputs for every seed, then (if asked) call the model on each once; the driver times the round trip."""
    rt, timer = self.rt, self.timer
    assert rt is not None and timer is not None
    variant = int(cmd.variant)
    model = self._model(variant)
    batches = [rt.inputs(variant, int(s)) for s in cmd.seeds]
    timer.sync()
    if cmd.calls:
        with torch.set_grad_enabled(self.grad):
            for inputs in batches:
                # Outputs are copied as after a timed call: work deferred into that copy is on the clock too.
                launches0 = dict(self.guards.launches)
                seen: dict[str, Any] = {}
                with self._timed_watch(seen):
                    outs = as_outputs(model(*inputs))
                self._check_copy_ops()
                unwritten = self._call_problem(outs, self.guards.launches_since(launches0), seen, inputs)
                if unwritten and self.enforce:
                    self.send({"status": "rejected", "reason": unwritten})
                    return
                for out in outs:
                    if isinstance(out, torch.Tensor):
                        self._clone(out)
        timer.sync()
    # No check inside the round trip the driver times: it asks for them (`check`) after the batches.
    self.send({"status": "batched"})
