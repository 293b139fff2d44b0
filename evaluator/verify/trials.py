"""The correctness trials of one evaluation, in the trusted driver: their plan, their loop, and the recheck of the
calls that were timed. Each trial runs the reference and the candidate on the same fresh inputs and compares the
outputs here (`correctness.compare`); the candidate's worker reports facts and never judges.

The plan, on the benchmark shape: `cfg.trials` trials on the task's inputs, one on N(0, 1) * 4, two at a large
magnitude, one below and one above 1e5 (where a narrower format overflows or a bound saturates), the two cache
probes (called once on other
inputs first, then on the trial's inputs refilled into the same tensors, or on a near copy of them); and on every
other shape variant, one on the task's inputs and one on N(0, 1) * 4.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from evaluator.wire.commands import Load, Run
from evaluator.config import EvalConfig
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.correctness import Comparison, compare
from evaluator.measure.energy import EnergyFigure
from evaluator.worker.exact_reference import judge, no_exact, retriable
from evaluator.measure.gpu_memory import steady_peak
from evaluator.wire.input_file import DriverInputs
from evaluator.measure.blocks import Measurement, fresh_seed
from evaluator.verify.probes import all_finite, expected_in_domain, first_sent
from evaluator.result import Status
from evaluator.task import TaskError
from evaluator.verify.torch_rule import refuse_torch_share, torch_share
from evaluator.measure.worker_cpu import WorkerThreads
from evaluator.wire.replies import NoExact, Ran, status_of


@dataclass(frozen=True, slots=True)
class Trial:
    variant: int
    distribution: str  # task | normal | large | perturbed
    probe: str | None = None  # same-tensors | near-copy: a cache's chance to return a stale result
    side: str | None = None  # a large-magnitude trial's: below | above its nominal magnitude (probes.LARGE_GAP)


@dataclass(frozen=True, slots=True)
class Checked:
    """What the trials found: one record per trial, the worst errors (the large-magnitude trial left out: errors at
    1e5 would swamp the figure users read as the accuracy), per kernel the fewest launches of a plain trial, the
    steady peak memory of both sides, the worker's notes, and the first failure's reason (None: all correct)."""

    trials: tuple[dict[str, Any], ...]
    max_abs_error: float
    max_rel_error: float
    kernels: dict[str, int] | None
    peak_memory_bytes: int | None
    reference_peak_memory_bytes: int | None
    notes: tuple[str, ...]
    failure: str | None = None
    torch_share: float | None = None  # the most PyTorch computed in a trial, as a share of the reference (None: unseen)


def plan(cfg: EvalConfig, n_variants: int) -> tuple[Trial, ...]:
    trials = [Trial(0, "task")] * max(cfg.trials, 1)
    trials += [Trial(0, "normal"), Trial(0, "large", side="below"), Trial(0, "large", side="above")]
    trials += [Trial(0, "task", "same-tensors"), Trial(0, "perturbed", "near-copy")]
    for v in range(1, n_variants):
        trials += [Trial(v, "task"), Trial(v, "normal")]
    return tuple(trials)


@dataclass(frozen=True, slots=True)
class TrialRuns:
    """The trials with their runs (fresh seeds drawn), the first of them asked of the reference already: a cold
    evaluation asks it as soon as the reference has loaded the task, so that the reference's first trial (its first
    call: 0.3-0.4 s on a busy 2-core machine) runs while the candidate's zygote is still starting or the candidate
    loading, not after. Nothing of it reaches the candidate before its own trial."""

    trials: tuple[Trial, ...]
    runs: tuple[Run, ...]
    probe_seed: int


def ask_first_trial(ref: WorkerConnection, trials: tuple[Trial, ...]) -> TrialRuns:
    """The trials' runs, the first asked of the reference (its reply is read by `run_trials`)."""
    probe_seed = fresh_seed()
    runs = tuple(first_sent(Run(variant=t.variant, seed=probe_seed if t.probe == "near-copy" else fresh_seed(),
                                distribution=t.distribution, trace=True), t.side) for t in trials)
    if runs:
        ref.ask(runs[0])  # the reference runs one trial ahead of the candidate (see `_resolve_expected`)
    return TrialRuns(trials, runs, probe_seed)


