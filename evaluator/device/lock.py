"""One timed phase per device at a time, whatever runs the evaluations (`--runner local` with several workers, Ray
actors on one machine, Nsight Compute): a cross-process lock per device, `flock` on a lock file under the user's
runtime or cache folder.

Held exclusively around what is timed or profiled (interleaved timing, the driver's own clock checks, the
torch.compile baseline, the energy loop, ncu). On a CPU, correctness trials and builds hold it shared: they run beside
each other but never beside a timed phase, which so has the cores to itself as far as other evaluations go (on a GPU
they overlap it: they run on the host or queue behind the timed kernels). A turnstile (a second lock file) keeps a
waiting timed phase ahead of shared work that comes later. An `flock` belongs to an open file description, so two
evaluators in one process exclude each other too, and the kernel releases it when its holder dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from evaluator.device.rules import rules

PhaseObserver = Callable[[str, str, str], None]  # (event "start" | "end", device key, what) -> None


class DeviceBusy(TimeoutError):
    """The device's timed phase stayed held by another evaluation for longer than the wait allowed."""


def lock_dir() -> Path:
    """$OPFORGE_LOCK_DIR, else $XDG_RUNTIME_DIR/opforge-locks, else ~/.cache/opforge/locks."""
    if os.environ.get("OPFORGE_LOCK_DIR"):
        return Path(os.environ["OPFORGE_LOCK_DIR"])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "opforge-locks"
    return Path(os.path.expanduser("~")) / ".cache" / "opforge" / "locks"


def device_key(kind: str, environ: dict[str, str] | None = None) -> str:
    """The physical device the workers of this process time on: 'cpu', or 'cuda-' and the first entry of
    CUDA_VISIBLE_DEVICES (an index or a UUID, as Ray sets it per actor), 'cuda-0' without it."""
    if not rules(kind).lock_per_device:
        return kind
    env = os.environ if environ is None else environ
    first = (env.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
    return "cuda-" + re.sub(r"[^A-Za-z0-9_.-]", "_", first)


class DeviceLock:
    def __init__(self, key: str, directory: Path | None = None, observer: PhaseObserver | None = None):
        self.key = key
        self.path = (directory or lock_dir()) / f"{key}.lock"
        self.observer = observer

    @contextlib.contextmanager
    def held(self, what: str, timeout_s: float = 3600.0) -> Iterator[None]:
        """The device's timed phase, exclusively: no other timed phase, nor (on a CPU) any work held `shared`."""
        with self._locked(fcntl.LOCK_EX, what, timeout_s, "timed phase"):
            if self.observer:
                self.observer("start", self.key, what)
            try:
                yield
            finally:
                if self.observer:
                    self.observer("end", self.key, what)

    @contextlib.contextmanager
    def shared(self, what: str, timeout_s: float = 3600.0) -> Iterator[None]:
        """Work that may run beside other such work but never beside a timed phase (on a CPU: correctness trials and
        builds, which would take the timed phase's cores). A timed phase that is waiting goes first: newcomers queue
        behind it at the turnstile, so a stream of trials cannot starve it."""
        with self._locked(fcntl.LOCK_SH, what, timeout_s, "shared phase"):
            yield

    @contextlib.contextmanager
    def _locked(self, mode: int, what: str, timeout_s: float, label: str) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout_s
        gate = os.open(self.path.with_suffix(".turnstile"), os.O_RDWR | os.O_CREAT, 0o600)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            self._acquire(gate, fcntl.LOCK_EX, deadline, timeout_s)  # in line behind a waiting timed phase
            try:
                if mode == fcntl.LOCK_SH:
                    fcntl.flock(gate, fcntl.LOCK_UN)  # through the turnstile at once: readers never wait in it
                self._acquire(fd, mode, deadline, timeout_s)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)  # a timed phase keeps the turnstile only until it holds the device
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            os.close(gate)

    def _acquire(self, fd: int, mode: int, deadline: float, timeout_s: float) -> None:
        """Take the lock, waiting in the kernel (a helper thread's blocking `flock` on a duplicate of `fd`, the same
        open file description): the waiter wakes as the holder lets go, where polling every 10 ms added up to that
        between one timed phase and the next. A wait past the deadline is abandoned: its helper lets go of the lock
        if it gets it later."""
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waiter = _Waiter(os.dup(fd), mode)
        if not waiter.wait(max(0.0, deadline - time.monotonic())):
            raise DeviceBusy(f"the {self.key} device stayed busy with another evaluation's timed phase "
                             f"for {timeout_s:.0f} s") from None


class _Waiter:
    """One blocking `flock` in a daemon thread; its duplicate descriptor is closed once the lock is taken (the
    original keeps the description, and so the lock, open) or, when the wait was abandoned, after letting go."""

    def __init__(self, fd: int, mode: int) -> None:
        self._fd, self._mode = fd, mode
        self._state = threading.Lock()
        self._taken = threading.Event()
        self._abandoned = False
        threading.Thread(target=self._take, name="opforge-device-lock-wait", daemon=True).start()

    def _take(self) -> None:
        try:
            fcntl.flock(self._fd, self._mode)
            with self._state:
                if self._abandoned:
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                else:
                    self._taken.set()
        finally:
            os.close(self._fd)

    def wait(self, timeout_s: float) -> bool:
        """True once the lock is taken; False (and the wait abandoned) after `timeout_s` or an interruption."""
        try:
            if self._taken.wait(timeout_s):
                return True
        except BaseException:
            self._abandon()
            raise
        return self._abandon()

    def _abandon(self) -> bool:
        with self._state:
            if self._taken.is_set():
                return True
            self._abandoned = True
            return False
