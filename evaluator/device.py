"""What the measurements ran on (the energy counter is in energy.py)."""

from __future__ import annotations

import importlib.metadata
import platform
import sys

import torch

from evaluator.result import DeviceInfo


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {requested!r}; use cpu, cuda or auto")
    return requested


def device_info(kind: str) -> DeviceInfo:
    triton_version = _triton_version()
    if kind == "cuda":
        return DeviceInfo(kind="cuda", name=torch.cuda.get_device_name(0), interpreted=False, driver=_driver_version(),
                          torch_version=torch.__version__, triton_version=triton_version,
                          cuda_version=torch.version.cuda)
    cpu = platform.processor() or platform.machine() or "cpu"
    return DeviceInfo(kind="cpu", name=f"CPU {cpu}", interpreted=True, torch_version=torch.__version__,
                      triton_version=triton_version)


def _triton_version() -> str | None:
    """Triton's version, read from its installed metadata where this process has not imported it: the driver never
    runs Triton, and importing it costs a cold evaluation half a second of CPU beside the starting zygotes."""
    module = sys.modules.get("triton")
    if module is not None:
        return getattr(module, "__version__", None)
    for distribution in ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    try:
        import triton
    except ImportError:
        return None
    return getattr(triton, "__version__", None)


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