def run_trials(ref: WorkerConnection, cand: WorkerConnection, cfg: EvalConfig, trials: tuple[Trial, ...] | TrialRuns,
               tolerance: dict[str, float] | None) -> Checked:
    """Runs `trials` in order and stops at the first incorrect one (`TrialRuns`: their first run asked of the
    reference already). Refuses (raises `Refused`) a candidate that launched no kernel where the reference had work
    to do, unless PyTorch-only candidates are allowed."""
    asked = trials if isinstance(trials, TrialRuns) else ask_first_trial(ref, trials)
    trials, runs, probe_seed = asked.trials, asked.runs, asked.probe_seed
    records: list[dict[str, Any]] = []
    fewest: dict[str, int] | None = None
    worst_abs = worst_rel = 0.0
    peaks: list[tuple[Any, Any]] = []  # (candidate, reference) per plain trial of the benchmark shape
    notes: set[str] = set()  # facts the worker reports for the verdict (autotune under the interpreter)
    task_finite = True  # whether the task's own inputs gave a finite reference (probes must stay so)
    torch_shares: list[float] = []  # PyTorch's compute as a share of the reference's, per trial (torch_rule.py)
    stashed: list[tuple[Ran, list[torch.Tensor]]] = []  # the run ahead's reply, read before an exact one

    def checked(failure: str | None = None) -> Checked:
        peak, ref_peak = steady_peak(peaks)
        return Checked(tuple(records), worst_abs, worst_rel, fewest, peak, ref_peak, tuple(sorted(notes)), failure,
                       max(torch_shares, default=None))

    for i, (trial, run) in enumerate(zip(trials, runs)):
        record: dict[str, Any] = {"variant": trial.variant, "distribution": trial.distribution, "probe": trial.probe}
        primed = run if trial.probe is None else replace(run, prime_seed=probe_seed,
                                                         reuse_tensors=trial.probe == "same-tensors")
        first_of_variant = i == 0 or trial.variant != trials[i - 1].variant
        timeout_s = cfg.compile_timeout_s if first_of_variant else cfg.run_timeout_s
        doing = f"correctness trial {i + 1}"
        if trial.distribution == "task":
            # The reference's outputs cannot change what the candidate is asked (no redraw on the task's own
            # inputs), so both workers compute at once.
            cand.ask(primed)
        in_domain = _resolve_expected(ref, run, cfg, task_finite, runs[i + 1] if i + 1 < len(runs) else None,
                                      stashed)
        if in_domain is None:
            records.append(record | {"skipped": "the reference is not finite on these inputs, though it is on "
                                                "the task's own"})
            continue
        run, expected_reply, expected = in_domain
        if trial.distribution != "task":
            primed = run if trial.probe is None else replace(primed, scale=run.scale)
            cand.ask(primed)
        got_reply, got = cand.recv_as(Ran, timeout_s, doing)
        if i == 0:
            task_finite = all_finite(expected)
        notes.update(got_reply.notes)
        if not cfg.allow_torch:
            refuse_pytorch_only(i, got_reply.launches, set(expected_reply.ops))
            share = torch_share(got_reply, expected_reply)
            if share is not None:
                record["torch_share"] = share
                refuse_torch_share(i, share, got_reply)
                torch_shares.append(share)
        if trial == Trial(0, "task"):
            peaks.append((got_reply.peak_memory_bytes, expected_reply.peak_memory_bytes))
            kernels = dict(got_reply.kernels)
            fewest = kernels if fewest is None else {k: min(n, kernels.get(k, 0)) for k, n in fewest.items()}
        verdict = compare(expected, got, tolerance, scaled_atol=trial.distribution == "large")
        if retriable(verdict):
            verdict = against_exact(ref, run, cfg, expected, got, tolerance, trial.distribution == "large", verdict,
                                    stashed if i + 1 < len(runs) else None)
            record["exact"] = verdict.ok
        if trial.distribution != "large":
            worst_abs, worst_rel = max(worst_abs, verdict.max_abs_error), max(worst_rel, verdict.max_rel_error)
        records.append(record | {"max_abs_error": verdict.max_abs_error, "max_rel_error": verdict.max_rel_error,
                                 "ok": verdict.ok})
        if not verdict.ok:
            return checked(f"trial {i + 1} ({_where(trial)}, {_inputs(trial, run)}): {verdict.reason}")
        # Both sides' outputs freed before the next trial's arrive: the driver's heap is kept (`heap.py`), and
        # outputs still held there would send the next ones into fresh pages.
        del in_domain, expected, got
    return checked()


def _resolve_expected(ref: WorkerConnection, run: Run, cfg: EvalConfig, task_finite: bool, ahead: Run | None,
                      stashed: list[tuple[Ran, list[torch.Tensor]]] | None = None,
                      ) -> tuple[Run, Ran, list[torch.Tensor]] | None:
    """The reference's outputs for `run` (asked already), redrawn smaller where a probe leaves its domain
    (`probes.expected_in_domain`); then the next trial's run is asked at once, so that the reference computes it
    while the candidate computes this one and the driver compares. The reference's requests keep their order, and a
    trial is still judged before any later one: a failure ends the trials with the run ahead unread."""
    reply, expected = stashed.pop(0) if stashed else ref.recv_as(Ran, cfg.run_timeout_s, "computing expected outputs")
    resolved = expected_in_domain(ref, run, cfg, task_finite, (reply, expected))
    if ahead is not None:
        ref.ask(ahead)
    return resolved


