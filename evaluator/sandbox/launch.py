"""Starting isolated worker processes: a zygote (optionally inside bubblewrap) that forks one worker per evaluation.

Isolation for untrusted code, in layers:
- bubblewrap when available: read-only root, private /tmp, home directories hidden (only the Python installation and
  the project are bound back, read-only), no network, its own PID namespace, dies with the driver;
- always: an environment built from an allow-list (no API keys or other secrets of the driver), a new session per
  worker so the whole process group is killed on timeout, a private temporary working directory that also holds the
  Triton and torch-extension caches, and resource limits (address space on CPU, CPU time, no core files).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluator.sandbox.bwrap import bwrap_available, bwrap_prefix
from evaluator.worker.zygote import LAZY_FLUSH, NO_DYNAMO
from evaluator.sandbox.zygote_env import zygote_environment

if TYPE_CHECKING:
    from evaluator.sandbox.forked_zygote import ForkedProcess
    from evaluator.wire.output_slot import DriverSlot

LOG_LIMIT_BYTES = 64 * 1024


class SandboxError(Exception):
    """The zygote could not be started or stopped answering."""


# Set to "1" (by `opforge worker` unless told otherwise, or by the user): "auto" isolation refuses to run candidates
# without bubblewrap instead of falling back to the process sandbox.
REQUIRE_ENV = "OPFORGE_REQUIRE_SANDBOX"
WITHOUT_BWRAP = ("bubblewrap (bwrap) is not installed or cannot make namespaces here, so candidates run in the process "
                 "sandbox, where Landlock, a syscall filter and namespaces keep them from files, sockets and IPC but "
                 "they still see this machine's other processes in /proc (install bubblewrap, e.g. `apt-get install "
                 "bubblewrap`, for the strongest sandbox)")
_warned = False


def resolve_isolation(isolation: str, role: str, environ: dict[str, str] | None = None) -> str:
    """"auto" made concrete for a zygote of `role`: bubblewrap for candidates where it works, else the process
    sandbox, said once per process (or refused where $OPFORGE_REQUIRE_SANDBOX is 1)."""
    global _warned
    if isolation != "auto":
        return isolation
    if role != "candidate":
        return "process"
    if bwrap_available():
        return "bwrap"
    if (os.environ if environ is None else environ).get(REQUIRE_ENV) == "1":
        raise SandboxError(f"{WITHOUT_BWRAP[0].upper()}{WITHOUT_BWRAP[1:]}; this machine requires it "
                           f"(${REQUIRE_ENV}=1, the default of `opforge worker`) and refuses to evaluate.")
    if not _warned:
        _warned = True
        logging.getLogger("opforge.sandbox").warning("opforge: %s.", WITHOUT_BWRAP)
    return "process"


@dataclass
class WorkerHandle:
    sock: socket.socket
    pid: int
    log: bytearray
    _reader: threading.Thread
    outputs: DriverSlot  # the shared file its timed calls' outputs are copied into (`output_slot.py`)

    def log_text(self) -> str:
        """What the worker printed; complete once the worker is gone (read it after killing)."""
        self._reader.join(timeout=0.5)
        return self.log.decode("utf-8", "replace")


class Zygote:
    """One warm parent process; `spawn` forks a fresh isolated worker from it."""

    def __init__(self, device: str, role: str, isolation: str = "auto", hidden: tuple[str, ...] = (),
                 flush_ahead: bool = True, fork: bool = False, dynamo: bool = True):
        """`fork`: started as a fork of this process where that is the same zygote (`forked_zygote.refusal`), else
        as a fresh interpreter. `dynamo`: a candidate's zygote imports `torch._dynamo` before any fork; without it,
        its workers refuse that import and fail as `needs_dynamo` (`dynamo_absent.py`)."""
        self.device, self.role = device, role
        self.fork = fork
        self.dynamo = dynamo or role != "candidate"
        self.hidden = hidden  # folders replaced by an empty tmpfs inside bubblewrap
        self.flush_ahead = flush_ahead  # the CPU eviction buffer written before the first fork (zygote.py)
        isolation = resolve_isolation(isolation, role)
        if isolation == "bwrap" and not bwrap_available():
            raise SandboxError("bubblewrap (bwrap) was asked for but does not work here; install it or use --sandbox process")
        self.isolation = isolation
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self._control: socket.socket | None = None
        self._reader: Any = None  # the control socket's reader, once started
        self._starting = False  # launched, its "ready" line not read yet
        self.timer_object: int | None = None  # the address of the workers' timer builtin, from the "ready" line
        self.timer_reference: int | None = None  # where the harness holds its reference to it, from the same line

    def _start(self) -> None:
        if self.role == "candidate":
            # Candidate workers lose every capability; an undumpable driver then keeps its environment (API keys)
            # out of their reach through /proc even without bubblewrap's PID namespace.
            from evaluator.sandbox.process_tree import set_undumpable
            set_undumpable()
        ours, theirs = socket.socketpair()
        fork, self.fork = self.fork, False  # once: a later restart may find this process's OpenMP pool started
        if fork:
            from evaluator.sandbox import forked_zygote
            if forked_zygote.refusal(self.role, self.device) is None:
                self._proc = forked_zygote.fork_zygote(theirs.fileno(), self.device, self.role, self.flush_ahead)
                theirs.close()
                self._control, self._reader, self._starting = ours, ours.makefile("rb"), True
                return
        cmd = [sys.executable, "-m", "evaluator.worker.zygote", str(theirs.fileno()), self.device, self.role,
               *(() if self.flush_ahead else (LAZY_FLUSH,)), *(() if self.dynamo else (NO_DYNAMO,))]
        if self.isolation == "bwrap":
            cmd = bwrap_prefix(self.device, self.hidden) + cmd
        env = zygote_environment(self.role, self.device, dict(os.environ))
        # The candidate's zygote is a session of its own (untrusted code; bubblewrap's --new-session too); the
        # reference's only a process group of its own, in the driver's session: the scheduler shares a busy CPU
        # between sessions first (autogroups), so while three processes import torch on a cold start the
        # candidate's zygote, the last to be ready (dynamo as well), gets a core's share and not two thirds of one.
        # Workers are sessions of their own either way (zygote._child), so timing is unchanged.
        untrusted = self.role == "candidate"
        self._proc = subprocess.Popen(cmd, pass_fds=[theirs.fileno()], env=env, cwd="/tmp",
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      start_new_session=untrusted, process_group=None if untrusted else 0)
        theirs.close()
        self._control = ours
        self._reader = ours.makefile("rb")
        self._starting = True

    def _await_ready(self) -> None:
        if not self._starting:
            return
        self._starting = False
        line = self._readline(timeout_s=120)
        if line.get("ready") is not True:
            raise SandboxError("the evaluation zygote did not start")
        # Where the workers' timer builtin and the harness's reference to it lie (the zygote's word: it runs no
        # candidate code), for the driver's comparison of a worker's timer path with the zygote's (`verify/timer_path.py`).
        self.timer_object, self.timer_reference = (_address(line.get(k)) for k in ("timer", "timer_reference"))

    def _readline(self, timeout_s: float) -> dict:
        assert self._control is not None and self._reader is not None
        self._control.settimeout(timeout_s)
        try:
            raw = self._reader.readline()
        except (TimeoutError, OSError):
            raw = b""
        if not raw:
            err = b""
            if self._proc and self._proc.poll() is not None and self._proc.stderr:
                err = self._proc.stderr.read()[-2000:]
            self._stop()
            raise SandboxError(f"the evaluation zygote stopped answering {err.decode(errors='replace')}".strip())
        try:
            line = json.loads(raw)
        except ValueError:
            line = None
        if not isinstance(line, dict):
            raise SandboxError(f"the evaluation zygote answered something that is not a JSON object: {raw[:80]!r}")
        return line

    def launch(self) -> None:
        """Start the zygote's process if it is not running, without waiting for it to be ready (it imports torch
        and Triton: seconds), so that two zygotes start side by side. Call it from a thread that lives as long as
        the zygote should: bubblewrap's --die-with-parent follows the thread that started it."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    def spawn(self, nonce: str, memory_limit_bytes: int = 0, cpu_limit_s: int = 0,
              gpu_memory_fraction: float = 0.0, inputs_fd: int | None = None) -> WorkerHandle:
        """A fresh worker; `inputs_fd`: its descriptor of the evaluation's shared input file (`input_file.py`), sent
        with its channel (the caller keeps and closes its own)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            self._await_ready()
            ours, theirs = socket.socketpair()
            log_r, log_w = os.pipe()
            from evaluator.wire.output_slot import DriverSlot  # torch: not imported by this module (forked_zygote.py)
            outputs = DriverSlot()
            request = {"nonce": nonce, "device": self.device, "memory_limit_bytes": memory_limit_bytes,
                       "cpu_limit_s": cpu_limit_s, "gpu_memory_fraction": gpu_memory_fraction}
            try:
                assert self._control is not None
                fds = [theirs.fileno(), log_w, outputs.fd, *(() if inputs_fd is None else (inputs_fd,))]
                socket.send_fds(self._control, [json.dumps(request).encode()], fds)
                reply = self._readline(timeout_s=30)
            except BaseException:
                outputs.close()
                raise
            finally:
                theirs.close()
                os.close(log_w)
        pid = reply.get("pid")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
            ours.close()
            os.close(log_r)
            outputs.close()
            raise SandboxError(f"the evaluation zygote answered a request for a worker with {str(reply)[:80]}")
        log = bytearray()
        reader = threading.Thread(target=_drain, args=(log_r, log), daemon=True)
        reader.start()
        return WorkerHandle(sock=ours, pid=pid, log=log, _reader=reader, outputs=outputs)

    @property
    def host_pid(self) -> int | None:
        """The zygote's process (bubblewrap's, inside it) as this process sees it; None before it started."""
        return self._proc.pid if self._proc is not None else None

    def kill(self, handle: WorkerHandle) -> None:
        try:
            handle.sock.close()
        except OSError:
            pass
        handle.outputs.close()
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                return
            try:
                self._control.sendall(json.dumps({"kill": handle.pid}).encode())  # type: ignore[union-attr]
                self._readline(timeout_s=10)
            except (SandboxError, OSError):
                self._stop()

    def _stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        for closable in (self._reader, self._control):
            try:
                if closable is not None:
                    closable.close()
            except OSError:
                pass
        self._proc = self._control = self._reader = None
        self._starting = False

    def close(self) -> None:
        with self._lock:
            self._stop()


def _address(value: object) -> int | None:
    """An address from a zygote's `ready` line: a positive int, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _drain(fd: int, buf: bytearray) -> None:
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            chunk = f.read(65536)
            if not chunk:
                return
            if len(buf) < LOG_LIMIT_BYTES:
                buf += chunk[: LOG_LIMIT_BYTES - len(buf)]
