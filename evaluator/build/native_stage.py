"""The build stage's native side: `load_c` specs sent by a candidate worker, built by the trusted builder.

The worker (`native.serve`, armed by `build_redirect.py`) turns a `load_c` call made while the candidate is imported
into `{"status": "build", "kind": "native", "spec": ...}`; the driver (`stage.load_candidate`) hands the spec to
`NativeServer.answer`, which validates it (name, flags from the allow-list, readable prototypes), looks it up in the
native build cache (`native_build.NativeCache`) or has the compiler build it once per digest inside the builder's
bubblewrap view (/usr, the Python installation, the build's own folder: no home, no project, no /tmp), or without
bubblewrap in the build jail that reads as little (`build_jail.py`), and replies
with the verdict and, for a build that worked, the library's bytes. The worker writes them into its private folder
and loads them; it never runs a compiler. While collecting (`stage.prebuild`, Ray's ahead-of-time builds), the
worker gets no bytes and a stub library, so every `load_c` call of the candidate is built before it is evaluated.
"""

from __future__ import annotations

import functools
import logging
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import torch

from evaluator.build import builder
from evaluator.build import native_symbols
from evaluator.wire.build_verdict import BuildVerdict
from evaluator.wire.commands import Built
from evaluator.build.native_build import NativeCache, Outcome, build_once, compiler, entry_key, open_cache
from evaluator.build.native_spec import NativeSpec

log = logging.getLogger(__name__)


builder_env = builder.plain_env


def sandbox_prefix(work: Path, isolation: str) -> list[str] | None:
    """The compiler's sandbox, where it can build a native library here (`builder.sandboxed_prefix`)."""
    return builder.sandboxed_prefix(work, isolation, _sandbox_works)


@functools.lru_cache(maxsize=2)
def _sandbox_works(kind: str) -> bool:
    """Builds a trivial library inside the view once per process, so that a view missing part of the toolchain is
    never mistaken for the candidate's compile error (and cached as one)."""
    exe = compiler("c")
    if exe is None:
        return False
    with tempfile.TemporaryDirectory(prefix="opforge-native-probe-") as d:
        work = Path(d)
        (work / "probe.c").write_text("#include <math.h>\nvoid probe(float* x) { x[0] = sqrtf(x[0]); }\n")
        cmd = [*builder.view_prefix(kind, work), exe, "-O2", "-fopenmp", "-shared", "-fPIC", "-o", "probe.so", "probe.c",
               "-lm"]
        try:
            proc = subprocess.run(cmd, cwd=work, env=builder_env(work), capture_output=True, text=True, timeout=120)
            ok = proc.returncode == 0 and (work / "probe.so").is_file()
            output = proc.stdout + proc.stderr
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, output = False, str(exc)
    if not ok:
        log.warning("the native builder's sandbox does not work here: %s", output[-1000:])
    return ok


class NativeServer:
    """The driver's answers to one worker's `load_c` build requests."""

    def __init__(self, isolation: str, context: str, collecting: bool = False):
        self.isolation, self.context, self.collecting = isolation, context, collecting
        self.outcomes: list[Outcome] = []
        self.below_torch: str | None = None  # why a built library was refused (`native_symbols.refusal`)
        self._cache: NativeCache | None | bool = False  # opened on the first request

    def answer(self, raw_spec: Any, timeout_s: float) -> tuple[Built, list[torch.Tensor]]:
        try:
            spec = NativeSpec.from_json(raw_spec)
        except ValueError as exc:
            return Built(BuildVerdict.REFUSED, str(exc)), []
        if self._cache is False:
            self._cache = open_cache()
        outcome = self._build(spec, timeout_s)
        self.outcomes.append(outcome)
        if outcome.status == BuildVerdict.UNAVAILABLE:
            return Built(BuildVerdict.REFUSED, f"load_c({spec.name!r}) cannot be built here: {outcome.log}"), []
        if outcome.status == BuildVerdict.BUILT:  # on the bytes the worker would load, cached ones too
            foreign = native_symbols.refusal(outcome.library, spec.name)
            if foreign is not None:
                self.below_torch = foreign
                return Built(BuildVerdict.REFUSED, foreign), []
        header = Built(outcome.status, outcome.log, outcome.key, outcome.cached)
        blobs: list[torch.Tensor] = []
        if outcome.status == BuildVerdict.BUILT and not self.collecting:
            blobs = [torch.frombuffer(bytearray(outcome.library), dtype=torch.uint8)]
        return header, blobs

    def _build(self, spec: NativeSpec, timeout_s: float) -> Outcome:
        def prefix_for(work: Path) -> list[str] | None:
            return sandbox_prefix(work, self.isolation)

        if isinstance(self._cache, NativeCache):
            return self._cache.get_or_build(spec, timeout_s=timeout_s, prefix_for=prefix_for, context=self.context,
                                            env_for=builder_env)
        with tempfile.TemporaryDirectory(prefix="opforge-native-build-") as d:
            work = Path(d)
            prefix = prefix_for(work)
            if prefix is None:
                return Outcome(BuildVerdict.UNAVAILABLE, entry_key(spec),
                               "the native builder's sandbox does not work here")
            return build_once(spec, entry_key(spec), work, timeout_s, prefix, builder_env(work))


def mentions_load_c(source: str) -> bool:
    return "load_c" in source and "evaluator.native" in source

