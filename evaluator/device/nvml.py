"""NVML (pynvml) opened once it is asked for: the energy meter, the device's description and the launcher's GPU device
nodes use it; None where it is not installed or finds no driver."""

from __future__ import annotations

from typing import Any


def load_nvml() -> Any | None:
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None
