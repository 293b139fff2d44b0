"""The command loop shared by the reference worker (trusted) and the candidate worker (sandboxed).

Both sides run the very same code for inputs, calls and timing, so reference and candidate are measured by one method.
The driver sends commands over the private channel; nothing here decides a verdict: the worker reports facts (outputs,
launch counts, ops, timings, problems it saw) and the driver judges them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any, cast

import torch

from evaluator import call_watch, interpreter_gaps, process_tree, timing, torch_profile
from evaluator.guards import Guards, same_bits
from evaluator.op_trace import OpTrace
from evaluator.task_runtime import NORMAL_SCALE, TaskRuntime, as_outputs, describe
from evaluator.wire import Channel, ChannelClosed

CANDIDATE_MODULE = "opforge_candidate"
IDLE_MIN_WINDOW_S = 0.05   # idle windows shorter than this are not judged
IDLE_CPU_FLOOR_S = 0.05    # CPU a worker may use while idle (message handling), and
IDLE_CPU_SHARE = 0.25      # the share of the idle window it may use, whichever is larger


class Worker:
    def __init__(self, channel: Channel, role: str, guards: Guards):
        self.ch = channel
        # Bound at start, before any candidate code: patching Channel's class later does not reach these.
        self.send, self.recv = channel.send, channel.recv
        self.role = role  # "reference" | "candidate"
        self.guards = guards  # both roles run the same checks (same costs); only the candidate is refused
        self.enforce = role == "candidate"
        self.rt: TaskRuntime | None = None
        self.model_cls: Any = None
        self.models: dict[int, torch.nn.Module] = {}
        self.init_seeds: list[int] = []
        self.timer: timing.CallTimer | None = None
        self.grad = False
        self.compiled = False
        self.reference_states: dict[int, dict[str, torch.Tensor]] = {}  # candidate: the reference's weights
        self.require_kernels = False  # outputs must be written by kernels (the driver's, unless --allow-torch)

    # -- commands -------------------------------------------------------------------------------------------------
    def serve(self) -> None:
        idle_from: tuple[int, float] | None = None  # (wall ns, process CPU s) when the last command ended
        while True:
            try:
                cmd, _ = self.recv()
            except ChannelClosed:
                return
            name = cmd.get("cmd")
            if name == "exit":
                return
            if idle_from is not None and self.enforce:
                self._check_idle(*idle_from)
            try:
                getattr(self, f"cmd_{name}")(cmd)
            except ChannelClosed:
                return
            except Exception as exc:  # a failure of the code under test, reported as data
                if self.enforce and self.guards.refusals:
                    self.send({"status": "rejected", "reason": self.guards.refusals[0], "log": _tail()})
                else:
                    self.send({"status": "runtime_error", "reason": _with_hint(exc), "log": _tail()})
            idle_from = (self.guards.now_ns(), self.guards.cpu_s())

    def _check_copy_ops(self) -> None:
        """Right after a call, before the harness copies its outputs or uses a builtin: the builtins are the ones
        captured at load (a hook on `isinstance` that finishes work when the harness calls it, then removes itself,
        is still in place here), and the copy operators' kernels are unchanged. Both roles pay for the check (the
        driver's clock compares their per-call costs); only the candidate is refused."""
        builtin = self.guards.builtins_changed()
        changed = self.guards.copy_ops_changed()
        if self.enforce:
            if builtin and not self.guards.refusals:
                self.guards.refusals.append(f"the candidate replaced builtins.{builtin}, which the harness uses")
            if changed and not self.guards.refusals:
                self.guards.refusals.append(f"the candidate changed PyTorch's dispatcher ({changed}), which the "
                                            "harness's copies of its outputs go through")

    def _check_idle(self, wall0_ns: int, cpu0_s: float) -> None:
        """Between commands the worker only waits for the driver (the reference is being run or timed): CPU spent
        then is work in threads the thread count does not see (a callback on PyTorch's inter-op pool), which could
        finish results late or slow the reference down. It is recorded, and refused at the next check."""
        wall_s = (self.guards.now_ns() - wall0_ns) / 1e9
        cpu_s = self.guards.cpu_s() - cpu0_s
        if wall_s >= IDLE_MIN_WINDOW_S and cpu_s > max(IDLE_CPU_FLOOR_S, IDLE_CPU_SHARE * wall_s):
            self.guards.refusals.append(f"the candidate's process used {cpu_s:.2f} s of CPU in {wall_s:.2f} s while "
                                        "it had nothing to do (work running in the background)")

    def cmd_load(self, cmd: dict[str, Any]) -> None:
        device = torch.device(cmd["device"])
        try:
            self.rt = TaskRuntime(cmd["task_source"], cmd["task_name"], str(device),
                                  bool(cmd.get("interpreter_shape")))
        except Exception as exc:
            self.send({"status": "task_error", "reason": _one_line(exc), "log": _tail()})
            return
        self.grad = bool(getattr(self.rt.module, "REQUIRES_GRAD", False))
        self.init_seeds = list(cmd["init_seeds"])
        self.compiled = bool(cmd.get("compile"))
        self.require_kernels = bool(cmd.get("require_kernels"))
        self.timer = timing.CallTimer(device)
        self.timer.calibrate()  # before any candidate code: what an empty call costs this timer
        self.models.clear()
        self.guards.take_snapshot(dispatcher=self.enforce)
        if self.role == "reference":
            self.model_cls = self.rt.module.Model
            tol = getattr(self.rt.module, "TOLERANCE", None)
            self.send({"status": "ready", "variants": len(self.rt.variants), "variant_overrides":
                          [{k: repr(v) for k, v in var.items()} for var in self.rt.variants],
                          "tolerance": {k: float(v) for k, v in tol.items()} if isinstance(tol, dict) else None,
                          "interpreter_shape": None if self.rt.interpreter_shape is None else
                          {k: repr(v) for k, v in self.rt.interpreter_shape.items()}})
            return
        # The reference weights of every shape variant, built now: the task's module classes are then dropped, so
        # candidate code cannot reach the task (and patch how its inputs are drawn).
        self.reference_states = {v: self.rt.reference_model(v, self.init_seeds[v]).state_dict()
                                 for v in range(len(self.rt.variants))}
        self.rt.forget_models()
        path = Path(os.getcwd()) / "candidate.py"
        path.write_text(cmd["candidate_source"])
        # load_inline calls during the import ask the driver for their build (build_stage.py); never afterwards.
        self.guards.build_client = self._request_build if cmd.get("builds") else None
        self.guards.build_mode = "link" if cmd.get("build_mode") == "link" else "check"
        self.guards.collecting = bool(cmd.get("collect"))
        try:
            spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, path)
            module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
            sys.modules[CANDIDATE_MODULE] = module
            spec.loader.exec_module(module)  # type: ignore[union-attr]
        except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code is a failure too
            from evaluator.cuda_build import CompileFailed, NoCudaDevice
            from evaluator.native_build import NativeBuildError
            if self.guards.refusals:
                self.send({"status": "rejected", "reason": f"{self.guards.refusals[0]} (while being imported)",
                              "log": _tail()})
            elif isinstance(exc, NoCudaDevice):
                self.send({"status": "runtime_error", "reason": str(exc)})
            elif isinstance(exc, CompileFailed):
                self.send({"status": "compile_error", "reason": "the CUDA sources do not compile",
                              "log": str(exc)})
            elif isinstance(exc, NativeBuildError):
                self.send({"status": "compile_error", "reason": str(exc).splitlines()[0][:300],
                              "log": str(exc)})
            else:
                self.send({"status": "compile_error", "reason": f"importing the candidate failed: {_one_line(exc)}",
                              "log": _tail()})
            return
        finally:
            self.guards.build_client = None
        if self._refuse_if_tampered("while being imported"):
            return
        model_cls = getattr(module, "ModelNew", None)
        if not isinstance(model_cls, type) or not issubclass(model_cls, torch.nn.Module):
            self.send({"status": "compile_error", "reason": "the candidate defines no class ModelNew(nn.Module)"})
            return
        self.model_cls = model_cls
        self.send({"status": "ready", "variants": len(self.rt.variants)})

    def _request_build(self, spec: dict[str, Any], kind: str = "cuda") -> tuple[dict[str, Any], list[torch.Tensor]]:
        """One load_inline or load_c (`kind` native) call's build, asked of the driver; the reply is its verdict
        (and the library's bytes)."""
        self.send({"status": "build", "spec": spec, "kind": kind})
        return self.recv()

    def cmd_run(self, cmd: dict[str, Any]) -> None:
        """One correctness call: fresh inputs from the seed, outputs back, and what was seen during the call."""
        rt, timer = self.rt, self.timer
        assert rt is not None and timer is not None
        variant = int(cmd["variant"])
        model = self._model(variant)
        probe: dict[str, Any] = {}  # the degenerate-task check (`task check`, reference only): other weights or input
        if cmd.get("init_seed") is not None and self.role == "reference":
            model, probe = rt.reseeded_model(variant, int(cmd["init_seed"]), model)
        if cmd.get("fresh_input") is not None and self.role == "reference":
            inputs, changed = rt.inputs_with_fresh(variant, int(cmd["seed"]), int(cmd["fresh_input"]),
                                                   int(cmd["fresh_seed"]))
            probe = {"input_changed": changed}
        else:
            inputs = rt.inputs(variant, int(cmd["seed"]), cmd.get("distribution", "task"),
                               float(cmd.get("scale", NORMAL_SCALE)))
        if cmd.get("prime_seed") is not None:
            primed = self._prime(model, variant, int(cmd["prime_seed"]), inputs, bool(cmd.get("reuse_tensors")))
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
        trace = OpTrace() if cmd.get("trace") and not self.enforce else None
        seen: dict[str, Any] = {}
        with torch.set_grad_enabled(self.grad), self._watched(True, seen):
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
        if cmd.get("describe_inputs"):
            report["inputs"] = describe(inputs)
        if probe:
            report["probe"] = probe
        if self.guards.notes:
            report["notes"] = sorted(self.guards.notes)
        if cuda:
            report["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated() - base_bytes)
        kernels = self.guards.launches_since(launches0)
        report["launches"], report["kernels"] = sum(kernels.values()), kernels
        if rt.device.type == "meta":  # shapes only: nothing to compare, nothing to send
            self.send(report)
            return
        problem = self._problem(outputs, inputs, before) + (self._call_problem(outputs, kernels, seen, inputs),
                                                             self._refuse_reason())
        if self.enforce and any(problem):
            self.send({"status": "rejected", "reason": next(p for p in problem if p)})
            return
        tensors = [self._clone(o) for o in outputs if isinstance(o, torch.Tensor)]
        if len(tensors) != len(outputs):
            self.send({"status": "incorrect", "reason": "the forward returned something that is not a tensor"})
            return
        self.send(report, tensors)

    def cmd_time(self, cmd: dict[str, Any]) -> None:
        """Timed calls on fresh inputs; after each, the driver says whether to send that call's outputs back."""
        rt, timer = self.rt, self.timer
        assert rt is not None and timer is not None
        variant = int(cmd["variant"])
        model = self._model(variant)
        seed: int | None = int(cmd["seed"])
        warm_inputs = rt.inputs(variant, int(cmd["seed"]))
        deadline = timing.now_ms() + float(cmd.get("warmup_ms", 0.0))
        with torch.set_grad_enabled(self.grad):
            while timing.now_ms() < deadline:
                timer.time_call(model, warm_inputs)
            del warm_inputs
            fewest: dict[str, int] | None = None  # per kernel, the fewest launches of any timed call
            left_running: list[float] = []  # per call, how long the device kept working after the call's end mark
            while seed is not None:
                inputs = rt.inputs(variant, seed)
                launches0 = dict(self.guards.launches)
                seen: dict[str, Any] = {}
                with self._watched(self.guards.stores_accounted, seen):
                    ms, out = timer.time_call(model, inputs)
                left_running.append(timer.left_running_ms)
                self._check_copy_ops()
                kernels = self.guards.launches_since(launches0)
                fewest = kernels if fewest is None else {k: min(n, kernels.get(k, 0)) for k, n in fewest.items()}
                outputs = as_outputs(out)
                kept = [self._clone(o) for o in outputs if self.guards.exact_type(o) is self.guards.tensor_type]
                problems = self._problem(outputs, inputs, None) + (self._call_problem(outputs, kernels, seen, inputs),)
                if self.enforce and any(problems):
                    self.send({"status": "rejected", "reason": f"during timing: {next(p for p in problems if p)}"})
                    return
                del out, inputs
                self.send({"status": "rep", "ms": ms})
                reply, _ = self.recv()
                if reply.get("keep"):
                    self.send({"status": "kept"}, kept)
                del kept
                seed = reply.get("next_seed")
        # The whole dispatch table (~50 ms) at the end of the blocks the driver picks at random, after the last call.
        problem = self._refuse_reason(deep=bool(reply.get("check")))
        if self.enforce and problem:
            self.send({"status": "rejected", "reason": f"during timing: {problem}"})
            return
        self.send({"status": "timed", "kernels": fewest or {},
                   "left_running_ms": sorted(left_running)[len(left_running) // 2] if left_running else 0.0})

    def cmd_loop(self, cmd: dict[str, Any]) -> None:
        """Back-to-back calls on one set of inputs for at least `seconds`: what the driver meters energy over."""
        assert self.rt is not None and self.timer is not None
        inputs = self.rt.inputs(int(cmd["variant"]), int(cmd["seed"]))
        with torch.set_grad_enabled(self.grad):
            calls = timing.back_to_back(self._model(int(cmd["variant"])), inputs, self.timer, float(cmd["seconds"]))
        problem = self._refuse_reason() if self.enforce else None
        self.send({"status": "rejected", "reason": f"during the energy loop: {problem}"} if problem else
                  {"status": "looped", "calls": calls})

    def cmd_check(self, cmd: dict[str, Any]) -> None:
        """The costlier checks on their own, the dispatch table included: the driver asks once timing is over."""
        problem = self._refuse_reason(deep=True) if self.enforce else None
        self.send({"status": "rejected", "reason": problem} if problem else {"status": "checked"})

    def cmd_batch(self, cmd: dict[str, Any]) -> None:
        """Build inputs for every seed, then (if asked) call the model on each once; the driver times the round trip."""
        rt, timer = self.rt, self.timer
        assert rt is not None and timer is not None
        variant = int(cmd["variant"])
        model = self._model(variant)
        batches = [rt.inputs(variant, int(s)) for s in cmd["seeds"]]
        timer.sync()
        if cmd.get("calls"):
            with torch.set_grad_enabled(self.grad):
                for inputs in batches:
                    # Outputs are copied as after a timed call: work deferred into that copy is on the clock too.
                    launches0 = dict(self.guards.launches)
                    seen: dict[str, Any] = {}
                    with self._watched(self.guards.stores_accounted, seen):
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

    def cmd_profile(self, cmd: dict[str, Any]) -> None:
        """The PyTorch profiler's table for one call: the agents' feedback where Nsight Compute is not available."""
        assert self.rt is not None and self.timer is not None
        with torch.set_grad_enabled(self.grad):
            metrics = torch_profile.profile_table(self._model(0), self.rt.inputs(0, int(cmd["seed"])), self.timer,
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
        return call_watch.watched(self.guards, observe, seen)

    def _call_problem(self, outputs: list[Any], kernels: dict[str, int], seen: dict[str, Any],
                      inputs: list[Any]) -> str | None:
        if not (self.enforce and self.require_kernels):
            return None
        return call_watch.problem(self.guards, outputs, kernels, seen, inputs)

    def _clone(self, t: torch.Tensor) -> torch.Tensor:
        return self.guards.clone(t).detach()

    def _problem(self, outputs: list[Any], inputs: list[Any], before: list[Any] | None) -> tuple[str | None, ...]:
        """Cheap per-call checks: threads left running, the outputs' structure, inputs left unchanged."""
        extra = self.guards.extra_threads()
        threads = f"the candidate left {extra} thread(s) running after returning" if extra > 0 else None
        mutated = None
        exact, tensor = self.guards.exact_type, self.guards.tensor_type
        for i, (x, x0) in enumerate(zip(inputs, before or inputs)):
            if exact(x) is not tensor and isinstance(x, torch.Tensor):  # a swapped __class__ could lie to checks
                return threads, f"the candidate changed the type of input {i} to {exact(x).__name__}", None
            if before is not None and exact(x) is tensor and not same_bits(x, x0):
                mutated = f"the candidate modified input {i} (inputs must be left unchanged)"
                break
        return threads, self.guards.output_problem(outputs, inputs), mutated

    def _refuse_reason(self, deep: bool = False) -> str | None:
        """The costlier checks, run after loading, after each correctness call and after each timing block; `deep`
        (after loading, timing blocks and batches) adds a comparison of PyTorch's whole dispatch table."""
        if self.guards.refusals:
            return self.guards.refusals[0]
        changed = self.guards.tampered()
        if changed:
            return f"the candidate replaced {changed}, which the harness relies on"
        dispatch = self.guards.dispatcher_changed(deep)
        if dispatch:
            return f"the candidate changed PyTorch's dispatcher ({dispatch}), which the harness's own calls go through"
        spawned = process_tree.live_children(os.getpid())
        if spawned:
            return f"the candidate started {len(spawned)} process(es) that are still running"
        extra = self.guards.extra_threads()
        if extra > 0:
            return f"the candidate left {extra} thread(s) running after returning"
        return None

    def _refuse_if_tampered(self, when: str) -> bool:
        reason = self._refuse_reason() if self.enforce else None
        if reason:
            self.send({"status": "rejected", "reason": f"{reason} ({when})"})
        return bool(reason)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}"[:300] if msg else type(exc).__name__


def _with_hint(exc: BaseException) -> str:
    """The error in one line, led by a sentence when it is a known gap of Triton's CPU interpreter."""
    line = _one_line(exc)
    found = interpreter_gaps.hint(f"{exc!r} {exc.__cause__!r}")
    return f"{found} ({line})" if found else line


def _tail() -> str:
    return traceback.format_exc()[-4000:]