def against_exact(ref: WorkerConnection, run: Run, cfg: EvalConfig, expected: list[torch.Tensor],
                  got: list[torch.Tensor], tolerance: dict[str, float] | None, scaled_atol: bool, plain: Comparison,
                  stashed: list[tuple[Ran, list[torch.Tensor]]] | None) -> Comparison:
    """A failed comparison judged again against the float64 reference (`exact_reference.py`). `stashed`: where
    the reference has the next trial's run asked already, its reply is read first and kept there."""
    ref.ask(replace(run, exact=True, trace=False, prime_seed=None, reuse_tensors=False))
    if stashed is not None:
        stashed.append(ref.recv_as(Ran, cfg.run_timeout_s, "computing expected outputs"))
    reply, exact = ref.recv(cfg.run_timeout_s, "computing the float64 reference")
    if isinstance(reply, NoExact):
        return no_exact(plain, reply.reason or "no reason given")
    if not isinstance(reply, Ran):
        raise TaskError(f"{ref.task_label}: the reference answered {status_of(reply)!r} where it was to compute "
                        "the float64 reference")
    return judge(expected, got, exact, tolerance, scaled_atol, plain)


def recheck_timed(ref: WorkerConnection, kept: list[tuple[int, list[torch.Tensor]]], cfg: EvalConfig,
                  tolerance: dict[str, float] | None) -> str | None:
    """The reference recomputes each timed call whose outputs came back; the first mismatch's reason, or None.
    Every recompute is asked for at once: the reference computes the next while the driver compares. A mismatch
    is judged again against the float64 reference once the recomputes still asked are read."""
    for seed, _ in kept:
        ref.ask(Run(variant=0, seed=seed))
    replies = len(kept)
    for index, (seed, got) in enumerate(kept):
        _, expected = ref.recv_as(Ran, cfg.run_timeout_s, "recomputing a timed call")
        replies -= 1
        verdict = compare(expected, got, tolerance)
        if retriable(verdict):
            while replies:  # the recomputes still on their way, read before the float64 one
                ref.recv_as(Ran, cfg.run_timeout_s, "recomputing a timed call")
                replies -= 1
            rest = kept[index + 1:]
            verdict = against_exact(ref, Run(variant=0, seed=seed), cfg, expected, got, tolerance, False, verdict,
                                    None)
            if verdict.ok and rest:
                del expected
                return recheck_timed(ref, rest, cfg, tolerance)
        del expected  # before the next recompute arrives (as in `run_trials`)
        if not verdict.ok:
            return ("a timed call on fresh inputs returned a wrong result (cached results or work left running past "
                    f"the return?): {verdict.reason}")
    return None


def _where(trial: Trial) -> str:
    return f"shape variant {trial.variant}" if trial.variant else "the benchmark shape"


def _inputs(trial: Trial, run: Run) -> str:
    if trial.probe == "same-tensors":
        return "new values in the same input tensors as an earlier call"
    return {"normal": "standard-normal inputs", "perturbed": "inputs nearly equal to an earlier call's",
            "large": f"inputs of magnitude {run.scale or 0:g}"}.get(trial.distribution, "the task's inputs")


def refuse_pytorch_only(trial: int, launches: int, reference_ops: set[str]) -> None:
    """Every call that has work to do must launch a custom kernel that did work (PyTorch computing at the output's
    scale, and outputs no kernel wrote, are refused in the worker, where the call is watched)."""
    if launches == 0 and reference_ops:
        raise Refused(Status.REJECTED, f"the candidate launched no custom kernel that did work in trial {trial + 1} "
                                       "(no Triton or CUDA extension call stored anything); PyTorch-only candidates "
                                       "need --allow-torch")


def refuse_other_work_when_timed(checked: dict[str, int], timed: dict[str, int]) -> None:
    """A timed call must launch every kernel that every checked call launched: a candidate that can tell checked
    calls from timed ones must not time cheaper work than it was checked on. How often may follow the data (a
    compaction launches per surviving block), so only presence is compared."""
    for kernel, n in sorted(checked.items()):
        if n > 0 and timed.get(kernel, 0) < 1:
            raise Refused(Status.REJECTED, f"when timed, the candidate never launched {kernel.split(':', 1)[-1]}, "
                                           f"which it launched in every call whose results were checked: the timed "
                                           "calls did other work than the checked ones")


@dataclass(frozen=True, slots=True)
class Loaded:
    """Both workers loaded: the reference's load command (replayed by the compile baseline and by a reference
    failure's blame), the task's shape variants, its tolerance, the note when timed on INTERPRETER_SHAPE, and the
    correctness trials' runs."""

    load: Load
    variants: int
    tolerance: dict[str, float] | None
    shape_note: str
    trials: TrialRuns  # the first asked of the reference already
    threads: WorkerThreads | None = None  # the candidate's worker's threads, counted by the driver (CPU)
    inputs: DriverInputs | None = None  # the shared file both sides' timed inputs come from (CPU; input_file.py)


@dataclass(frozen=True, slots=True)
class Timed:
    measurement: Measurement
    candidate_energy: EnergyFigure | None
    reference_energy: EnergyFigure | None


@dataclass(frozen=True, slots=True)
class Profiled:
    metrics: dict[str, float]
    ncu_problem: str | None = None
    perf_note: str | None = None     # what perf stat could not count, or why it could not run
