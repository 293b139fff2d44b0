"""The command loop shared by the reference worker (trusted) and the candidate worker (sandboxed).

Both sides run the very same code for inputs, calls and timing, so reference and candidate are measured by one method.
The driver sends commands over the private channel; nothing here decides a verdict: the worker reports facts (outputs,
launch counts, ops, timings, problems it saw) and the driver judges them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch

from evaluator.worker import call_watch
from evaluator.worker import exact_reference
from evaluator.worker import interpreter_gaps
from evaluator.worker import memory_calls
from evaluator.worker import timed_calls
from evaluator.worker import timing
from evaluator.worker import torch_profile
from evaluator.worker import load as worker_load
from evaluator.worker.call_checks import after_call, idle, per_call, refuse_reason
from evaluator.worker.candidate_import import CANDIDATE_MODULE, one_line, tail
from evaluator.wire.commands import (Batch, Built, Check, Clock, Draw, Exit, Load, Loop, MemoryCalls, Profile, Run, Time,
                                parse, parse_as)
from evaluator.worker.dynamo_absent import mark
from evaluator.worker.guards import Guards
from evaluator.worker.observer import CallObserver
from evaluator.worker.op_trace import OpTrace
from evaluator.wire.input_file import InputReader, InputWriter
from evaluator.wire.output_slot import WorkerSlot
from evaluator.worker.task_runtime import NORMAL_SCALE, TaskRuntime, as_outputs, describe
from evaluator.wire.frames import Channel, ChannelClosed
from evaluator.worker.private_builtins import BUILTINS

__builtins__ = BUILTINS  # type: ignore[assignment]  # the harness's own copy (private_builtins.py)

__all__ = ["CANDIDATE_MODULE", "Worker"]  # CANDIDATE_MODULE: imported from here by zygote.py


def _marked(send: Callable[..., None]) -> Callable[..., None]:
    """`send` with each reply passed through `dynamo_absent.mark`: a failure after something reached for
    torch._dynamo in a worker that went without it goes out as `needs_dynamo` (the driver evaluates again)."""
    def send_marked(header: dict[str, Any], tensors: list[torch.Tensor] | None = None, _mark=mark) -> None:
        send(_mark(header), tensors)
    return send_marked


class Worker:
    def __init__(self, channel: Channel, role: str, guards: Guards, outputs: WorkerSlot | None = None,
                 inputs: InputReader | None = None):
        self.ch = channel
        # Bound at start, before any candidate code: patching Channel's class later does not reach these.
        self.send, self.recv = _marked(channel.send), channel.recv
        self.role = role  # "reference" | "candidate"
        self.guards = guards  # both roles run the same checks (same costs); only the candidate is refused
        # Where timed calls' outputs are copied for the driver to read (a file of its own where none was handed over:
        # a worker driven by a test that reads none).
        self.outputs = outputs if outputs is not None else WorkerSlot(os.memfd_create("opforge-outputs", os.MFD_CLOEXEC))
        self.direct_outputs = False  # the current `time` block names its outputs' addresses instead of copying them
        # The evaluation's shared input file (`input_file.py`), where the driver handed one over: timed calls read
        # their inputs from it, and only the reference's worker writes it.
        self.shared_inputs = inputs
        self.input_writer = InputWriter(inputs.fd) if inputs is not None and role == "reference" else None
        self.enforce = role == "candidate"
        self.rt: TaskRuntime | None = None
        self.model_cls: Any = None
        self.models: dict[int, torch.nn.Module] = {}
        self.init_seeds: list[int] = []
        self.timer: timing.CallTimer | None = None
        self.heap_reserved = False  # `heap.reserve`, before the first timed calls
        self.grad = False
        self.compiled = False
        self.reference_states: dict[int, dict[str, torch.Tensor]] = {}  # candidate: the reference's weights
        self.require_kernels = False  # outputs must be written by kernels (the driver's, unless --allow-torch)
        self.copy_grants = True  # the ledger's copy grants in the watch (the driver's, for the whole evaluation)
        self.torch_glue = False  # the rule for PyTorch inside a candidate (torch_rule.py), else kernels only
        self.torch_work_checked = 0
        self.in_checked_call = False  # a correctness call's watch (cmd_run), not a timed one

    # -- commands -------------------------------------------------------------------------------------------------
    def serve(self) -> None:
        idle_from: tuple[int, float] | None = None  # (wall ns, process CPU s) when the last command ended
        while True:
            try:
                header, _ = self.recv()
            except ChannelClosed:
                return
            if header.get("cmd") == Exit.NAME:
                return
            if idle_from is not None and self.enforce:
                idle(self.guards, *idle_from)
            try:
                cmd = parse(header)  # an unknown command or field: a runtime_error naming it
                getattr(self, f"cmd_{cmd.NAME}")(cmd)
            except ChannelClosed:
                return
            except Exception as exc:  # a failure of the code under test, reported as data
                if self.enforce and self.guards.refusals:
                    self.send({"status": "rejected", "reason": self.guards.refusals[0], "log": tail()})
                else:
                    self.send({"status": "runtime_error", "reason": _with_hint(exc), "log": tail()})
            idle_from = (self.guards.now_ns(), self.guards.cpu_s())

    def cmd_load(self, cmd: Load) -> None:
        worker_load.load(self, cmd)

    def _request_build(self, spec: dict[str, Any], kind: str = "cuda") -> tuple[Built, list[torch.Tensor]]:
        """One load_inline or load_c (`kind` native) call's build, asked of the driver; the reply is its verdict
        (and the library's bytes)."""
        self.send({"status": "build", "spec": spec, "kind": kind, "threads": self.guards.baseline_os_threads})
        header, blobs = self.recv()
        return parse_as(header, Built, "the driver's answer to a build request"), blobs

    def cmd_run(self, cmd: Run) -> None:
        """One correctness call: fresh inputs from the seed, outputs back, and what was seen during the call."""
        rt, timer = self.rt, self.timer
        assert rt is not None and timer is not None
        variant = int(cmd.variant)
        if cmd.exact and self.role == "reference":
            self._run_exact(cmd)
            return
        model = self._model(variant)
        probe: dict[str, Any] = {}  # the degenerate-task check (`task check`, reference only): other weights or input
        if cmd.init_seed is not None and self.role == "reference":
            model, probe = rt.reseeded_model(variant, int(cmd.init_seed), model)
        if cmd.fresh_input is not None and self.role == "reference":
            inputs, changed = rt.inputs_with_fresh(variant, int(cmd.seed), int(cmd.fresh_input),
                                                   int(cmd.fresh_seed or 0))
            probe = {"input_changed": changed}
        else:
            inputs = rt.inputs(variant, int(cmd.seed), cmd.distribution,
                               NORMAL_SCALE if cmd.scale is None else float(cmd.scale))
        if cmd.prime_seed is not None:
            primed = self._prime(model, variant, int(cmd.prime_seed), inputs, cmd.reuse_tensors)
            if primed is None:
                return
            inputs = primed
        before = [self._clone(x) if isinstance(x, torch.Tensor) else x for x in inputs]
        launches0 = dict(self.guards.launches)
        cuda = timer.cuda
        if cuda:
            torch.cuda.reset_peak_memory_stats()
            base_bytes = torch.cuda.memory_allocated()
        # The reference's op names (for reports); the candidate is observed by what its calls compute instead.
        trace = OpTrace() if cmd.trace and not self.enforce else None
        seen: dict[str, Any] = {}
        # The reference's PyTorch work, measured as the candidate's is: the yardstick of the rule (torch_rule.py).
        measured = CallObserver() if self.role == "reference" and self.require_kernels and self.torch_glue else None
        with torch.set_grad_enabled(self.grad), self._watched(True, seen), measured or contextlib.nullcontext():
            if trace is not None:
                with trace:
                    out = model(*inputs)
            else:
                out = model(*inputs)
            timer.sync()
        self._check_copy_ops()
        outputs = as_outputs(out)
        report: dict[str, Any] = {"status": "ran", "ops": sorted(trace.ops) if trace else [],
                                  "outputs": describe(outputs)}
        if cmd.describe_inputs:
            report["inputs"] = describe(inputs)
        if probe:
            report["probe"] = probe
        if self.guards.notes:
            report["notes"] = sorted(self.guards.notes)
        if cuda:
            report["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated() - base_bytes)
        kernels = self.guards.launches_since(launches0)
        report["launches"], report["kernels"] = sum(kernels.values()), kernels
        glue = (measured.glue_work() if measured is not None else
                seen["observer"].glue_work() if self.torch_glue and seen.get("observer") is not None else None)
        if glue is not None:
            report["torch_work"], report["torch_ops"] = glue
            self.torch_work_checked = max(self.torch_work_checked, glue[0])
        if rt.device.type == "meta":  # shapes only: nothing to compare, nothing to send
            self.send(report)
            return
        self.in_checked_call = True
        try:
            call_problem = self._call_problem(outputs, kernels, seen, inputs)
        finally:
            self.in_checked_call = False
        problem = self._problem(outputs, inputs, before) + (call_problem, self._refuse_reason())
        if self.enforce and any(problem):
            self.send({"status": "rejected", "reason": next(p for p in problem if p)})
            return
        tensors = [self._clone(o) for o in outputs if isinstance(o, torch.Tensor)]
        if len(tensors) != len(outputs):
            self.send({"status": "incorrect", "reason": "the forward returned something that is not a tensor"})
            return
        self.send(report, tensors)

    def _run_exact(self, cmd: Run) -> None:
        """The reference's forward in float64 on the same inputs in float64 (`exact_reference.py`); where an
        operator has no float64 path, a `no-exact` status saying why."""
        assert self.rt is not None
        variant = int(cmd.variant)
        try:  # the model first: building it reseeds, and the inputs' draw leaves the RNG as a plain run's forward sees
            model = exact_reference.float64_model(self.rt.reference_model(variant, self.init_seeds[variant]))
            inputs = self.rt.inputs(variant, int(cmd.seed), cmd.distribution,
                                    NORMAL_SCALE if cmd.scale is None else float(cmd.scale))
            with torch.set_grad_enabled(self.grad):
                outputs = as_outputs(model(*[exact_reference.as_float64(x) for x in inputs]))
        except Exception as exc:  # noqa: BLE001 - an operator without a double kernel: the plain verdict stands
            self.send({"status": exact_reference.NO_EXACT, "reason": one_line(exc)})
            return
        if not all(isinstance(o, torch.Tensor) for o in outputs):
            self.send({"status": exact_reference.NO_EXACT, "reason": "the forward returned something not a tensor"})
            return
        self.send({"status": "ran"}, [o.detach().contiguous() for o in outputs])

    def cmd_time(self, cmd: Time) -> None:
        timed_calls.time_calls(self, cmd)

    def cmd_draw(self, cmd: Draw) -> None:
        timed_calls.draw(self, cmd)

    def cmd_loop(self, cmd: Loop) -> None:
        """Back-to-back calls on one set of inputs for at least `seconds`: what the driver meters energy over."""
        assert self.rt is not None and self.timer is not None
        inputs = self.rt.inputs(int(cmd.variant), int(cmd.seed))
        with torch.set_grad_enabled(self.grad):
            calls = timing.back_to_back(self._model(int(cmd.variant)), inputs, self.timer, float(cmd.seconds))
        problem = self._refuse_reason() if self.enforce else None
        self.send({"status": "rejected", "reason": f"during the energy loop: {problem}"} if problem else
                  {"status": "looped", "calls": calls})

    def cmd_memory(self, cmd: MemoryCalls) -> None:
        memory_calls.memory_calls(self, cmd)

    def cmd_clock(self, cmd: Clock) -> None:
        """The timer's clock as it reads now, in ms (the same captured function its marks call)."""
        self.send({"status": "clock", "now_ms": timing.now_ms()})

    def cmd_check(self, cmd: Check) -> None:
        """The costlier checks on their own, the dispatch table included: the driver asks once timing is over."""
        problem = self._refuse_reason(deep=True) if self.enforce else None
        self.send({"status": "rejected", "reason": problem} if problem else {"status": "checked"})

    def cmd_batch(self, cmd: Batch) -> None:
        timed_calls.batch(self, cmd)

    def cmd_profile(self, cmd: Profile) -> None:
        """The PyTorch profiler's table for one call: the agents' feedback where Nsight Compute is not available."""
        assert self.rt is not None and self.timer is not None
        with torch.set_grad_enabled(self.grad):
            metrics = torch_profile.profile_table(self._model(0), self.rt.inputs(0, int(cmd.seed)), self.timer,
                                    self.guards.launches)
        self.send({"status": "profiled", "profile": metrics})

    def _prime(self, model: torch.nn.Module, variant: int, prime_seed: int, target: list[Any],
               reuse: bool) -> list[Any] | None:
        """Call once on other inputs first (a cache's chance to fill); with `reuse`, the target's values are then
        copied into those same tensor objects, so a cache keyed on identity or address returns a stale result."""
        assert self.rt is not None and self.timer is not None
        primed = self.rt.inputs(variant, prime_seed, "task")
        with torch.set_grad_enabled(self.grad):
            model(*primed)
        self.timer.sync()
        problem = self._refuse_reason()
        if self.enforce and problem:
            self.send({"status": "rejected", "reason": problem})
            return None
        if not reuse:
            return target
        for slot, value in zip(primed, target):
            if isinstance(slot, torch.Tensor):
                slot.copy_(value)
        return [p if isinstance(p, torch.Tensor) else t for p, t in zip(primed, target)]

    # -- helpers --------------------------------------------------------------------------------------------------
    def _model(self, variant: int) -> torch.nn.Module:
        if variant not in self.models:
            assert self.rt is not None
            seed = self.init_seeds[variant]
            if self.role == "reference":
                reference = self.rt.reference_model(variant, seed)
                self.models[variant] = cast(torch.nn.Module, torch.compile(reference)) if self.compiled else reference
            else:
                state = self.reference_states[variant]
                init = self.rt.init_inputs(variant)
                torch.manual_seed(seed)
                model = self.model_cls(*init)
                own = model.state_dict()
                matching = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
                model.load_state_dict(matching, strict=False)
                self.models[variant] = model.to(self.rt.device)
        return self.models[variant]

    def _watched(self, observe: bool, seen: dict[str, Any]) -> contextlib.AbstractContextManager:
        """See `call_watch.watched` (the candidate, unless --allow-torch)."""
        if not (self.enforce and self.require_kernels):
            return contextlib.nullcontext()
        return call_watch.watched(self.guards, observe, seen, self.copy_grants)

    def _timed_watch(self, seen: dict[str, Any],
                     closing: Callable[[], None] | None = None) -> contextlib.AbstractContextManager:
        """The watch around a timed or batched call (unless --allow-torch). The candidate's calls run in it as its
        checked calls do, so that it cannot tell the two apart: on a CPU (every worker runs Triton's interpreter
        there) PyTorch's profiler records each ATen operator of the call inside the timed marks.

        The reference's calls do not: the record costs about 4-11 us an operator on these machines, so a watched
        reference was slower in proportion to its operators (gelu_bn_pool's 27: 7-9% of its call; a transformer
        block's 98: 2.7%; `scripts/bench_watch_cost.py`) and every speedup over a many-operator reference was
        inflated by it, from 2026-11-24 to 2026-11-29. The reference enters and leaves an empty watch right before
        its call instead, outside its marks, so that the windows the driver's clock sees around the two sides' calls
        hold the same fixed costs (the profiler's start and stop). A candidate pays the record of its own operators
        (a native call's two or three: some tens of microseconds), which errs against it, never for it."""
        if not self.require_kernels:
            return _then(closing)
        if self.role == "reference":
            return _after_empty_watch(self.guards, closing)
        # The copy grants in the candidate's worker only: the first operator through a dispatch mode imports dynamo
        # (1-2 s of CPU), which the reference's zygote does not hold (`op_trace.py`); an interpreted Triton call,
        # the only kind that runs with them, takes milliseconds beside their few microseconds an operator.
        grants = self.copy_grants and self.enforce
        return call_watch.watched(self.guards, self.guards.stores_accounted, seen, grants, closing)

    def _call_problem(self, outputs: list[Any], kernels: dict[str, int], seen: dict[str, Any],
                      inputs: list[Any]) -> str | None:
        if not (self.enforce and self.require_kernels):
            return None
        if not self.torch_glue:
            return call_watch.problem(self.guards, outputs, kernels, seen, inputs)
        # The rule for PyTorch inside a candidate: its share is judged by the driver on checked calls; a timed call
        # may do no more PyTorch compute than the most a checked call did (the driver never saw it).
        limit = None if self.in_checked_call else self.torch_work_checked
        return call_watch.problem(self.guards, outputs, kernels, seen, inputs, glue_limit=limit, glue=True)

    def _clone(self, t: torch.Tensor) -> torch.Tensor:
        return self.guards.clone(t).detach()

    def _check_copy_ops(self) -> None:
        after_call(self.guards, self.enforce)

    def _problem(self, outputs: list[Any], inputs: list[Any], before: list[Any] | None) -> tuple[str | None, ...]:
        return per_call(self.guards, outputs, inputs, before)

    def _refuse_reason(self, deep: bool = False) -> str | None:
        return refuse_reason(self.guards, deep)

    def _refuse_if_tampered(self, when: str) -> bool:
        reason = self._refuse_reason() if self.enforce else None
        if reason:
            self.send({"status": "rejected", "reason": f"{reason} ({when})"})
        return bool(reason)


@contextlib.contextmanager
def _after_empty_watch(guards: Any, closing: Callable[[], None] | None) -> Iterator[None]:
    """The reference's timed call: the watch's fixed costs paid before it (`Worker._timed_watch`), the call itself
    unwatched, then `closing`."""
    with call_watch.watched(guards, guards.stores_accounted, {}, False):
        pass
    yield
    if closing is not None:
        closing()


@contextlib.contextmanager
def _then(closing: Callable[[], None] | None) -> Iterator[None]:
    """No watch: `closing` once the body returned."""
    yield
    if closing is not None:
        closing()


def _with_hint(exc: BaseException) -> str:
    """The error in one line, led by a sentence when it is a known gap of Triton's CPU interpreter."""
    line = one_line(exc)
    found = interpreter_gaps.hint(f"{exc!r} {exc.__cause__!r}")
    return f"{found} ({line})" if found else line
