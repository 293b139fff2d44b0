"""The CUDA build cache: one verdict per (sources, flags, toolchain), built once by a sandboxed trusted builder.

Layout (`root` is `cache_root()`; the entries are kept by `entry_cache.py`, shared with `load_c`'s cache):

    root/v1/entries/<key[:2]>/<key>/record.json   the verdict: compiled | linked | compile_error, the compiler log,
                                                  the toolchain, when and where it was built
    root/v1/entries/<key[:2]>/<key>/<name>.so     the extension, for a linked build (a GPU machine's torch, or a
                                                  CPU-only load_inline call: mode `cpu`, cpu_extension_build.py)
    root/v1/compiles.log                          one JSON line each time a compiler actually ran
    root/v1/locks/<key>.lock                      flock: one build per key at a time, across processes
    root/v1/tmp/                                  staging; an entry appears by an atomic rename

`key` = sha256 of the spec's digest (sources, name, functions, flags) and the toolchain (mode, torch and CUDA versions,
nvcc and host compiler versions, target architectures, Python ABI). Candidate code never sees this directory: the
driver reads it and sends a worker only its own verdict (and the `.so` bytes); in bubblewrap the directory is also
hidden from the candidate sandbox. Misses are built by `builder.py` (compilers only, in a sandbox of their own).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evaluator.build import builder
from evaluator.build import cuda as cuda_build
from evaluator.build.format import BUILD_FORMAT, tool_version
from evaluator.wire.build_verdict import BuildVerdict
from evaluator.build.cpu_extension import CpuExtensionSpec
from evaluator.build.cuda import BuildSpec
from evaluator.build.entry_cache import EntryCache, Fresh

CACHE_ENV = "OPFORGE_CUDA_BUILD_CACHE"
DISABLED = ("off", "none", "0", "false")
STORED = (BuildVerdict.COMPILED, BuildVerdict.LINKED, BuildVerdict.COMPILE_ERROR)
log = logging.getLogger(__name__)
AnySpec = BuildSpec | CpuExtensionSpec  # a CUDA load_inline call, or a CPU one (mode `cpu`: cpu_extension_build.py)


def cache_root(location: str | os.PathLike[str] | None = None) -> Path | None:
    """`location`, else $OPFORGE_CUDA_BUILD_CACHE, else $XDG_CACHE_HOME/opforge/cuda-builds, else
    ~/.cache/opforge/cuda-builds; None where the cache is switched off ("off")."""
    value = str(location) if location is not None else os.environ.get(CACHE_ENV, "")
    if value.strip().lower() in DISABLED:
        return None
    if value.strip():
        return Path(value).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "opforge", "cuda-builds").resolve()


def toolchain(mode: str, archs: str | None = None) -> dict[str, Any] | None:
    """What else decides the build's outcome; None where there is no nvcc. `mode`: check (objects only, a CPU build
    of torch) or link (a loadable .so, a CUDA build of torch)."""
    import torch
    nvcc = cuda_build.nvcc_path(mode)
    if nvcc is None:
        return None
    cxx = cuda_build.cxx_path()
    return {"format": BUILD_FORMAT, "mode": mode, "torch": torch.__version__, "torch_cuda": str(torch.version.cuda),
            "python": sys.implementation.cache_tag, "nvcc": f"{nvcc} {tool_version(nvcc, True)}",
            "cxx": f"{cxx} {tool_version(cxx, False)}", "archs": archs or cuda_build.default_archs(),
            "std": builder.TORCH_CXX_STD}  # the check's standard: verdicts of an older check are not reused


def entry_key(spec: AnySpec, tc: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({"spec": spec.digest, "toolchain": tc}, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of one build request: compiled | linked | compile_error (stored), timeout | unavailable (not)."""

    status: BuildVerdict
    key: str
    log: str = ""
    artifact: Path | None = None
    cached: bool = False  # answered from the cache: no compiler ran for this request


