"""`evaluate(task, candidate, cfg) -> EvalResult`: the trusted driver of one evaluation. It never imports candidate
code and never raises for anything the candidate does; an unusable task raises `TaskError`.

Order of work: static policy -> load both workers -> correctness trials (fresh seeds, every shape variant, a second
input distribution) -> launch and fallback checks -> interleaved timing with rechecked outputs -> clock cross-check and,
above the suspicious threshold, a re-measure by the driver's own clock -> profile.
"""

from __future__ import annotations

import atexit
import dataclasses
import secrets
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from evaluator import policy
from evaluator.build_cache import BuildCache
from evaluator.backend import backend_of, has_cuda_sources, runs_in_triton_interpreter
from evaluator.build_stage import BuildServer, build_mode, hidden_caches, load_candidate
from evaluator.candidate import Candidate
from evaluator.config import EvalConfig
from evaluator.connection import Refused, WorkerConnection
from evaluator.correctness import compare
from evaluator.degenerate_probes import probe_task
from evaluator.device_lock import DeviceLock, PhaseObserver, device_key
from evaluator.device import device_info, resolve_device
from evaluator.energy import energy_of_both
from evaluator.measure import fresh_seed, measure, outer_per_call_ms, time_alone
from evaluator.gpu_memory import blame_reference_failure, steady_peak
from evaluator.probes import all_finite, expected_in_domain
from evaluator.result import DeviceInfo, EvalResult, Status
from evaluator.sandbox import SandboxError, Zygote
from evaluator.task import Task, TaskError

CPU_TIME_SLACK_S = 60
OUTER_ROUNDS = 3  # re-measures by the driver's clock before a >suspicious_speedup claim is refused
META_NOTE = "shapes only: the degenerate-task checks need real values (run without --meta; the CPU by default)"


@dataclass(frozen=True, slots=True)
class TaskReport:
    """What `task check` found: the variants and the shapes and dtypes going in and out, and on a real device the
    degenerate-task findings (outputs a constant or a stored result reproduces, inputs or weights it ignores)."""

    variants: tuple[dict[str, Any], ...]
    inputs: tuple[tuple[dict[str, Any], ...], ...]
    outputs: tuple[tuple[dict[str, Any], ...], ...]
    ops: tuple[str, ...]
    device: str
    degenerate: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    degenerate_checked: bool = False  # False on the meta device: values are unknown there


