"""The evaluator's verdict: statuses, timings and the result record that crosses process, Ray and DB boundaries."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Mapping


class Status(StrEnum):
    OK = "ok"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    CRASHED = "crashed"
    # Not a verdict: the evaluation's Ray worker, its node or the runner itself went away (the OOM killer, Ray's
    # memory monitor, a lost node, a shutdown) before the candidate was judged. A runner reports it after its own
    # retries; the search puts the candidate back in the queue and the store never keeps it as an evaluation.
    INFRA_FAILED = "infra_failed"
    # Never final: the candidate reached for torch._dynamo in a worker that went without it (`dynamo_absent.py`), and
    # is evaluated again in one that has it (`opforge eval` does; every other evaluation starts with dynamo).
    NEEDS_DYNAMO = "needs_dynamo"


@dataclass(frozen=True, slots=True)
class Timing:
    """Robust summary of repeated measurements, in milliseconds. `se_ms`: the median's standard error, how precisely
    the median is known (the stopping rule's figure, `median_standard_error_ms`); None where it was not recorded."""

    median_ms: float
    iqr_ms: float
    reps: int
    se_ms: float | None = None

    @staticmethod
    def from_samples(samples_ms: list[float]) -> "Timing":
        xs = sorted(samples_ms)
        se_ms = median_standard_error_ms(xs)[0] if len(xs) >= 2 else None
        return Timing(median_ms=_quantile(xs, 0.5), iqr_ms=_quantile(xs, 0.75) - _quantile(xs, 0.25), reps=len(xs),
                      se_ms=se_ms)


def median_standard_error_ms(samples_ms: list[float]) -> tuple[float, float]:
    """(the median's standard error, the median), in ms; the error is infinite below two samples.

    Robust, as the median is: the spread is estimated from the interquartile range (IQR / 1.349 for a normal
    distribution) and the median's standard error is 1.2533 sigma / sqrt(n). The mean's formula let one preempted
    call among hundreds of microsecond calls keep a block running to its time cap."""
    n = len(samples_ms)
    if n < 2:
        return math.inf, (samples_ms[0] if samples_ms else math.nan)
    xs = sorted(samples_ms)
    med = _quantile(xs, 0.5)
    iqr = _quantile(xs, 0.75) - _quantile(xs, 0.25)
    return 1.2533 * (iqr / 1.349) / math.sqrt(n), med


def _quantile(sorted_xs: list[float], q: float) -> float:
    if not sorted_xs:
        return math.nan
    pos = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Where a measurement was taken; `kind` is 'cuda' or 'cpu' (Triton kernels then run interpreted)."""

    kind: str
    name: str
    interpreted: bool = False
    driver: str | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    cuda_version: str | None = None
    memory: str | None = None  # CPU: the memory conditions both sides' calls ran under (memory_conditions.py)

    @property
    def label(self) -> str:
        return f"{self.name} (Triton interpreter)" if self.interpreted else self.name


UNKNOWN_DEVICE = DeviceInfo(kind="unknown", name="unknown")


@dataclass(frozen=True, slots=True)
class EvalResult:
    status: Status
    reason: str
    candidate_ms: Timing | None = None
    reference_ms: Timing | None = None
    compiled_reference_ms: Timing | None = None  # torch.compile(Model), when asked for
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    peak_memory_bytes: int | None = None
    reference_peak_memory_bytes: int | None = None
    energy_j: float | None = None
    reference_energy_j: float | None = None  # the reference's energy per call, metered alongside
    power_w: float | None = None
    profile: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    device: DeviceInfo = UNKNOWN_DEVICE
    backend: str | None = None  # triton | cuda | cpp | torch: the kernels the checked calls launched (backend.py)
    log: str = ""
    suspicious: bool = False
    trials: tuple[Mapping[str, Any], ...] = ()
    torch_rule: str | None = None  # the rule for PyTorch inside the candidate it ran under (torch_rule.py)
    torch_share: float | None = None  # PyTorch's compute as a share of the reference's, the most of any trial

    @property
    def speedup(self) -> float | None:
        if self.status != Status.OK or self.candidate_ms is None or self.reference_ms is None:
            return None
        if self.candidate_ms.median_ms <= 0:
            return None
        return self.reference_ms.median_ms / self.candidate_ms.median_ms

    @property
    def speedup_vs_compile(self) -> float | None:
        if self.status != Status.OK or self.candidate_ms is None or self.compiled_reference_ms is None:
            return None
        return self.compiled_reference_ms.median_ms / max(self.candidate_ms.median_ms, 1e-12)

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    @property
    def interpreted(self) -> bool:
        """Whether Triton's interpreter ran the candidate: the device says a CPU interprets Triton, but only a
        Triton kernel (or a verdict from before backends were reported) ran under it; a native C kernel did not."""
        return self.device.interpreted and self.backend in (None, "triton")

    @property
    def device_label(self) -> str:
        """The device's name, with "(Triton interpreter)" only where the interpreter ran the candidate."""
        return self.device.label if self.interpreted else self.device.name

    @property
    def is_verdict(self) -> bool:
        """False for an infrastructure failure: it says nothing about the candidate and must not be stored as its
        verdict (`Status.INFRA_FAILED`)."""
        return self.status != Status.INFRA_FAILED

    def to_json(self) -> dict[str, Any]:
        """The stable JSON shape that `opforge eval --json`, the store and reports share."""
        return {
            "status": self.status.value,
            "reason": self.reason,
            "speedup": self.speedup,
            "speedup_vs_compile": self.speedup_vs_compile,
            "suspicious": self.suspicious,
            "timing": {
                "candidate": timing_json(self.candidate_ms),
                "reference": timing_json(self.reference_ms),
                "compiled_reference": timing_json(self.compiled_reference_ms),
            },
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "peak_memory_bytes": self.peak_memory_bytes,
            "reference_peak_memory_bytes": self.reference_peak_memory_bytes,
            "energy_j": self.energy_j,
            "reference_energy_j": self.reference_energy_j,
            "power_w": self.power_w,
            "profile": dict(self.profile),
            "device": asdict(self.device),
            "backend": self.backend,
            "trials": [dict(t) for t in self.trials],
            "torch_rule": self.torch_rule,
            "torch_share": self.torch_share,
            "log": self.log,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "EvalResult":
        timing = data.get("timing") or {}
        return EvalResult(
            status=Status(data["status"]),
            reason=data["reason"],
            candidate_ms=_timing_from(timing.get("candidate")),
            reference_ms=_timing_from(timing.get("reference")),
            compiled_reference_ms=_timing_from(timing.get("compiled_reference")),
            max_abs_error=data.get("max_abs_error"),
            max_rel_error=data.get("max_rel_error"),
            peak_memory_bytes=data.get("peak_memory_bytes"),
            reference_peak_memory_bytes=data.get("reference_peak_memory_bytes"),
            energy_j=data.get("energy_j"),
            reference_energy_j=data.get("reference_energy_j"),
            power_w=data.get("power_w"),
            profile=MappingProxyType(dict(data.get("profile") or {})),
            device=DeviceInfo(**data["device"]) if data.get("device") else UNKNOWN_DEVICE,
            backend=data.get("backend"),
            log=data.get("log", ""),
            suspicious=bool(data.get("suspicious", False)),
            trials=tuple(data.get("trials") or ()),
            torch_rule=data.get("torch_rule"),
            torch_share=data.get("torch_share"),
        )


def timing_json(t: Timing | None) -> dict[str, float | None] | None:
    """A timing as the verdict's JSON writes it (the evidence an exported package ships uses the same fields)."""
    return None if t is None else {"median_ms": t.median_ms, "iqr_ms": t.iqr_ms, "reps": t.reps, "se_ms": t.se_ms}


def _timing_from(d: Mapping[str, Any] | None) -> Timing | None:
    return None if not d else Timing(median_ms=d["median_ms"], iqr_ms=d["iqr_ms"], reps=int(d["reps"]),
                                     se_ms=None if d.get("se_ms") is None else float(d["se_ms"]))