class BuildCache:
    """The CUDA and CPU extension builds' cache: its entries (`entry_cache.py`, shared with `load_c`'s cache) and
    how a miss is built (the sandboxed builder)."""

    def __init__(self, root: Path):
        self.root = root
        self.entries = EntryCache(root, BUILD_FORMAT, STORED, poll_s=0.2)
        os.chmod(root, 0o700)  # unlike load_c's cache, refused (None from `open`) where the folder is not ours

    @classmethod
    def open(cls, location: str | os.PathLike[str] | None = None) -> "BuildCache | None":
        """The cache at `cache_root(location)`; None where it is switched off or cannot be created."""
        root = cache_root(location)
        if root is None:
            return None
        try:
            return cls(root)
        except OSError as exc:
            log.warning("the CUDA build cache %s cannot be used (%s); builds stay private to each evaluation",
                        root, exc)
            return None

    def entry(self, key: str) -> Path:
        return self.entries.entry(key)

    def lookup(self, key: str) -> Verdict | None:
        hit = self.entries.lookup(key)
        return None if hit is None else Verdict(hit.verdict, key, hit.log, hit.artifact, cached=True)

    def record(self, key: str) -> dict[str, Any] | None:
        return self.entries.record(key)

    def compiles(self) -> list[dict[str, Any]]:
        """Every compiler run so far (one dict per run: key, name, verdict, context, pid, started, finished)."""
        return self.entries.compiles()

    def get_or_build(self, spec: AnySpec, tc: dict[str, Any], *, isolation: str, timeout_s: float,
                     context: str) -> Verdict:
        """The cached verdict, or a fresh build by the sandboxed builder (stored unless it timed out)."""
        key = entry_key(spec, tc)

        def build(work: Path, left_s: float) -> Fresh:
            verdict = _build(spec, tc, key, work, isolation, left_s)
            return Fresh(verdict.status, verdict.log, verdict.artifact)

        got = self.entries.get_or_build(key, time.monotonic() + timeout_s, build, name=spec.name, context=context,
                                        fields={"spec_digest": spec.digest, "name": spec.name, "toolchain": tc},
                                        work_prefix="opforge-build-")
        return Verdict(got.verdict, key, got.log, got.artifact, got.cached)


# -- building ----------------------------------------------------------------------------------------------------------
def build_uncached(spec: AnySpec, tc: dict[str, Any], *, isolation: str, timeout_s: float) -> tuple[Verdict, bytes]:
    """One build where the cache is switched off: its verdict and the extension's bytes (linked builds)."""
    with tempfile.TemporaryDirectory(prefix="opforge-build-") as work:
        verdict = _build(spec, tc, entry_key(spec, tc), Path(work), isolation, timeout_s)
        data = verdict.artifact.read_bytes() if verdict.artifact is not None else b""
    return replace(verdict, artifact=None), data


def _build(spec: AnySpec, tc: dict[str, Any], key: str, work: Path, isolation: str, timeout_s: float) -> Verdict:
    if isinstance(spec, CpuExtensionSpec):
        return _build_cpu(spec, key, work, isolation, timeout_s)
    prefix = builder.builder_prefix(work, isolation, tc["mode"])
    if prefix is None:
        return Verdict(BuildVerdict.UNAVAILABLE, key, "the sandboxed CUDA builder does not work here")
    env = builder.builder_env(work, tc["archs"])
    try:
        if tc["mode"] == "link":
            artifact = builder.link(spec, work, sys.executable, timeout_s, prefix, env)
            return Verdict(BuildVerdict.LINKED, key, "", artifact)
        failed = builder.compile_check(spec, work, tc["archs"], timeout_s, prefix, env)
        if failed is not None:
            return Verdict(BuildVerdict.COMPILE_ERROR, key, failed)
        return Verdict(BuildVerdict.COMPILED, key)
    except cuda_build.CompileFailed as exc:
        return Verdict(BuildVerdict.COMPILE_ERROR, key, str(exc))
    except builder.BuildTimeout as exc:
        return Verdict(BuildVerdict.TIMEOUT, key, str(exc))
    except (builder.BuilderFailed, OSError) as exc:
        log.warning("the CUDA builder failed: %s", exc)
        return Verdict(BuildVerdict.UNAVAILABLE, key, str(exc))


def _build_cpu(spec: CpuExtensionSpec, key: str, work: Path, isolation: str, timeout_s: float) -> Verdict:
    from evaluator.build import cpu_extension_build
    prefix = cpu_extension_build.sandbox_prefix(work, isolation)
    if prefix is None:
        return Verdict(BuildVerdict.UNAVAILABLE, key, "the sandboxed C++ builder does not work here")
    try:
        return Verdict(BuildVerdict.LINKED, key, "", cpu_extension_build.build(spec, work, timeout_s, prefix))
    except cuda_build.CompileFailed as exc:
        return Verdict(BuildVerdict.COMPILE_ERROR, key, str(exc))
    except builder.BuildTimeout as exc:
        return Verdict(BuildVerdict.TIMEOUT, key, str(exc))
    except (builder.BuilderFailed, OSError) as exc:
        log.warning("the C++ extension builder failed: %s", exc)
        return Verdict(BuildVerdict.UNAVAILABLE, key, str(exc))