class LocalEvaluator:
    """Evaluates on this machine: one trusted reference zygote and one sandboxed candidate zygote per device."""

    def __init__(self, sandbox: str = "auto", build_cache: str | None = None, lock_dir: Path | None = None,
                 phase_observer: PhaseObserver | None = None):
        self.sandbox = sandbox
        self._lock_dir, self._phase_observer = lock_dir, phase_observer  # one timed phase per device (device_lock.py)
        self.build_cache = BuildCache.open(build_cache)  # None: switched off (builds stay private to each worker)
        self._zygotes: dict[tuple[str, str], Zygote] = {}
        self._lock = threading.Lock()
        self._devices: dict[str, DeviceInfo] = {}

    def _zygote(self, device: str, role: str, isolation: str) -> Zygote:
        with self._lock:
            key = (device, role)
            if key not in self._zygotes:
                hidden = hidden_caches(self.build_cache) if role == "candidate" else ()
                self._zygotes[key] = Zygote(device, role, isolation if role == "candidate" else "process", hidden)
            return self._zygotes[key]

    def warm(self, device: str, sandbox: str = "auto") -> None:
        """Launch the reference and candidate zygotes side by side rather than one after the other (a cold
        evaluation's largest cost); the first spawn of each waits for it to be ready. A zygote that fails to start
        here is started again, and its error reported, by the first evaluation that needs it."""
        for role in ("reference", "candidate"):
            try:
                self._zygote(device, role, sandbox).launch()
            except (SandboxError, OSError):
                pass  # spawn starts it again and says why

    def _connect(self, device: str, role: str, nonce: str, cfg: EvalConfig, task: Task) -> WorkerConnection:
        zygote = self._zygote(device, role, cfg.sandbox)
        cpu_s = int(cfg.compile_timeout_s + 4 * cfg.run_timeout_s + CPU_TIME_SLACK_S)
        gpu_share = cfg.gpu_memory_fraction if device == "cuda" and role == "candidate" else 0.0
        handle = zygote.spawn(nonce, cfg.memory_limit_bytes if device == "cpu" else 0, cpu_s, gpu_share)
        return WorkerConnection(zygote, handle, nonce, role, task.label)

    def _timed(self, kind: str, what: str) -> AbstractContextManager[None]:
        """The device's timed phase: held around timing and profiling only, never around trials or builds."""
        return DeviceLock(device_key(kind), self._lock_dir, self._phase_observer).held(what)

    def device(self, kind: str) -> DeviceInfo:
        if kind not in self._devices:
            self._devices[kind] = device_info(kind)
        return self._devices[kind]

    def close(self) -> None:
        with self._lock:
            for z in self._zygotes.values():
                z.close()
            self._zygotes.clear()

    # -- task check -----------------------------------------------------------------------------------------------
    def check_task(self, task: Task, device: str = "cpu", timeout_s: float = 300.0,
                   interpreter_shape: bool = False) -> TaskReport:
        """Load the task in the trusted reference worker and run it once per shape variant; on a real device, also
        run the degenerate-task check on the benchmark shape (a second seed, each input redrawn alone, another init
        seed: 2 + one run per input). On the meta device (shapes only), a task that needs real values (`.item()`,
        data-dependent shapes) is run on the CPU instead, still shapes only. With `interpreter_shape`, the benchmark
        shape is the task's INTERPRETER_SHAPE where it has one: the shapes a Triton kernel on a CPU was checked at."""
        if device == "meta":
            try:
                report = self._check_task(task, "meta", timeout_s, probe=False, interpreter_shape=interpreter_shape)
            except TaskError as meta_error:
                try:
                    report = self._check_task(task, "cpu", timeout_s, probe=False,
                                              interpreter_shape=interpreter_shape)
                except TaskError as cpu_error:
                    on_cpu = str(cpu_error).removeprefix(f"{task.label}: ")
                    if on_cpu in str(meta_error):
                        raise meta_error from None
                    raise TaskError(f"{meta_error} (and on the CPU: {on_cpu})") from None
                report = dataclasses.replace(report, device="cpu (the meta device could not run it)")
            return dataclasses.replace(report, notes=report.notes + (META_NOTE,))
        return self._check_task(task, device, timeout_s, probe=True)

    def _check_task(self, task: Task, device: str, timeout_s: float, probe: bool,
                    interpreter_shape: bool = False) -> TaskReport:
        kind = device if device == "meta" else resolve_device(device)
        nonce = secrets.token_hex(16)
        conn = self._connect("cpu" if kind == "meta" else kind, "reference", nonce, EvalConfig(), task)
        try:
            reply, _ = conn.request({"cmd": "load", "task_source": task.source, "task_name": task.name,
                                     "device": kind, "init_seeds": [fresh_seed()] * 64,
                                     "interpreter_shape": interpreter_shape}, timeout_s, "loading")
            n = int(reply["variants"])
            inputs, outputs, ops = [], [], set()
            base_seed, base = fresh_seed(), list[Any]()
            for v in range(n):
                r, got = conn.request({"cmd": "run", "variant": v, "seed": base_seed if v == 0 else fresh_seed(),
                                       "trace": v == 0, "describe_inputs": True}, timeout_s,
                                      f"running shape variant {v}")
                inputs.append(tuple(r.get("inputs", ())))
                outputs.append(tuple(r["outputs"]))
                ops.update(r.get("ops", []))
                base = got if v == 0 else base
            variants = tuple(dict(v) for v in reply.get("variant_overrides", [{}] * n))
            report = TaskReport(variants, tuple(inputs), tuple(outputs), tuple(sorted(ops)), kind)
            if not probe or kind == "meta":
                return report
            findings, notes = probe_task(conn, timeout_s, base_seed, base, inputs[0], reply.get("tolerance"))
            return dataclasses.replace(report, degenerate=tuple(findings), notes=tuple(notes), degenerate_checked=True)
        except Refused as exc:
            raise TaskError(f"{task.label}: {exc.reason}") from None
        finally:
            conn.close()

    # -- evaluation -----------------------------------------------------------------------------------------------
    def evaluate(self, task: Task, candidate: Candidate, cfg: EvalConfig = EvalConfig()) -> EvalResult:
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
        nonce = secrets.token_hex(16)
        self.warm(kind, cfg.sandbox)
        ref = self._connect(kind, "reference", nonce, cfg, task)
        cand = None
        progress: dict[str, Any] = {}  # the reference's load command, once the candidate has loaded
        reference_failure: TaskError | None = None
        try:
            cand = self._connect(kind, "candidate", secrets.token_hex(16), cfg, task)
            result = self._run(task, candidate, cfg, kind, dev, ref, cand, progress)
        except Refused as exc:
            result = EvalResult(exc.status, exc.reason, device=dev, log=exc.log)
        except TaskError as exc:
            if "load" not in progress:
                raise
            reference_failure = exc
        finally:
            ref.close()
            if cand is not None:
                cand.close()
        if reference_failure is not None:  # the candidate is gone now: does the reference fail alone too?
            result = blame_reference_failure(lambda: self._connect(kind, "reference", secrets.token_hex(16), cfg, task),
                                             task, cfg, dev, reference_failure, progress["load"], ref.last_request)
        if cand is not None and not result.log:
            result = dataclasses.replace(result, log=cand.log())  # complete now that the worker is gone
        return result

    def _run(self, task: Task, candidate: Candidate, cfg: EvalConfig, kind: str, dev: DeviceInfo,
             ref: WorkerConnection, cand: WorkerConnection, progress: dict[str, Any]) -> EvalResult:
        init_seeds = [fresh_seed() for _ in range(64)]
        load = {"cmd": "load", "task_source": task.source, "task_name": task.name, "device": kind,
                "init_seeds": init_seeds, "interpreter_shape": runs_in_triton_interpreter(candidate.source, kind)}
        reply, _ = ref.request(load, cfg.compile_timeout_s, "loading the task")
        n_variants = int(reply["variants"])
        if n_variants > len(init_seeds):
            init_seeds += [fresh_seed() for _ in range(n_variants - len(init_seeds))]
        tolerance = reply.get("tolerance")
        shape = reply.get("interpreter_shape")
        shape_note = (f"; timed on the task's INTERPRETER_SHAPE ({', '.join(f'{k}={v}' for k, v in shape.items())}), "
                      "since Triton runs in its interpreter on this CPU") if shape else ""

        def backend(kernels: dict[str, int] | None) -> str | None:
            return backend_of(kernels or {}, cuda_sources=has_cuda_sources(candidate.source), device_kind=kind,
                              allow_torch=cfg.allow_torch)
        builds = BuildServer(self.build_cache, build_mode(kind), cfg.sandbox, "evaluation")
        load_candidate(cand, {**load, "candidate_source": candidate.source, "require_kernels": not cfg.allow_torch},
                       cfg.compile_timeout_s,
                       "importing and compiling the candidate", builds)
        progress["load"] = load

        probe_seed = fresh_seed()
        # (variant, distribution, probe): probes call once on other inputs first, then on the trial's inputs
        # refilled into the same tensors ("same-tensors") or on a copy with a few elements changed ("near-copy").
        plan: list[tuple[int, str, str | None]] = [(0, "task", None)] * max(cfg.trials, 1)
        plan += [(0, "normal", None), (0, "large", None)]  # large: where a narrower format overflows, a bound saturates
        plan += [(0, "task", "same-tensors"), (0, "perturbed", "near-copy")]
        for v in range(1, n_variants):
            plan += [(v, "task", None), (v, "normal", None)]
        trials: list[dict[str, Any]] = []
        checked_kernels: dict[str, int] | None = None  # per kernel, the fewest launches of a plain trial
        worst_abs = worst_rel = 0.0
        peaks: list[tuple[Any, Any]] = []  # (candidate, reference) per plain trial of the benchmark shape
        notes: set[str] = set()  # facts the worker reports for the verdict (autotune under the interpreter)
        task_finite = True  # whether the task's own inputs gave a finite reference (probes must stay so)
        for i, (variant, dist, probe) in enumerate(plan):
            seed = probe_seed if probe == "near-copy" else fresh_seed()
            run = {"cmd": "run", "variant": variant, "seed": seed, "distribution": dist, "trace": True}
            in_domain = expected_in_domain(ref, run, cfg, task_finite)
            if in_domain is None:
                trials.append({"variant": variant, "distribution": dist, "probe": probe, "skipped": "the reference "
                               "is not finite on these inputs, though it is on the task's own"})
                continue
            run, expected_reply, expected = in_domain
            if i == 0:
                task_finite = all_finite(expected)
            if probe is not None:
                run |= {"prime_seed": probe_seed, "reuse_tensors": probe == "same-tensors"}
            timeout = cfg.compile_timeout_s if i == 0 or variant != plan[i - 1][0] else cfg.run_timeout_s
            got_reply, got = cand.request(run, timeout, f"correctness trial {i + 1}")
            notes.update(str(n) for n in got_reply.get("notes") or ())
            if not cfg.allow_torch:
                _refuse_pytorch_only(i, int(got_reply.get("launches", 0)), set(expected_reply.get("ops", [])))
            if variant == 0 and dist == "task" and probe is None:
                peaks.append((got_reply.get("peak_memory_bytes"), expected_reply.get("peak_memory_bytes")))
                kernels = {str(k): int(n) for k, n in (got_reply.get("kernels") or {}).items()}
                checked_kernels = kernels if checked_kernels is None else {
                    k: min(n, kernels.get(k, 0)) for k, n in checked_kernels.items()}
            verdict = compare(expected, got, tolerance, scaled_atol=dist == "large")
            if dist != "large":  # errors at magnitude 1e5 would swamp the figure users read as the accuracy
                worst_abs, worst_rel = max(worst_abs, verdict.max_abs_error), max(worst_rel, verdict.max_rel_error)
            trials.append({"variant": variant, "distribution": dist, "probe": probe, "max_abs_error": verdict.max_abs_error,
                           "max_rel_error": verdict.max_rel_error, "ok": verdict.ok})
            if not verdict.ok:
                where = f"shape variant {variant}" if variant else "the benchmark shape"
                inputs = {"normal": "standard-normal inputs", "perturbed": "inputs nearly equal to an earlier call's",
                          "large": f"inputs of magnitude {run.get('scale', 0):g}"}.get(dist, "the task's inputs")
                if probe == "same-tensors":
                    inputs = "new values in the same input tensors as an earlier call"
                return EvalResult(Status.INCORRECT, f"trial {i + 1} ({where}, {inputs}): {verdict.reason}",
                                  max_abs_error=worst_abs, max_rel_error=worst_rel, device=dev,
                                  backend=backend(checked_kernels), trials=tuple(trials))

        peak, ref_peak = steady_peak(peaks)
        with self._timed(kind, "timing"):
            m = measure(ref, cand, cfg, kind)
            cand_energy, ref_energy = energy_of_both(ref, cand, cfg, kind)
        if not cfg.allow_torch:
            _refuse_other_work_when_timed(checked_kernels or {}, m.candidate_kernels)
        cand.request({"cmd": "check"}, cfg.run_timeout_s, "the checks after timing")
        for seed, got in m.kept:
            _, expected = ref.request({"cmd": "run", "variant": 0, "seed": seed}, cfg.run_timeout_s,
                                      "recomputing a timed call")
            verdict = compare(expected, got, tolerance)
            if not verdict.ok:
                return EvalResult(Status.INCORRECT, "a timed call on fresh inputs returned a wrong result (cached "
                                                    f"results or work left running past the return?): {verdict.reason}",
                                  device=dev, trials=tuple(trials))
        suspicious = False
        outer_speedup = 0.0
        speedup = m.reference_ms.median_ms / max(m.candidate_ms.median_ms, 1e-9)
        if speedup > cfg.suspicious_speedup:
            suspicious = True
            # The driver's clock also sees costs outside the worker's timer (garbage collection, launch queues), so
            # only a claim four times above what it can confirm is refused: forged timings claim orders of magnitude.
            # Its noise on small tasks can miss an honest claim, so a miss is re-measured (up to three rounds): any
            # round that confirms is enough; a forged claim fails all of them.
            for _ in range(OUTER_ROUNDS):
                with self._timed(kind, "the driver's clock check"):
                    outer_ref = outer_per_call_ms(ref, m.reference_ms.median_ms, cfg)
                    outer_cand = outer_per_call_ms(cand, m.candidate_ms.median_ms, cfg)
                outer_speedup = max(outer_speedup, outer_ref / max(outer_cand, 1e-6))
                if outer_speedup * 4 >= speedup:
                    break
            if outer_speedup * 4 < speedup:
                return EvalResult(Status.REJECTED, f"a {speedup:.1f}x speedup by the worker's timer is only "
                                                   f"{outer_speedup:.1f}x by the driver's own clock (timer tampering?)",
                                  device=dev, trials=tuple(trials))
        compiled_ms = self._compile_baseline(task, cfg, kind, load) if cfg.compile_baseline else None
        profile: dict[str, float] = {}
        ncu_problem: str | None = None
        if cfg.profile:
            reply, _ = cand.request({"cmd": "profile", "seed": fresh_seed()}, cfg.run_timeout_s, "profiling")
            profile = {str(k): float(v) for k, v in (reply.get("profile") or {}).items()}
            if kind == "cuda":
                from evaluator.ncu import profile_with_ncu
                with self._timed(kind, "Nsight Compute"):
                    ncu = profile_with_ncu(task.source, task.name, candidate.source, init_seeds[0], fresh_seed(),
                                           cfg.compile_timeout_s, cfg.sandbox, kind, self.build_cache,
                                           cfg.gpu_memory_fraction)
                profile.update(ncu.metrics)
                ncu_problem = ncu.problem
        reason = "correct on every trial" + "".join(f"; {n}" for n in sorted(notes)) + (
            f"; {speedup:.1f}x is above the suspicious threshold and was confirmed by the driver's clock "
            f"({outer_speedup:.1f}x there)" if suspicious else "")
        reason += shape_note
        reason += f"; no Nsight Compute metrics: {ncu_problem}" if ncu_problem else ""
        return EvalResult(Status.OK, reason, candidate_ms=m.candidate_ms, reference_ms=m.reference_ms,
                          compiled_reference_ms=compiled_ms,
                          max_abs_error=worst_abs, max_rel_error=worst_rel, peak_memory_bytes=peak,
                          reference_peak_memory_bytes=ref_peak, energy_j=cand_energy.energy_j if cand_energy else None,
                          reference_energy_j=ref_energy.energy_j if ref_energy else None,
                          power_w=cand_energy.power_w if cand_energy else None,
                          profile=MappingProxyType(profile), device=dev, backend=backend(checked_kernels),
                          suspicious=suspicious,
                          trials=tuple(trials))


    def _compile_baseline(self, task: Task, cfg: EvalConfig, kind: str, load: dict[str, Any]):  # noqa: ANN202
        """torch.compile(Model) timed by the same protocol in its own trusted worker (compile time not counted)."""
        conn = self._connect(kind, "reference", secrets.token_hex(16), cfg, task)
        try:
            conn.request({**load, "compile": True}, cfg.compile_timeout_s, "loading the compiled baseline")
            conn.request({"cmd": "run", "variant": 0, "seed": fresh_seed()}, cfg.compile_timeout_s,
                         "compiling the torch.compile baseline")
            with self._timed(kind, "the torch.compile baseline"):
                return time_alone(conn, cfg)
        except (TaskError, Refused):
            return None  # a baseline that torch.compile cannot build is reported as absent
        finally:
            conn.close()


def _refuse_pytorch_only(trial: int, launches: int, reference_ops: set[str]) -> None:
    """Every call that has work to do must launch a custom kernel that did work (PyTorch computing at the output's
    scale, and outputs no kernel wrote, are refused in the worker, where the call is watched)."""
    if launches == 0 and reference_ops:
        raise Refused(Status.REJECTED, f"the candidate launched no custom kernel that did work in trial {trial + 1} "
                                       "(no Triton or CUDA extension call stored anything); PyTorch-only candidates "
                                       "need --allow-torch")


def _refuse_other_work_when_timed(checked: dict[str, int], timed: dict[str, int]) -> None:
    """A timed call must launch every kernel that every checked call launched: a candidate that can tell checked
    calls from timed ones must not time cheaper work than it was checked on. How often may follow the data (a
    compaction launches per surviving block), so only presence is compared."""
    for kernel, n in sorted(checked.items()):
        if n > 0 and timed.get(kernel, 0) < 1:
            raise Refused(Status.REJECTED, f"when timed, the candidate never launched {kernel.split(':', 1)[-1]}, "
                                           f"which it launched in every call whose results were checked: the timed "
                                           "calls did other work than the checked ones")


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
