"""What the measurements ran on (the energy counter is in energy.py)."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

import torch

from evaluator.device.rules import KINDS, rules
from evaluator.worker import memory_conditions
from evaluator.result import DeviceInfo

CPUINFO = Path("/proc/cpuinfo")


def resolve_device(requested: str) -> str:
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in KINDS:
        raise ValueError(f"unknown device {requested!r}; use cpu, cuda or auto")
    return requested


def device_info(kind: str) -> DeviceInfo:
    triton_version = _triton_version()
    if rules(kind).cuda_runtime:  # the GPU as CUDA names it
        return DeviceInfo(kind="cuda", name=torch.cuda.get_device_name(0), interpreted=False, driver=_driver_version(),
                          torch_version=torch.__version__, triton_version=triton_version,
                          cuda_version=torch.version.cuda)
    return DeviceInfo(kind="cpu", name=cpu_name(), interpreted=True, torch_version=torch.__version__,
                      triton_version=triton_version, memory=memory_conditions.expected().text)


def cpu_name(cpuinfo: Path = CPUINFO) -> str:
    """This CPU as verdicts, peaks, leaderboards and exported packages' dispatch name it: "CPU " and its model, as a
    GPU is named by its model (e.g. "CPU AMD EPYC 9R14 96-Core Processor"). Until 2026-11-24 every x86 machine was
    "CPU x86_64", so the verdicts and measured peaks of a virtual machine on an AMD EPYC (32 MiB L3) and of one on an
    Intel Xeon (260 MiB L3) were compared as if one device, and a package exported on one dispatched its kernels, built
    for that CPU's instruction set, on the other. Falls back to the architecture where the model is not known."""
    return f"CPU {_model_name(cpuinfo) or platform.processor() or platform.machine() or 'cpu'}"


def _model_name(cpuinfo: Path) -> str | None:
    """The first "model name" (x86) or "Model" (some ARM kernels) line of /proc/cpuinfo, spaces collapsed."""
    try:
        lines = cpuinfo.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for key in ("model name", "Model"):
        for line in lines:
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return " ".join(value.split())[:160]
    return None


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
    from evaluator.device.nvml import load_nvml
    nvml = load_nvml()
    if nvml is None:
        return None
    try:
        v = nvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None
