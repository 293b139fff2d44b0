"""`evaluate(task, candidate, cfg) -> EvalResult`: the trusted driver of one evaluation. It never imports candidate
code and never raises for anything the candidate does; an unusable task raises `TaskError`.

Order of work: static policy -> load both workers -> correctness trials (fresh seeds, every shape variant, a second
input distribution) -> launch and fallback checks -> interleaved timing with rechecked outputs -> clock cross-check and,
above the suspicious threshold, a re-measure by the driver's own clock -> profile.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from types import MappingProxyType
from typing import Any

from evaluator import harness_library
from evaluator.verify import policy
from evaluator.worker import task_size
from evaluator.wire import replies
from evaluator.build.cache import BuildCache
from evaluator.backend import backend_of, has_cuda_sources, names_triton, runs_in_triton_interpreter
from evaluator.build.stage import BuildServer, ask_load, build_mode, load_candidate
from evaluator.candidate import Candidate
from evaluator.config import EvalConfig
from evaluator.wire.commands import Check, Load
from evaluator.driver.connection import Refused, WorkerConnection, close_all, closed_meanwhile
from evaluator.measure.clock_confirmation import MEASUREMENTS_BEFORE_REFUSING, claim_bound, confirm_speedup
from evaluator.device.lock import DeviceLock, PhaseObserver, device_key
from evaluator.device.info import device_info, resolve_device
from evaluator.device.rules import rules
from evaluator.driver.extra_figures import compile_baseline, profile
from evaluator.driver.patched_clock import measure_with_proof_first
from evaluator.measure.energy_loops import energy_of_both
from evaluator.measure.cpu_memory import SAMPLED, CallPeaks, peaks_of_both
from evaluator.measure.worker_cpu import WorkerCpu, WorkerThreads
from evaluator.measure.clock_checks import CandidateClock, QuietWindow
from evaluator.measure.blocks import Measurement, OutputReads, fresh_seed, measure
from evaluator.wire.output_slot import Reservoir
from evaluator.measure.gpu_memory import blame_reference_failure
from evaluator.wire.input_file import DriverInputs
from evaluator.result import DeviceInfo, EvalResult, Status
from evaluator.sandbox.process_tree import spare_threads
from evaluator.sandbox.launch import Zygote
from evaluator.worker.timing import cpu_cold_from_bytes
from evaluator.measure.trusted_inputs import TrustedInputs, quiet_while_drawing
from evaluator.task import Task, TaskError
from evaluator.worker.task_size import TaskSize
from evaluator.wire.output_slot import direct_reads_possible
from evaluator.verify.task_check import TaskReport, check_task
from evaluator.verify.torch_rule import rule_name
from evaluator.verify.trials import (Checked, Loaded, Profiled, Timed, TrialRuns, ask_first_trial, plan, recheck_timed,
                              refuse_other_work_when_timed, run_trials)
from evaluator.driver.warm_start import WarmZygotes, hidden_caches
from evaluator.sandbox.zygote_env import openmp_environment

CPU_TIME_SLACK_S = 60


class LocalEvaluator:
    """Evaluates on this machine: one trusted reference zygote and one sandboxed candidate zygote per device."""

    def __init__(self, sandbox: str = "auto", build_cache: str | None = None, lock_dir: Path | None = None,
                 phase_observer: PhaseObserver | None = None, zygotes: WarmZygotes | None = None):
        """`zygotes`: ones already launched (`warm_start.py`: before the caller imported torch), for this build
        cache; they become this evaluator's, closed with it."""
        self.sandbox = sandbox
        self._lock_dir, self._phase_observer = lock_dir, phase_observer  # one timed phase per device (device_lock.py)
        self.build_cache = BuildCache.open(build_cache)  # None: switched off (builds stay private to each worker)
        hidden = hidden_caches(self.build_cache)
        if zygotes is not None and zygotes.hidden != hidden:
            raise ValueError(f"the zygotes given hide {zygotes.hidden}, but this evaluator's candidates must not see "
                             f"{hidden}; start them with WarmZygotes.for_cache(BuildCache.open({build_cache!r}))")
        self._zygotes = zygotes if zygotes is not None else WarmZygotes(hidden)
        self._devices: dict[str, DeviceInfo] = {}
        self._task_sizes: dict[str, tuple[TaskSize, ...]] = {}  # by task source: sized once (task_size.py)

    def _zygote(self, device: str, role: str, isolation: str) -> Zygote:
        return self._zygotes.get(device, role, isolation)

    def warm(self, device: str, sandbox: str = "auto") -> None:
        """Launch both zygotes of the device side by side (`WarmZygotes.warm`)."""
        self._zygotes.warm(device, sandbox)

    def _connect(self, device: str, role: str, nonce: str, cfg: EvalConfig, task: Task) -> WorkerConnection:
        with self._beside(device, "starting a worker"):  # a zygote's start (imports) is heavy work on a CPU
            return self._spawn(device, role, nonce, cfg, task)

    def _spawn(self, device: str, role: str, nonce: str, cfg: EvalConfig, task: Task,
               inputs: DriverInputs | None = None) -> WorkerConnection:
        """A worker forked from the role's zygote (waiting for the zygote to be ready); the caller holds the device's
        lock shared (`_beside`). `inputs`: the evaluation's shared input file, handed to the worker (read-only to
        the candidate's)."""
        zygote = self._zygote(device, role, cfg.sandbox)
        cpu_s = int(cfg.compile_timeout_s + 4 * cfg.run_timeout_s + CPU_TIME_SLACK_S)
        on = rules(device)
        gpu_share = cfg.gpu_memory_fraction if on.gpu_memory_share and role == "candidate" else 0.0
        inputs_fd = inputs.worker_fd(role) if inputs is not None else None
        try:
            handle = zygote.spawn(nonce, cfg.memory_limit_bytes if on.address_space_cap else 0, cpu_s, gpu_share,
                                  inputs_fd=inputs_fd)
        finally:
            if inputs_fd is not None:
                os.close(inputs_fd)
        return WorkerConnection(zygote, handle, nonce, role, task.label)

    def _timed(self, kind: str, what: str) -> AbstractContextManager[None]:
        """The device's timed phase: held around timing and profiling only, never around trials or builds."""
        return DeviceLock(device_key(kind), self._lock_dir, self._phase_observer).held(what)

    def _beside(self, kind: str, what: str) -> AbstractContextManager[None]:
        """Work that must not run beside a timed phase (worker starts, builds, trials, rechecks, the profile run): on
        a CPU it would take the timed phase's cores, so it holds the device's lock shared (a no-op on a GPU)."""
        return DeviceLock(device_key(kind), self._lock_dir).shared(what) if rules(kind).keep_off_timed_cores \
            else contextlib.nullcontext()

    def device(self, kind: str) -> DeviceInfo:
        if kind not in self._devices:
            self._devices[kind] = device_info(kind)
        return self._devices[kind]

    def close(self) -> None:
        self._zygotes.close()

    # -- task check -----------------------------------------------------------------------------------------------
    def check_task(self, task: Task, device: str = "cpu", timeout_s: float = 300.0,
                   interpreter_shape: bool = False, cpu_fallback: bool = True) -> TaskReport:
        """`task_check.check_task` with this evaluator's reference zygotes."""
        return check_task(self._connect, task, device, timeout_s, interpreter_shape, cpu_fallback)

    # -- evaluation -----------------------------------------------------------------------------------------------
    def evaluate(self, task: Task, candidate: Candidate, cfg: EvalConfig = EvalConfig(),
                 timed_over: Callable[[], None] | None = None) -> EvalResult:
        """`timed_over`: called (in this thread) after each timing of the candidate on a CPU, where the rest of the
        evaluation (rechecks, the clock probe, closing) never runs beside a timed phase: a runner may then start
        preparing another evaluation (`pool.LocalRunner`). Not called on a GPU, nor for a candidate that never got
        timed."""
        kind = resolve_device(cfg.device)
        dev = self.device(kind)
        try:
            violations = policy.check_source(candidate.source, allow_torch=cfg.allow_torch)
        except SyntaxError as exc:
            return EvalResult(Status.COMPILE_ERROR, f"the candidate does not parse: line {exc.lineno}: {exc.msg}",
                              device=dev)
        if violations:
            more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
            return EvalResult(Status.REJECTED, f"static check: {violations[0]}{more}", device=dev,
                              log="\n".join(map(str, violations)))
        self.warm(kind, cfg.sandbox)
        ref: WorkerConnection | None = None
        cand: WorkerConnection | None = None
        progress: dict[str, Any] = {}  # the reference's load command, once the candidate has loaded
        reference_failure: TaskError | None = None
        # On a CPU, timed calls' inputs are drawn by the reference's worker into a file the candidate's maps
        # read-only, and flushed by this process (trusted_inputs.py).
        shared_inputs = DriverInputs(harness_library.local_flush()) if rules(kind).trusted_inputs else None
        try:
            with self._beside(kind, "starting both workers, loading and building"):
                # Both zygotes fork side by side (each fork copies a torch process's page tables), and the reference
                # loads the task (imports, builds the models) and computes its first trial while the candidate's
                # worker is still being forked, or its zygote still starting, or the candidate loading. The
                # reference's fork runs in a helper thread: its zygote is never under bubblewrap, whose
                # --die-with-parent would follow a thread that restarted it.
                load = self._task_load(task, candidate, kind, cfg)
                with ThreadPoolExecutor(1, thread_name_prefix="opforge-reference-start") as pool:
                    starting = pool.submit(self._start_reference, kind, cfg, task, load, shared_inputs)
                    try:
                        cand = self._spawn(kind, "candidate", secrets.token_hex(16), cfg, task, shared_inputs)
                        # Its load asked at once: it loads the task and imports the candidate beside the reference.
                        builds = BuildServer(self.build_cache, build_mode(kind), cfg.sandbox, "evaluation")
                        ask_load(cand, dataclasses.replace(load, candidate_source=candidate.source), builds)
                    finally:
                        ref, ref_reply, trial_runs = starting.result()
                loaded = self._load(candidate, cfg, kind, load, ref_reply, trial_runs, cand, builds)
                loaded = dataclasses.replace(loaded, inputs=shared_inputs)
            progress["load"] = loaded.load
            result = self._run(task, candidate, cfg, kind, dev, ref, cand, loaded, timed_over)
        except Refused as exc:
            result = EvalResult(exc.status, exc.reason, device=dev, log=exc.log)
        except TaskError as exc:
            if "load" not in progress:
                raise
            reference_failure = exc
        finally:
            close_all(ref, cand)  # side by side: each waits for its zygote to kill and reap its worker
            if shared_inputs is not None:
                shared_inputs.close()
        if reference_failure is not None:  # the candidate is gone now: does the reference fail alone too?
            assert ref is not None  # it failed after loading
            result = blame_reference_failure(lambda: self._connect(kind, "reference", secrets.token_hex(16), cfg, task),
                                             task, cfg, dev, reference_failure, progress["load"], ref.last_request)
        if cand is not None and not result.log:
            result = dataclasses.replace(result, log=cand.log())  # complete now that the worker is gone
        return result

    def _run(self, task: Task, candidate: Candidate, cfg: EvalConfig, kind: str, dev: DeviceInfo,
             ref: WorkerConnection, cand: WorkerConnection, loaded: Loaded,
             timed_over: Callable[[], None] | None = None) -> EvalResult:
        """The evaluation after loading, as a sequence of steps, each returning its record; the first failure is the
        verdict."""
        with self._beside(kind, "correctness trials"):
            checked = run_trials(ref, cand, cfg, loaded.trials, loaded.tolerance)
        backend = backend_of(checked.kernels or {}, cuda_sources=has_cuda_sources(candidate.source),
                             device_kind=kind, allow_torch=cfg.allow_torch)
        if checked.failure is not None:
            return EvalResult(Status.INCORRECT, checked.failure, max_abs_error=checked.max_abs_error,
                              max_rel_error=checked.max_rel_error, device=dev, backend=backend, trials=checked.trials)
        unconfirmed = None
        peaks: CallPeaks | None = None
        for _ in range(MEASUREMENTS_BEFORE_REFUSING):
            timed = self._time(ref, cand, cfg, kind, checked, loaded.threads, loaded.inputs)
            if timed_over is not None and rules(kind).hands_back_timed_cores:
                timed_over()
            if peaks is None and rules(kind).driver_peak_memory:
                with self._beside(kind, "measuring peak memory"):
                    peaks = self._cpu_peaks(ref, cand, cfg, loaded)
            with self._beside(kind, "rechecking timed calls"):
                # The candidate's checks after timing (the whole dispatch table, ~50 ms) run while the reference
                # recomputes the kept calls; a refusal there still comes before a wrong recheck's verdict. Unless
                # the speedup must be confirmed by the driver's clock, the reference is done then and is closed
                # while the candidate's checks finish (its zygote kills and reaps it: tens of ms).
                cand.ask(Check())
                wrong = recheck_timed(ref, timed.measurement.kept, cfg, loaded.tolerance)
                confirming = claim_bound(timed.measurement, cfg) is not None
                with contextlib.nullcontext() if confirming else closed_meanwhile(ref):
                    cand.recv_as(replies.Checked, cfg.run_timeout_s, "the checks after timing")
            if wrong is not None:
                return EvalResult(Status.INCORRECT, wrong, device=dev, trials=checked.trials)
            confirmed = confirm_speedup(ref, cand, cfg, timed.measurement, lambda what: self._timed(kind, what))
            if confirmed.ok:
                break
            unconfirmed = confirmed  # measured again (the reference is still open: the claim was suspicious)
        if not confirmed.ok:
            return EvalResult(Status.REJECTED, f"a {confirmed.speedup:.1f}x speedup by the worker's timer is only "
                                               f"{confirmed.outer_speedup:.1f}x by the driver's own clock, in "
                                               f"{MEASUREMENTS_BEFORE_REFUSING} measurements (timer tampering?)",
                              device=dev, trials=checked.trials)
        compiled_ms = compile_baseline(self, task, cfg, kind, loaded.load) if cfg.compile_baseline else None
        profiled = profile(self, task, candidate, cfg, kind, cand, loaded.load, backend)
        m, cand_energy, ref_energy = timed.measurement, timed.candidate_energy, timed.reference_energy
        reason = "correct on every trial" + "".join(f"; {n}" for n in checked.notes) + confirmed.note()
        reason += (f"; a first measurement's {unconfirmed.speedup:.1f}x was not confirmed by the driver's clock "
                   f"({unconfirmed.outer_speedup:.1f}x there) and was measured again" if unconfirmed else "")
        reason += loaded.shape_note
        reason += f"; {m.contention.note()}" if m.contention is not None and m.contention.contended else ""
        reason += f"; no Nsight Compute metrics: {profiled.ncu_problem}" if profiled.ncu_problem else ""
        reason += f"; {profiled.perf_note}" if profiled.perf_note else ""
        reason += f"; no peak memory: {peaks.problem}" if peaks is not None and peaks.problem else ""
        reason += f"; peak memory {SAMPLED}" if peaks is not None and peaks.sampled else ""
        peak_bytes, ref_peak_bytes = ((peaks.candidate_bytes, peaks.reference_bytes) if peaks is not None else
                                      (checked.peak_memory_bytes, checked.reference_peak_memory_bytes))
        rule = rule_name(cfg.allow_torch, cfg.kernels_only)
        reason += (f"; PyTorch computed {checked.torch_share:.0%} of the reference's work (rule: {rule})"
                   if checked.torch_share else "")
        return EvalResult(Status.OK, reason, candidate_ms=m.candidate_ms, reference_ms=m.reference_ms,
                          compiled_reference_ms=compiled_ms,
                          max_abs_error=checked.max_abs_error, max_rel_error=checked.max_rel_error,
                          peak_memory_bytes=peak_bytes, reference_peak_memory_bytes=ref_peak_bytes,
                          energy_j=cand_energy.energy_j if cand_energy else None,
                          reference_energy_j=ref_energy.energy_j if ref_energy else None,
                          power_w=cand_energy.power_w if cand_energy else None,
                          profile=MappingProxyType(profiled.metrics), device=dev, backend=backend,
                          suspicious=confirmed.suspicious, trials=checked.trials, torch_rule=rule,
                          torch_share=checked.torch_share)

    def _start_reference(self, kind: str, cfg: EvalConfig, task: Task, load: Load,
                         inputs: DriverInputs | None = None) -> tuple[WorkerConnection, replies.Ready, TrialRuns]:
        """A reference worker forked and the task loaded in it (its reply); then its first correctness trial is
        asked at once, while the candidate's zygote may still be starting (`TrialRuns`)."""
        ref = self._spawn(kind, "reference", secrets.token_hex(16), cfg, task, inputs)
        try:
            sized = rules(kind).sized_before_drawing
            unsized = sized and task.source not in self._task_sizes
            ref.ask(dataclasses.replace(load, size_task=True) if unsized else load)
            reply, _ = ref.recv_as(replies.Ready, cfg.compile_timeout_s, "loading the task")
            if unsized:
                self._task_sizes[task.source] = tuple(
                    s for s in map(TaskSize.from_wire, reply.sizes or ()) if s is not None)
            if sized:  # a task that cannot fit is refused before its first trial draws anything
                too_big = task_size.refusal(task.label, list(self._task_sizes[task.source]),
                                            task_size.available_bytes(), cfg.memory_limit_bytes)
                if too_big:
                    raise TaskError(too_big)
            return ref, reply, ask_first_trial(ref, plan(cfg, reply.variants))
        except BaseException:
            ref.close()
            raise

    @staticmethod
    def _task_load(task: Task, candidate: Candidate, kind: str, cfg: EvalConfig) -> Load:
        """The load both workers get (the candidate's adds its source): both watch their timed calls alike."""
        return Load(task_source=task.source, task_name=task.name, device=kind,
                    init_seeds=tuple(fresh_seed() for _ in range(64)),
                    interpreter_shape=runs_in_triton_interpreter(candidate.source, kind),
                    require_kernels=not cfg.allow_torch, copy_grants=names_triton(candidate.source),
                    torch_glue=not cfg.kernels_only,
                    harness_library=harness_library.library_text())

    def _load(self, candidate: Candidate, cfg: EvalConfig, kind: str, load: Load, reply: replies.Ready,
              trial_runs: TrialRuns, cand: WorkerConnection, builds: BuildServer) -> Loaded:
        """The candidate's load (asked already, beside the reference's) answered, its builds by the driver, once the
        reference has loaded the task (`reply`) and been asked its first trial (`trial_runs`)."""
        n_variants = reply.variants
        if n_variants > len(load.init_seeds):  # each worker builds variant v's weights from init_seeds[v]
            raise TaskError(f"{cand.task_label}: {n_variants} shape variants, more than the {len(load.init_seeds)} "
                            "an evaluation seeds")
        shape = reply.interpreter_shape
        shape_note = (f"; timed on the task's INTERPRETER_SHAPE ({', '.join(f'{k}={v}' for k, v in shape.items())}), "
                      "since Triton runs in its interpreter on this CPU") if shape else ""
        # The driver's own count of the worker's threads starts at its first answer (`worker_cpu.WorkerThreads`).
        threads = WorkerThreads(WorkerCpu(cand.zygote.host_pid, cand.handle.pid),
                                spare=spare_threads(int(openmp_environment()["OMP_NUM_THREADS"])),
                                messages=lambda: cand.messages) if rules(kind).worker_cpu_read else None
        load_candidate(cand, dataclasses.replace(load, candidate_source=candidate.source),
                       cfg.compile_timeout_s, "importing and compiling the candidate", builds, asked=True,
                       first_reply=threads.count_first if threads is not None else None)
        return Loaded(load, n_variants, None if reply.tolerance is None else dict(reply.tolerance), shape_note,
                      trial_runs, threads)

    def _time(self, ref: WorkerConnection, cand: WorkerConnection, cfg: EvalConfig, kind: str,
              checked: Checked, threads: WorkerThreads | None = None, inputs: DriverInputs | None = None) -> Timed:
        """Both sides timed (and metered) in the device's timed phase (the candidate's costlier checks and its clock
        follow in `_run`); `threads`: the driver's count of the candidate's threads, checked through it; `inputs`:
        the shared file both sides' timed inputs come from (`trusted_inputs.py`)."""
        with self._timed(kind, "timing"):
            # The candidate's CPU while the reference is timed, from the kernel's accounting (CPU: a GPU runtime's
            # own threads are not judged here), and its threads, counted by the driver.
            process = threads.process if threads is not None else (
                WorkerCpu(cand.zygote.host_pid, cand.handle.pid) if rules(kind).worker_cpu_read else None)
            cpu = process.cpu_s if process is not None else None
            # Outputs named where they lie in each worker's memory and read by the driver from the candidate's,
            # instead of copied into the shared file inside every call's window, where the driver can read another
            # process's memory (`output_slot.py`); both roles alike, so their windows hold the same work.
            direct = process is not None and rules(kind).host_memory_kept and direct_reads_possible()
            ref.direct_outputs = cand.direct_outputs = direct
            cand.direct_pid = process.pid if direct and process is not None else None
            more = threads.refuse_more if threads is not None else None

            def reads() -> OutputReads:  # timed outputs read by the driver itself, the worker watched meanwhile
                return OutputReads(Reservoir(cfg.timing_recheck_reps), cand.read_outputs,
                                   QuietWindow(process.cpu_ns) if process is not None else None)

            def drawn() -> TrustedInputs | None:  # the candidate's inputs drawn by the reference's worker
                if inputs is None:
                    return None
                return TrustedInputs(inputs, ref, cpu_cold_from_bytes(), cfg.run_timeout_s,
                                     quiet_while_drawing(process.cpu_ns) if process is not None else None)

            def measure_once() -> Measurement:
                return measure(ref, cand, cfg, kind, candidate_cpu=cpu, candidate_threads=more,
                               candidate_clock=CandidateClock(cand, cfg.run_timeout_s), candidate_outputs=reads(),
                               trusted_inputs=drawn())
            # Retried once on a clock disagreement; a patched clock is refused for the patch first (patched_clock.py).
            m = measure_with_proof_first(measure_once, process.pid if process is not None else None,
                                         cand.zygote.timer_object, cand.zygote.timer_reference)
            cand_energy, ref_energy = energy_of_both(ref, cand, cfg, kind)
        if not cfg.allow_torch:
            refuse_other_work_when_timed(checked.kernels or {}, m.candidate_kernels)
        return Timed(m, cand_energy, ref_energy)

    @staticmethod
    def _cpu_peaks(ref: WorkerConnection, cand: WorkerConnection, cfg: EvalConfig, loaded: Loaded) -> CallPeaks:
        """Both sides' steady peak memory, read by the driver from each worker's process (`cpu_memory.py`)."""
        cand_pid = loaded.threads.process.pid if loaded.threads is not None else None
        return peaks_of_both(ref, cand, WorkerCpu(ref.zygote.host_pid, ref.handle.pid).pid, cand_pid,
                             cfg.run_timeout_s)


_default: LocalEvaluator | None = None
_default_lock = threading.Lock()


def default_evaluator() -> LocalEvaluator:
    global _default
    with _default_lock:
        if _default is None:
            _default = LocalEvaluator()
            atexit.register(_default.close)
        return _default


def evaluate(task: Task, candidate: Candidate, cfg: EvalConfig = EvalConfig()) -> EvalResult:
    return default_evaluator().evaluate(task, candidate, cfg)
