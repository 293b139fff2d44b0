"""The build stage: CUDA sources recorded in the sandbox, built by the trusted builder, cached by digest.

Protocol (driver = the trusted process holding a worker's channel: `LocalEvaluator`, or a Ray CPU task):

1. the driver sends the candidate worker `load` with `"builds": true`; the worker imports the candidate with the
   load_inline hook armed (`build_redirect.py`);
2. each `load_inline` call with CUDA sources is turned into a `BuildSpec` in the worker and sent to the driver as
   `{"status": "build", "spec": ...}` (`replies.BuildRequest`); the worker waits;
3. the driver (`BuildServer.answer`) validates the spec, looks its key up in the cache or has the sandboxed builder
   compile it (`BuildCache.get_or_build`), and replies `Built(verdict, log, ...)` (`commands.py`), with the `.so`
   bytes for a linked build: the worker loads that copy (GPU), or raises the cached verdict (no GPU: compile_error
   with the log, or "compiled, but no CUDA device here"); `skipped` sends the worker back to its private build;
4. with `"collect": true` (`prebuild`, run where no GPU is held: a Ray CPU task) the worker gets a stub instead and
   the import goes on, so every load_inline call of the candidate is built and cached before an evaluation starts.

`load_c` (native C/C++ kernels, `native.py`) goes the same way with `"kind": "native"` in step 2: the driver's
`NativeServer` (`native_stage.py`) builds it into the native build cache and replies with the library's bytes. A
CPU-only `load_inline` call goes with `"kind": "cpu_extension"` (`cpu_extension.py`): built into this cache (mode
`cpu`, `cpu_extension_build.py`) whether or not there is a GPU, the `.so` bytes sent back, never a private build.

Untrusted Python never writes the cache: it sends only a spec (validated, size-limited, flags from an allow-list),
and the builder runs no Python of the candidate's, only the compilers.
"""

from __future__ import annotations

import atexit
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from evaluator.build import cpu_extension
from evaluator.build import cpu_extension_build
from evaluator.build import native_symbols
from evaluator.verify import policy
from evaluator.build.cache import BuildCache, Verdict, build_uncached, toolchain
from evaluator.wire.build_verdict import BuildKind, BuildVerdict
from evaluator.candidate import Candidate
from evaluator.wire.commands import Built, Load
from evaluator.config import EvalConfig
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.build.cuda import BuildSpec
from evaluator.build.native_stage import NativeServer, mentions_load_c
from evaluator.device.rules import rules
from evaluator.result import Status
from evaluator.sandbox.launch import Zygote
from evaluator.driver.warm_start import hidden_caches
from evaluator.wire.replies import BuildRequest, Ready, Reply, status_of
from evaluator.task import Task, TaskError

MAX_BUILDS_PER_LOAD = 8
MAX_COLLECT_VARIANTS = 256  # shape variants a task may have for the ahead-of-time build


def needs_build(source: str) -> bool:
    """A cheap textual check: does the candidate build a C++/CUDA extension or a native library at all?"""
    return "load_inline" in source or "cpp_extension" in source or mentions_load_c(source)


def build_mode(device_kind: str) -> str:
    """check: compile only (no GPU, or a CPU build of torch); link: a loadable extension for a CUDA device."""
    return rules(device_kind).extension_build


