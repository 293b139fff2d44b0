"""What the measurements ran on (the energy counter is in energy.py)."""

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
    from evaluator.energy import load_nvml
    nvml = load_nvml()
    if nvml is None:
        return None
    try:
        v = nvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None
