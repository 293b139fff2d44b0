"""Starting isolated worker processes: a zygote (optionally inside bubblewrap) that forks one worker per evaluation.

Isolation for untrusted code, in layers:
- bubblewrap when available: read-only root, private /tmp, home directories hidden (only the Python installation and
  the project are bound back, read-only), no network, its own PID namespace, dies with the driver;
- always: an environment built from an allow-list (no API keys or other secrets of the driver), a new session per
  worker so the whole process group is killed on timeout, a private temporary working directory that also holds the
  Triton and torch-extension caches, and resource limits (address space on CPU, CPU time, no core files).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.zygote import LAZY_FLUSH, NO_DYNAMO

if TYPE_CHECKING:
    from evaluator.forked_zygote import ForkedProcess
    from evaluator.output_slot import DriverSlot

ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
             "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CC", "CXX", "TORCH_CUDA_ARCH_LIST", "TRITON_PTXAS_PATH",
             "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF")
# What decides which device a worker uses and how it runs there: the same value (or absence) on both sides.
SHARED_DEVICE_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "PYTORCH_CUDA_ALLOC_CONF", "NVIDIA_VISIBLE_DEVICES",
                     "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCH_CUDA_ARCH_LIST")
PROJECT_ROOT = Path(__file__).resolve().parent.parent
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


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k in ENV_ALLOW}
    env["PYTHONPATH"] = str(PROJECT_ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    env["HOME"] = "/tmp"
    return env


def openmp_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The OpenMP settings of both zygotes, read by libgomp when torch loads it (one libgomp serves PyTorch and native
    candidates alike). The same thread count for reference and candidate: the caller's OMP_NUM_THREADS, else every CPU
    this process may use. Threads sleep as soon as a parallel region ends: an honest OpenMP kernel's idle pool is never
    mistaken for work running in the background between calls, and spinning threads do not take the cores from the
    next call on a busy machine (measured: a 2-thread GELU took 12 ms a call with a 100000 spin count against 0.18 ms
    passive, on 2 loaded cores)."""
    threads = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    if not threads.isdigit() or int(threads) < 1:
        threads = str(len(os.sched_getaffinity(0)))
    return {"OMP_NUM_THREADS": threads, "OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "0"}


KINETO_QUIET = "6"  # above every level Kineto logs at (its start and stop lines are at the highest, above errors)


def zygote_environment(role: str, device: str, environ: dict[str, str]) -> dict[str, str]:
    """A zygote's environment: the driver's for the reference (it runs trusted code only), the allow-list for the
    candidate; in both, the same device settings (`SHARED_DEVICE_ENV`), so both sides run on the same GPU with the
    same allocator and thread counts."""
    env = scrubbed_environment(environ) if role == "candidate" else {**environ, "PYTHONPATH": str(PROJECT_ROOT)}
    for key in SHARED_DEVICE_ENV:
        if key in environ:
            env[key] = environ[key]
        else:
            env.pop(key, None)
    # Both workers pay the same costs: a coverage tracer (CI's report) in the reference alone would slow its calls
    # and skew every comparison of the two sides' clocks. The candidate's allow-list drops it already.
    env = {k: v for k, v in env.items() if not k.startswith(("COVERAGE_PROCESS_", "COV_CORE_"))}
    if device == "cpu":
        # Must be set before the first import of triton (the evaluator package imports it early): Triton's own
        # library functions are built as interpreted or compiled at import time.
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        # A zygote forks its workers, so it may not touch CUDA's runtime: torch.cuda.is_available() (called by the
        # import of torch.utils.cpp_extension, a warm import) counts devices through the runtime unless told to ask
        # NVML, and torch then refuses CUDA in every forked child ("Cannot re-initialize CUDA in forked
        # subprocess"). Seen on the first GPU run; hardening.assert_fork_safe checks it in each worker.
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    env.update(openmp_environment(environ))
    # PyTorch's profiler (Kineto) logs two lines to stderr each time it starts and stops, at every level up to
    # errors: the watch around every call of the candidate filled the worker's log (the candidate's own output fell
    # out of the tail an evaluation reports) and cost a write to the log pipe a call on both sides.
    env["KINETO_LOG_LEVEL"] = KINETO_QUIET
    return env


@functools.lru_cache(maxsize=1)
def bwrap_available() -> bool:
    exe = shutil.which("bwrap")
    if not exe:
        return False
    try:
        probe = subprocess.run([exe, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev",
                                "--proc", "/proc", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _bwrap_prefix(device: str, hidden_extra: tuple[str, ...] = ()) -> list[str]:
    args = ["bwrap", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc",
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"]
    home = Path(os.path.expanduser("~"))
    hidden = [Path("/tmp")] + [p for p in (home, Path("/home"), Path("/root")) if p.is_dir() and p != Path("/")]
    for h in dict.fromkeys(hidden[1:]):
        args += ["--tmpfs", str(h)]
    # The Python installation, its site-packages and the project are bound back read-only where they live under a
    # hidden folder (a virtualenv in the home directory, a checkout under /tmp, ...).
    needed = {Path(sys.prefix), Path(sys.base_prefix), PROJECT_ROOT, *(Path(p) for p in sys.path[1:] if p)}
    bound: list[Path] = []
    for p in sorted(needed, key=lambda q: len(q.parts)):
        if p.exists() and any(_under(p, h) for h in hidden) and not any(_under(p, b) for b in bound):
            args += ["--ro-bind", str(p), str(p)]
            bound.append(p)
    for extra in map(Path, hidden_extra):  # e.g. the CUDA build cache: candidate code never sees it, even read-only
        if extra.is_dir() and not any(_under(n, extra) for n in needed):
            args += ["--tmpfs", str(extra)]
    if device == "cuda":
        from evaluator.device_nodes import device_nodes, visible_minors
        from evaluator.energy import load_nvml
        for dev in device_nodes(sorted(str(p) for p in Path("/dev").glob("nvidia*")),
                                visible_minors(load_nvml(), os.environ)):
            args += ["--dev-bind", dev, dev]
    return args + ["--"]


def _under(p: Path, root: Path) -> bool:
    try:
        p.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


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

    def _start(self) -> None:
        if self.role == "candidate":
            # Candidate workers lose every capability; an undumpable driver then keeps its environment (API keys)
            # out of their reach through /proc even without bubblewrap's PID namespace.
            from evaluator.process_tree import set_undumpable
            set_undumpable()
        ours, theirs = socket.socketpair()
        fork, self.fork = self.fork, False  # once: a later restart may find this process's OpenMP pool started
        if fork:
            from evaluator import forked_zygote
            if forked_zygote.refusal(self.role, self.device) is None:
                self._proc = forked_zygote.fork_zygote(theirs.fileno(), self.device, self.role, self.flush_ahead)
                theirs.close()
                self._control, self._reader, self._starting = ours, ours.makefile("rb"), True
                return
        cmd = [sys.executable, "-m", "evaluator.zygote", str(theirs.fileno()), self.device, self.role,
               *(() if self.flush_ahead else (LAZY_FLUSH,)), *(() if self.dynamo else (NO_DYNAMO,))]
        if self.isolation == "bwrap":
            cmd = _bwrap_prefix(self.device, self.hidden) + cmd
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
            from evaluator.output_slot import DriverSlot  # torch: not imported by this module (forked_zygote.py)
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


def _drain(fd: int, buf: bytearray) -> None:
    with os.fdopen(fd, "rb", buffering=0) as f:
        while True:
            chunk = f.read(65536)
            if not chunk:
                return
            if len(buf) < LOG_LIMIT_BYTES:
                buf += chunk[: LOG_LIMIT_BYTES - len(buf)]
