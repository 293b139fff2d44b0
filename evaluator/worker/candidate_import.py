"""Importing the candidate's file in its worker: the one place candidate code first runs.

The worker writes the source into its private working directory and imports it as `CANDIDATE_MODULE` with the
build hook armed (load_inline and load_c calls ask the driver for their build, `build/stage.py`); nothing after the
import may ask for a build. Whatever goes wrong is a reply header for the driver (a compile error, a refusal the
guards recorded while the candidate was imported), never an exception out of here.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from evaluator.worker.guards import Guards

CANDIDATE_MODULE = "opforge_candidate"


@dataclass(frozen=True, slots=True)
class Imported:
    """The candidate's module, or the reply that says why there is none."""

    module: types.ModuleType | None
    failure: dict[str, Any] | None = None


def import_candidate(source: str, guards: Guards, build_client: Callable[..., Any] | None, build_mode: str,
                     collect: bool) -> Imported:
    path = Path(os.getcwd()) / "candidate.py"
    path.write_text(source)
    guards.build_client = build_client
    guards.build_mode = "link" if build_mode == "link" else "check"
    guards.collecting = collect
    try:
        spec = importlib.util.spec_from_file_location(CANDIDATE_MODULE, path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[CANDIDATE_MODULE] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except BaseException as exc:  # noqa: BLE001 - SystemExit from candidate code is a failure too
        return Imported(None, _import_failure(exc, guards))
    finally:
        guards.build_client = None
    return Imported(module)


def model_class(module: types.ModuleType) -> type[torch.nn.Module] | None:
    """The candidate's `ModelNew`, asked for once the guards found nothing tampered with during the import."""
    model_cls = getattr(module, "ModelNew", None)
    return model_cls if isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module) else None


def _import_failure(exc: BaseException, guards: Guards) -> dict[str, Any]:
    from evaluator.build.cpu_extension import CpuBuildFailed
    from evaluator.build.cuda import CompileFailed, NoCudaDevice
    from evaluator.build.native_build import NativeBuildError
    if guards.refusals:
        return {"status": "rejected", "reason": f"{guards.refusals[0]} (while being imported)", "log": tail()}
    if isinstance(exc, CpuBuildFailed):
        return {"status": "compile_error", "reason": exc.reason, "log": str(exc)}
    if isinstance(exc, NoCudaDevice):
        return {"status": "runtime_error", "reason": str(exc)}
    if isinstance(exc, CompileFailed):
        return {"status": "compile_error", "reason": "the CUDA sources do not compile", "log": str(exc)}
    if isinstance(exc, NativeBuildError):
        return {"status": "compile_error", "reason": str(exc).splitlines()[0][:300], "log": str(exc)}
    return {"status": "compile_error", "reason": f"importing the candidate failed: {one_line(exc)}", "log": tail()}


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return f"{type(exc).__name__}: {msg}"[:300] if msg else type(exc).__name__


def tail() -> str:
    return traceback.format_exc()[-4000:]
