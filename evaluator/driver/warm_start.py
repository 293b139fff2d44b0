"""An evaluator's warm zygotes, and starting them before the driver has imported torch.

A cold evaluation's longest wait is the two zygotes' start: each imports torch (and Triton, and for the candidate
dynamo), seconds of work before the first worker can fork. Nothing in this module imports torch, so a command line
can launch both zygotes as its first act and let its own imports, the task file's parsing and the candidate's
static check run while they start (`opforge eval` does). The evaluator later adopts them (`LocalEvaluator(zygotes=)`)
with nothing weakened: the same constructor arguments as ever, the candidate's sandbox hiding the same build caches.

Which device `auto` means is torch's answer (`info.resolve_device`); before torch is imported, `likely_device`
guesses it from the device nodes. A wrong guess costs only the CPU of two zygotes started for nothing: the evaluator
starts the right ones when it needs them, and closing the evaluator stops every zygote it holds.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from evaluator.build.cache import BuildCache
from evaluator.build.native_build import cache_root as native_cache_root
from evaluator.build.native_build import open_cache as open_native_cache
from evaluator.device.rules import KINDS
from evaluator.sandbox.launch import SandboxError, Zygote

ROLES = ("candidate", "reference")  # the candidate's first: the one whose start an evaluation waits on longest
# What a native candidate's source shows where it may reach torch._dynamo (directly or through a library that imports
# it lazily): Triton, PyTorch's extensions and custom operators, compilation and tracing.
_DYNAMO_WORDS = ("triton", "cpp_extension", "load_inline", "torch.compile", "torch.library", "custom_op", "torch.jit",
                 "torch.func", "functorch", "vmap", "_dynamo", "_inductor", "torch.export", "torch.fx", "checkpoint",
                 "torch.profiler", "torch.utils")


def may_need_dynamo(source: str) -> bool:
    """Whether a candidate may need `torch._dynamo` in its worker: all but the native ones (`load_c`) that name none
    of `_DYNAMO_WORDS`. A guess that saves a cold evaluation of a native kernel the 0.8 s of dynamo's import in the
    candidate's zygote; a wrong one costs a second evaluation, in a zygote with dynamo (the status `needs_dynamo`,
    `dynamo_absent.py`), never a verdict."""
    return "load_c" not in source or any(word in source for word in _DYNAMO_WORDS)


def hidden_caches(cache: BuildCache | None) -> tuple[str, ...]:
    """The build caches a candidate sandbox must not see, even read-only."""
    native = open_native_cache()  # created now: bubblewrap hides only folders that exist
    return (*((str(cache.root),) if cache is not None else ()), str(native.root if native else native_cache_root()))


def likely_device(requested: str, environ: dict[str, str] | None = None, dev: Path = Path("/dev")) -> str | None:
    """The device `resolve_device(requested)` will most likely answer, without importing torch: `auto` is the CPU
    where no GPU driver's device node exists (or CUDA_VISIBLE_DEVICES hides every GPU), CUDA where NVIDIA's (or
    ROCm's, which PyTorch also calls cuda) does. None for a request `resolve_device` would refuse."""
    if requested in KINDS:  # resolved already
        return requested
    if requested != "auto":
        return None
    env = os.environ if environ is None else environ
    if env.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1"):
        return "cpu"
    return "cuda" if (dev / "nvidiactl").exists() or (dev / "kfd").exists() else "cpu"


class WarmZygotes:
    """One reference and one candidate zygote per device, started on first use and kept until `close`."""

    def __init__(self, hidden: tuple[str, ...], flush_ahead: bool = True, fork_reference: bool = False,
                 dynamo: bool = True):
        self.hidden = hidden  # folders replaced by an empty tmpfs in the candidate's sandbox
        # False for one evaluation of a candidate that needs no dynamo (`may_need_dynamo`): its zygote skips it.
        self.dynamo = dynamo
        # False for one evaluation: its zygotes fork once, and the CPU eviction buffer is written by a worker that
        # needs it rather than by both zygotes on the cold start's critical path (zygote.py).
        self.flush_ahead = flush_ahead
        # True for a driver that imports torch itself: the reference's zygote launched after that import is a fork of
        # it where that is the same process (`forked_zygote.py`), not a second import of torch beside the candidate's.
        self.fork_reference = fork_reference
        self._zygotes: dict[tuple[str, str, str], Zygote] = {}  # (device, role, isolation asked)
        self._lock = threading.Lock()

    @classmethod
    def for_cache(cls, cache: BuildCache | None, flush_ahead: bool = True,
                  fork_reference: bool = False, dynamo: bool = True) -> WarmZygotes:
        return cls(hidden_caches(cache), flush_ahead, fork_reference, dynamo)

    def get(self, device: str, role: str, isolation: str) -> Zygote:
        """The zygote of this device and role; `isolation` (auto, bwrap, process) applies to the candidate's only:
        the reference runs trusted code alone. A candidate's zygote per isolation asked: keyed by device and role
        alone, an evaluation asking for the process sandbox got bubblewrap's zygote of an earlier evaluation (and
        one asking for bubblewrap would have got the process sandbox's)."""
        isolation = isolation if role == "candidate" else "process"
        with self._lock:
            key = (device, role, isolation)
            if key not in self._zygotes:
                hidden = self.hidden if role == "candidate" else ()
                fork = self.fork_reference and role == "reference"
                self._zygotes[key] = Zygote(device, role, isolation, hidden, self.flush_ahead, fork, self.dynamo)
            return self._zygotes[key]

    def warm(self, device: str, sandbox: str = "auto", roles: tuple[str, ...] = ROLES) -> None:
        """Launch the reference and candidate zygotes side by side rather than one after the other (a cold
        evaluation's largest cost); the first spawn of each waits for it to be ready. A zygote that fails to start
        here is started again, and its error reported, by the first evaluation that needs it. Call it from a thread
        that lives as long as the zygotes should (bubblewrap's --die-with-parent follows the starting thread)."""
        for role in roles:
            try:
                self.get(device, role, sandbox).launch()
            except (SandboxError, OSError):
                pass  # spawn starts it again and says why

    def close(self) -> None:
        with self._lock:
            for zygote in self._zygotes.values():
                zygote.close()
            self._zygotes.clear()