class BuildServer:
    """The driver's answers to one worker's build requests during one load."""

    def __init__(self, cache: BuildCache | None, mode: str, isolation: str, context: str, collecting: bool = False,
                 archs: str | None = None):
        self.cache, self.mode, self.isolation, self.context = cache, mode, isolation, context
        self.collecting, self.archs = collecting, archs
        self.verdicts: list[Verdict] = []
        self.cpu_verdicts: list[Verdict] = []  # CPU load_inline extensions (kind cpu_extension)
        self._below_torch: str | None = None
        self.native = NativeServer(isolation, context, collecting)  # load_c's builds (native_stage.py)
        self._requests = 0

    @property
    def below_torch(self) -> str | None:
        """Why a library built for the worker was refused for calling PyTorch below its dispatcher, or None
        (`native_symbols.py`): the driver's verdict, whatever the worker then makes of the refusal."""
        return self.native.below_torch or self._below_torch

    def answer(self, raw_spec: Any, timeout_s: float, kind: Any = None) -> tuple[Built, list[torch.Tensor]]:
        self._requests += 1
        skipped: tuple[Built, list[torch.Tensor]] = (Built(BuildVerdict.SKIPPED), [])
        if self._requests > MAX_BUILDS_PER_LOAD:  # refused, not skipped: no private build behind the builder's back
            return Built(BuildVerdict.REFUSED, f"a candidate may build at most {MAX_BUILDS_PER_LOAD} extensions or "
                                               "native libraries"), []
        if kind == BuildKind.NATIVE:
            return self.native.answer(raw_spec, timeout_s)
        if kind == BuildKind.CPU_EXTENSION:
            return self._answer_cpu(raw_spec, timeout_s)
        try:
            spec = BuildSpec.from_json(raw_spec)
        except ValueError as exc:
            return Built(BuildVerdict.REFUSED, f"load_inline cannot build this: {exc}"), []
        if self.cache is None:
            return skipped
        if self.mode == "link" and not self.collecting and not _device_covered(self.archs):
            return skipped  # the targets do not include this GPU: torch's own build picks its architecture
        tc = toolchain(self.mode, self.archs)
        if tc is None:
            return skipped
        verdict = self.cache.get_or_build(spec, tc, isolation=self.isolation, timeout_s=timeout_s,
                                          context=self.context)
        self.verdicts.append(verdict)
        header = Built(verdict.status, verdict.log, verdict.key, verdict.cached)
        blobs: list[torch.Tensor] = []
        if verdict.status == BuildVerdict.LINKED and not self.collecting and verdict.artifact is not None:
            blobs = [torch.frombuffer(bytearray(verdict.artifact.read_bytes()), dtype=torch.uint8)]
        return header, blobs

    def _answer_cpu(self, raw_spec: Any, timeout_s: float) -> tuple[Built, list[torch.Tensor]]:
        """A CPU load_inline extension: built once per digest by the sandboxed builder (`cpu_extension_build.py`),
        cached where the cache is on, and never sent back to a private build."""
        try:
            spec = cpu_extension.CpuExtensionSpec.from_json(raw_spec)
        except ValueError as exc:
            return Built(BuildVerdict.REFUSED, f"load_inline cannot build this: {exc}"), []
        tc = cpu_extension_build.toolchain()
        if tc is None:
            return Built(BuildVerdict.REFUSED, f"load_inline({spec.name!r}) cannot be built here: no C++ compiler "
                                               "(g++ or c++) was found"), []
        if self.cache is not None:
            verdict = self.cache.get_or_build(spec, tc, isolation=self.isolation, timeout_s=timeout_s,
                                              context=self.context)
            data = verdict.artifact.read_bytes() if verdict.artifact is not None and not self.collecting else b""
        else:
            verdict, data = build_uncached(spec, tc, isolation=self.isolation, timeout_s=timeout_s)
        self.cpu_verdicts.append(verdict)
        if verdict.status == BuildVerdict.UNAVAILABLE:
            return Built(BuildVerdict.REFUSED, f"load_inline({spec.name!r}) cannot be built here: {verdict.log}"), []
        header = Built(verdict.status, verdict.log, verdict.key, verdict.cached)
        if verdict.status != BuildVerdict.LINKED or self.collecting or not data:
            return header, []
        below = native_symbols.extension_refusal(data, spec.name)  # on the bytes the worker would load
        if below is not None:
            self._below_torch = below
            return Built(BuildVerdict.REFUSED, below), []
        return header, [torch.frombuffer(bytearray(data), dtype=torch.uint8)]


def _device_covered(archs: str | None) -> bool:
    """Whether this process's GPU is among the build's targets (GPU path: verified only on CPU machines so far)."""
    from evaluator.build.cuda import default_archs
    major, minor = torch.cuda.get_device_capability()
    targets = [a.strip() for a in (archs or default_archs()).replace(",", ";").replace(" ", ";").split(";") if a]
    if f"{major}.{minor}" in [t.removesuffix("+PTX") for t in targets]:
        return True
    return any(t.endswith("+PTX") and float(t.removesuffix("+PTX")) <= major + minor / 10 for t in targets
               if t.removesuffix("+PTX").replace(".", "").isdigit())


