"""The candidate worker's private CUDA build where no driver answers its `load_inline` call, on a machine without a
GPU: the sources compile-checked by the trusted builder's recipe (`builder.compile_check`: nvcc and the host compiler,
objects only). A compile error is still the most useful feedback a coder can get; a clean compile reports "cannot run
here". The spec both sides share is `build/cuda.py`'s."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from evaluator.build.builder import BuildTimeout, compile_check
from evaluator.build.cuda import COMPILE_TIMEOUT_S, BuildSpec, CompileFailed, NoCudaDevice, default_archs, nvcc_path


def check_compiles(name: str, cpp_sources: Any, cuda_sources: Any, kwargs: dict[str, Any]) -> None:
    """The private fallback on a machine without a GPU: raises CompileFailed or NoCudaDevice, always."""
    spec = BuildSpec.from_call(name, cpp_sources, cuda_sources, kwargs, strict=False)
    if spec is None:
        raise CompileFailed("load_inline was called with sources or functions of the wrong type")
    if nvcc_path("check") is None:
        raise NoCudaDevice("no nvcc and no CUDA device here: CUDA sources can neither be compiled nor run")
    workdir = Path(tempfile.mkdtemp(prefix="cuda-build-"))
    try:
        log = compile_check(spec, workdir, default_archs(), COMPILE_TIMEOUT_S)
    except BuildTimeout as exc:
        raise CompileFailed(str(exc)) from None
    if log is not None:
        raise CompileFailed(log)
    raise NoCudaDevice("the CUDA sources compiled with nvcc, but there is no CUDA device here to run them on")
