"""A worker's `load` command: the task's runtime, the timer, the guards' snapshot, then in the reference's worker
the task's facts (its variants, sizes, tolerance), in the candidate's the reference weights built and the task's
classes dropped before the candidate is imported. A function of the `Worker` it serves, apart from its command loop
(`worker/loop.py`), as `timed_calls.py` is."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from evaluator import harness_library
from evaluator.device.rules import rules
from evaluator.worker import task_size
from evaluator.worker import timing
from evaluator.worker.candidate_import import import_candidate, model_class, one_line, tail
from evaluator.wire.commands import Load
from evaluator.worker.fast_draws import FastDraws
from evaluator.worker.line_flush import LineFlush
from evaluator.worker.private_builtins import BUILTINS
from evaluator.worker.task_runtime import TaskRuntime

__builtins__ = BUILTINS  # type: ignore[assignment]  # the harness's own copy (private_builtins.py)

if TYPE_CHECKING:
    from evaluator.worker.loop import Worker


def load(self: Worker, cmd: Load) -> None:
    """The task loaded (and, in the candidate's worker, the candidate imported), then `ready` with its facts."""
    device = torch.device(cmd.device)
    try:
        library = harness_library.load(cmd.harness_library) if cmd.harness_library else None
    except (OSError, ValueError) as exc:  # both workers draw and evict alike: no falling back in one alone
        self.send({"status": "runtime_error", "reason": f"the harness's native library did not load: {exc}",
                   "log": tail()})
        return
    draws = FastDraws(library) if library is not None else None
    try:
        self.rt = TaskRuntime(cmd.task_source, cmd.task_name, str(device), cmd.interpreter_shape, draws)
    except Exception as exc:
        self.send({"status": "task_error", "reason": one_line(exc), "log": tail()})
        return
    self.grad = bool(getattr(self.rt.module, "REQUIRES_GRAD", False))
    self.init_seeds = [int(s) for s in cmd.init_seeds]
    self.compiled = cmd.compile
    self.require_kernels = cmd.require_kernels
    self.torch_glue = cmd.torch_glue
    self.torch_work_checked = 0  # the most PyTorch compute a checked call did (timed calls may do no more)
    self.copy_grants = cmd.copy_grants
    evicts = rules(device.type).evicts_host_caches  # a CPU's: the harness library's line flush, where it was built
    self.timer = timing.CallTimer(device, flush=LineFlush.of(library) if evicts else None)
    self.timer.calibrate()  # before any candidate code: what an empty call costs this timer
    self.models.clear()
    self.guards.take_snapshot(dispatcher=self.enforce)
    if self.role == "reference":
        self.model_cls = self.rt.module.Model
        tol = getattr(self.rt.module, "TOLERANCE", None)
        # Each variant's bytes, from the task on the meta device, where the driver asks (once a task: the meta
        # device's first ops cost a worker 0.4-2 s): it refuses a task that cannot fit before its first trial
        # draws anything (task_size.py).
        sizes = task_size.measure_on_meta(cmd.task_source, cmd.task_name, len(self.rt.variants)) \
            if cmd.size_task else None
        self.send({"status": "ready", "variants": len(self.rt.variants),
                   "sizes": None if sizes is None else [s.to_wire() for s in sizes], "variant_overrides":
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
    if cmd.candidate_source is None:
        self.send({"status": "compile_error", "reason": "no candidate source was sent"})
        return
    # load_inline calls during the import ask the driver for their build (build_stage.py); never afterwards.
    imported = import_candidate(cmd.candidate_source, self.guards, self._request_build if cmd.builds else None,
                                cmd.build_mode, cmd.collect)
    if imported.module is None:
        self.send(imported.failure or {"status": "compile_error", "reason": "importing the candidate failed"})
        return
    if self._refuse_if_tampered("while being imported"):
        return
    model_cls = model_class(imported.module)
    if model_cls is None:
        self.send({"status": "compile_error", "reason": "the candidate defines no class ModelNew(nn.Module)"})
        return
    self.model_cls = model_cls
    # Its OS threads at the snapshot, before the candidate's code: the driver's own count starts from the lower of
    # this and what it counts at the worker's first answer (`worker_cpu.WorkerThreads`).
    self.send({"status": "ready", "variants": len(self.rt.variants), "threads": self.guards.baseline_os_threads})
