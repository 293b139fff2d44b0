"""Energy per call from NVML's cumulative energy counter (a CPU: RAPL's, `cpu_energy.py`), metered over a loop of its
own.

NVML's counter (millijoules) updates every 20-100 ms, so a figure read around one timed call, or a timing block that
also draws inputs and flushes L2, is mostly idle power and harness work. Instead each side runs a separate loop of
back-to-back calls on one set of inputs for at least `LOOP_S`, the idle power is read over a quiet window just before,
and the call's energy is (loop energy - idle power x loop time) / calls.

The meter takes an NVML-like object (pynvml, or a fake in the tests) and the device's UUID: NVML numbers devices by
PCI order over the whole machine, while CUDA numbers them within `CUDA_VISIBLE_DEVICES` (indices or UUIDs, as Ray sets
them per actor) in its own order, so an index would read another GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evaluator.device.rules import rules
from evaluator.device.nvml import load_nvml

LOOP_S = 1.0   # at least ten NVML updates (EvalConfig.energy_loop_s)
IDLE_S = 0.5
IDLE_MAX_AGE_S = 60.0  # the idle power is measured again after this long (it drifts with temperature)


@dataclass(frozen=True, slots=True)
class EnergyFigure:
    energy_j: float      # per call, idle power taken off
    power_w: float       # average power during the loop
    idle_w: float
    calls: int
    loop_s: float


def visible_uuid(nvml: Any, environ: Mapping[str, str], torch_uuid: str | None = None) -> str | None:
    """The NVML UUID of CUDA device 0 of this process. Best: the UUID torch reports for it. Else the first entry of
    CUDA_VISIBLE_DEVICES: a UUID (or its unique prefix, as CUDA accepts), or an index, which is an NVML index only
    with CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default order puts the fastest device first)."""
    if torch_uuid:
        return torch_uuid if torch_uuid.startswith(("GPU-", "MIG-")) else f"GPU-{torch_uuid}"
    first = (environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0].strip()
    uuids = [_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)))
             for i in range(int(nvml.nvmlDeviceGetCount()))]
    if first.startswith(("GPU-", "MIG-")):
        matches = [u for u in uuids if u.startswith(first)]
        return matches[0] if len(matches) == 1 else None
    index = int(first) if first.isdigit() else 0
    if environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len(uuids) > 1:
        return None  # an index in CUDA's own order: no safe NVML equivalent
    return uuids[index] if index < len(uuids) else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class EnergyMeter:
    """Reads one GPU's cumulative energy counter in joules; every reading is None without NVML or the device."""

    def __init__(self, nvml: Any | None, uuid: str | None):
        self._nvml, self._handle = nvml, None
        self.idle: tuple[float, float] | None = None  # (watts, when by meter_loop's clock)
        if nvml is not None and uuid:
            try:
                self._handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            except Exception:
                self._handle = None

    @classmethod
    def for_device(cls, kind: str) -> EnergyMeter:
        if rules(kind).energy_meter != "nvml":
            return cls(None, None)
        import os

        import torch
        nvml = load_nvml()
        if nvml is None:
            return cls(None, None)
        torch_uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
        return cls(nvml, visible_uuid(nvml, os.environ, str(torch_uuid) if torch_uuid else None))

    @property
    def available(self) -> bool:
        return self._handle is not None

    def read_j(self) -> float | None:
        if self._handle is None or self._nvml is None:
            return None
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1000.0
        except Exception:
            return None


def meter_loop(meter: EnergyMeter, run_loop: Callable[[float], int], loop_s: float = LOOP_S, idle_s: float = IDLE_S,
               sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.perf_counter) -> EnergyFigure | None:
    """Idle power over `idle_s` (once a minute per meter), then `run_loop(loop_s)` (back-to-back calls for at least
    that long; returns how many). None without a meter or a reading."""
    if not meter.available:
        return None
    if meter.idle is None or clock() - meter.idle[1] > IDLE_MAX_AGE_S:
        e0, t0 = meter.read_j(), clock()
        sleep(idle_s)
        e1, t1 = meter.read_j(), clock()
        if e0 is None or e1 is None or t1 <= t0:
            return None
        meter.idle = (max(e1 - e0, 0.0) / (t1 - t0), t1)
    idle_w = meter.idle[0]
    e1, t1 = meter.read_j(), clock()
    calls = run_loop(loop_s)
    e2, t2 = meter.read_j(), clock()
    if e1 is None or e2 is None or calls <= 0 or t2 <= t1:
        return None
    above_idle_j = max((e2 - e1) - idle_w * (t2 - t1), 0.0)
    return EnergyFigure(energy_j=above_idle_j / calls, power_w=max(e2 - e1, 0.0) / (t2 - t1), idle_w=idle_w,
                        calls=calls, loop_s=t2 - t1)