def load_candidate(conn: WorkerConnection, load: Load, timeout_s: float, doing: str,
                   server: BuildServer, asked: bool = False,
                   first_reply: Callable[[Reply], None] | None = None) -> Ready:
    """Sends `load` (unless `asked` already: `ask_load`) and answers the worker's build requests until its final
    reply; one deadline for all of it. `first_reply`: called with the worker's first answer (a build request, or its
    final reply) once it has come, while the worker waits: none of the candidate's native code is loaded yet."""
    deadline = time.monotonic() + timeout_s
    if not asked:
        ask_load(conn, load, server)
    reply, _ = conn.recv(timeout_s, doing)
    if first_reply is not None:
        first_reply(reply)
    while isinstance(reply, BuildRequest):
        built, blobs = server.answer(reply.spec, max(deadline - time.monotonic(), 0.0), reply.kind)
        if server.below_torch is not None:
            raise Refused(Status.REJECTED, server.below_torch)
        if built.verdict == BuildVerdict.TIMEOUT:
            what = {BuildKind.NATIVE: "native build", BuildKind.CPU_EXTENSION: "C++ extension build"}.get(
                reply.kind, "CUDA build")
            raise Refused(Status.TIMEOUT, f"the candidate's {what} did not finish within {timeout_s:g} s "
                                          f"({built.log or 'compiler timeout'})")
        try:
            conn.channel.send(built.to_wire(), blobs)
        except OSError:
            raise Refused(Status.CRASHED, "the candidate process died while its sources were built") from None
        reply, _ = conn.recv(max(deadline - time.monotonic(), 0.001), doing)
    if not isinstance(reply, Ready):
        raise Refused(Status.REJECTED, f"the candidate process answered {status_of(reply)!r} where it was to say "
                                       f"that it was ready ({doing})")
    return reply


def ask_load(conn: WorkerConnection, load: Load, server: BuildServer) -> None:
    """Send `load`, its builds to be asked of `server`; `load_candidate(..., asked=True)` reads the reply."""
    conn.ask(replace(load, builds=True, build_mode=server.mode))


_collectors: dict[tuple[str, tuple[str, ...]], Zygote] = {}
_collectors_lock = threading.Lock()


def _collector(isolation: str, hidden: tuple[str, ...]) -> Zygote:
    with _collectors_lock:
        key = (isolation, hidden)
        if key not in _collectors:
            if not _collectors:
                atexit.register(_close_collectors)
            _collectors[key] = Zygote("cpu", "candidate", isolation, hidden=hidden)
        return _collectors[key]


def _close_collectors() -> None:
    with _collectors_lock:
        for zygote in _collectors.values():
            zygote.close()
        _collectors.clear()


def prebuild(task: Task, candidate: Candidate, cfg: EvalConfig, mode: str = "check",
             cache_location: str | None = None, archs: str | None = None) -> list[dict[str, Any]]:
    """Records the candidate's load_inline and load_c calls in a sandboxed CPU worker and builds each into its cache;
    returns one summary per build (key, verdict, whether it was cached already). Never raises for the candidate's
    problems: an evaluation that finds no cached build builds privately (CUDA) or in its own build stage (native)."""
    cache = BuildCache.open(cache_location)
    native = mentions_load_c(candidate.source)
    if (cache is None and not native) or not needs_build(candidate.source):
        return []
    try:
        if policy.check_source(candidate.source, allow_torch=cfg.allow_torch):
            return []  # the evaluation refuses it before any import
    except SyntaxError:
        return []
    server = BuildServer(cache, mode, cfg.sandbox, "prebuild", collecting=True, archs=archs)
    zygote = _collector(cfg.sandbox, hidden_caches(cache))
    nonce = secrets.token_hex(16)
    handle = zygote.spawn(nonce, cfg.memory_limit_bytes, int(cfg.compile_timeout_s) + 60)
    conn = WorkerConnection(zygote, handle, nonce, "candidate", task.label)
    # One init seed per shape variant: the worker builds every variant's reference weights when it loads.
    load = Load(task_source=task.source, task_name=task.name, device="cpu", init_seeds=(0,) * MAX_COLLECT_VARIANTS,
                candidate_source=candidate.source, collect=True)
    try:
        load_candidate(conn, load, cfg.compile_timeout_s, "recording the candidate's CUDA builds", server)
    except (Refused, TaskError):
        pass
    finally:
        conn.close()
    return [{"key": v.key, "verdict": v.status, "cached": v.cached} for v in server.verdicts] + [
        {"key": v.key, "verdict": v.status, "cached": v.cached, "kind": cpu_extension.KIND}
        for v in server.cpu_verdicts] + [
        {"key": o.key, "verdict": o.status, "cached": o.cached, "kind": "native"} for o in server.native.outcomes]
