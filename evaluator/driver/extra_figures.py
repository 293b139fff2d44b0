"""The figures an evaluation adds when asked, beside its verdict: the profile (PyTorch's profiler, perf stat's
counters for native CPU code, Nsight Compute on a GPU) and the torch.compile baseline, each in the device's timed
phase where it times anything. Functions of the `LocalEvaluator` they serve, kept apart from its steps
(`evaluate.py`), as `timed_calls.py` keeps the worker's timed loop apart from `worker/loop.py`."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from typing import TYPE_CHECKING

from evaluator.wire import replies
from evaluator.candidate import Candidate
from evaluator.wire.commands import Load, Profile, Run
from evaluator.config import EvalConfig
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.device.rules import rules
from evaluator.measure.blocks import fresh_seed, time_alone
from evaluator.result import Timing
from evaluator.task import Task, TaskError
from evaluator.verify.trials import Profiled

if TYPE_CHECKING:
    from evaluator.driver.evaluate import LocalEvaluator


def profile(self: LocalEvaluator, task: Task, candidate: Candidate, cfg: EvalConfig, kind: str, cand: WorkerConnection,
             load: Load, backend: str | None) -> Profiled:
    """The PyTorch profiler's table and, on a CUDA device, Nsight Compute's metrics (`--profile`); for native
    CPU kernels, perf stat's counters where this machine has them (perf_stat.py)."""
    if not cfg.profile:
        return Profiled({})
    with self._beside(kind, "the profile run"):
        reply, _ = cand.request_as(Profile(seed=fresh_seed()), replies.Profiled, cfg.run_timeout_s, "profiling")
    metrics = dict(reply.profile)
    if rules(kind).profiler == "perf" and backend == "cpp":
        from evaluator.profile.perf_stat import makes_a_run, profile_with_perf
        # The timed phase for a run under perf only: without a PMU (most VMs) perf is probed and nothing is run.
        with self._timed(kind, "perf stat") if makes_a_run() else contextlib.nullcontext():
            counters = profile_with_perf(task.source, task.name, candidate.source, load.init_seeds[0],
                                         fresh_seed(), cfg.compile_timeout_s, cfg.sandbox)
        return Profiled(metrics | counters.metrics, perf_note=counters.note())
    if rules(kind).profiler != "ncu":
        return Profiled(metrics)
    from evaluator.profile.ncu import profile_with_ncu
    with self._timed(kind, "Nsight Compute"):
        ncu = profile_with_ncu(task.source, task.name, candidate.source, load.init_seeds[0], fresh_seed(),
                               cfg.compile_timeout_s, cfg.sandbox, kind, self.build_cache,
                               cfg.gpu_memory_fraction)
    return Profiled(metrics | dict(ncu.metrics), ncu.problem)

def compile_baseline(self: LocalEvaluator, task: Task, cfg: EvalConfig, kind: str, load: Load) -> Timing | None:
    """torch.compile(Model) timed by the same protocol in its own trusted worker (compile time not counted)."""
    conn = self._connect(kind, "reference", secrets.token_hex(16), cfg, task)
    try:
        conn.request(dataclasses.replace(load, compile=True), cfg.compile_timeout_s,
                     "loading the compiled baseline")
        conn.request(Run(variant=0, seed=fresh_seed()), cfg.compile_timeout_s,
                     "compiling the torch.compile baseline")
        with self._timed(kind, "the torch.compile baseline"):
            return time_alone(conn, cfg, kind)
    except (TaskError, Refused):
        return None  # a baseline that torch.compile cannot build is reported as absent
    finally:
        conn.close()
