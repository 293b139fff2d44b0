"""What the measurements ran on, and the device's energy counter where NVML is present."""

from __future__ import annotations

import platform

import torch

from evaluator.result import DeviceInfo


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {requested!r}; use cpu, cuda or auto")
    return requested


def device_info(kind: str) -> DeviceInfo:
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    if kind == "cuda":
        return DeviceInfo(kind="cuda", name=torch.cuda.get_device_name(0), interpreted=False, driver=_driver_version(),
                          torch_version=torch.__version__, triton_version=triton_version,
                          cuda_version=torch.version.cuda)
    cpu = platform.processor() or platform.machine() or "cpu"
    return DeviceInfo(kind="cpu", name=f"CPU {cpu}", interpreted=True, torch_version=torch.__version__,
                      triton_version=triton_version)


def _driver_version() -> str | None:
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        v = nvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None


def _nvml():  # noqa: ANN202 - the optional pynvml module
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


class EnergyMeter:
    """Reads the GPU's cumulative energy counter (millijoules) through NVML; every reading is None without NVML."""

    def __init__(self, kind: str, index: int = 0):
        self._nvml = _nvml() if kind == "cuda" else None
        self._handle = None
        if self._nvml is not None:
            try:
                self._handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
                self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            except Exception:
                self._handle = None

    def read_j(self) -> float | None:
        if self._handle is None:
            return None
        try:
            return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0
        except Exception:
            return None
