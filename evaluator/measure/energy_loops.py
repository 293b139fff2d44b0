"""Both sides' energy loops in an evaluation: the meter of the device's kind (NVML's on a GPU, `energy.py`; RAPL's on a
CPU, `cpu_energy.py`), one per process, and each worker's `loop` command metered by `energy.meter_loop`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaluator.device.rules import rules
from evaluator.wire.commands import Loop
from evaluator.measure.cpu_energy import RaplMeter
from evaluator.measure.energy import LOOP_S, EnergyFigure, EnergyMeter, meter_loop
from evaluator.measure.blocks import fresh_seed
from evaluator.wire.replies import Looped


def energy_of_both(reference: Any, candidate: Any, cfg: Any, kind: str,
                   meter: EnergyMeter | None = None) -> tuple[EnergyFigure | None, EnergyFigure | None]:
    """(candidate, reference) figures, each side's loop run by its worker (`loop` command); the driver holds the
    device's timed phase around this (device_lock.py)."""
    loop_s = float(getattr(cfg, "energy_loop_s", LOOP_S))
    meter = meter if meter is not None else _meter(kind) if loop_s > 0 else None
    if meter is None or not meter.available:
        return None, None

    def runner(conn: Any) -> Callable[[float], int]:
        def run(seconds: float) -> int:
            reply, _ = conn.request_as(Loop(variant=0, seed=fresh_seed(), seconds=seconds), Looped,
                                       cfg.run_timeout_s, "the energy loop")
            return int(reply.calls)
        return run
    return meter_loop(meter, runner(candidate), loop_s), meter_loop(meter, runner(reference), loop_s)


_meters: dict[str, EnergyMeter] = {}


def _meter(kind: str) -> EnergyMeter:
    """One meter per device kind in this process (NVML opened once; the idle figure shared for a minute); on a CPU,
    RAPL's counters where the machine exposes them (`cpu_energy.py`)."""
    if kind not in _meters:
        if rules(kind).energy_meter == "rapl":
            _meters[kind] = RaplMeter()
        else:
            _meters[kind] = EnergyMeter.for_device(kind)
    return _meters[kind]
