"""The reference's zygote forked from a driver that has imported torch already, instead of a fresh interpreter that
imports it a second time.

A cold `opforge eval` imports torch three times on a CPU: in the candidate's zygote (with dynamo: the one it waits
on), in the reference's zygote and in the driver, which compares the outputs itself. On two cores the three imports
share the CPU, so the reference's second copy of the driver's import (about 1.2 s of CPU) delays the candidate's
zygote by about half of that. The reference runs trusted code only, with the driver's environment and no sandbox
beyond its own process group, so a fork of the driver, made just after the driver's import, is the same zygote at the
cost of the imports the driver does not make (Triton, the worker's modules: about 0.25 s).

A fork is only taken where it is the same process an exec would start (`refusal` says why not otherwise, and the
caller then starts a fresh interpreter, as before):
- on a CPU (a driver that touched CUDA could not fork, and a GPU evaluation's start is not the CPU's to share);
- torch imported and Triton not (Triton reads TRITON_INTERPRET when it is imported: the child sets it first);
- one Python thread (no other thread holding a lock the child would inherit held), no tracer or profiler (a coverage
  tracer in the reference alone would slow its calls: `zygote_env.zygote_environment`);
- every environment variable equal to the exec'd zygote's, apart from PYTHONPATH (this process's modules are the
  project's already) and TRITON_INTERPRET: libgomp, Kineto and MKL read theirs when torch loads them, so OpenMP's
  wait policy or the profiler's log level of the reference must not differ from the candidate's.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from typing import IO, Any

from evaluator.device.rules import rules
from evaluator.sandbox.zygote_env import PROJECT_ROOT, zygote_environment

# Read by the child only after the fork (Triton's import) or set by the zygote itself (the project on sys.path).
SET_IN_THE_CHILD = ("PYTHONPATH", "TRITON_INTERPRET")
ZYGOTE_CWD = "/tmp"  # an exec'd zygote's working directory, and so the first entry of its sys.path (`-m`)


def refusal(role: str, device: str, environ: dict[str, str] | None = None) -> str | None:
    """Why this process may not fork the role's zygote (None: it may)."""
    if role != "reference" or not rules(device).reference_zygote_forked:
        return "only the reference's zygote on a CPU is forked"
    if "torch" not in sys.modules:
        return "torch is not imported here: a fresh interpreter costs the same"
    if "triton" in sys.modules:
        return "Triton is imported here, possibly without TRITON_INTERPRET"
    if threading.active_count() != 1:
        return "other Python threads run here"
    if sys.gettrace() is not None or sys.getprofile() is not None:
        return "a tracer or profiler runs here"
    env = dict(os.environ) if environ is None else environ
    wanted = zygote_environment(role, device, env)
    differs = sorted(k for k in set(env) | set(wanted) if k not in SET_IN_THE_CHILD and env.get(k) != wanted.get(k))
    if differs:
        return f"this process's environment differs from the zygote's in {', '.join(differs)}"
    return None


class ForkedProcess:
    """The forked zygote as `launch.Zygote` uses a `subprocess.Popen`: its pid, exit status and stderr."""

    def __init__(self, pid: int, stderr: IO[bytes]):
        self.pid, self.stderr = pid, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self) -> int:
        code = self._reap(0)
        assert code is not None
        return code

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def fork_zygote(control_fd: int, device: str, role: str, flush_ahead: bool) -> ForkedProcess:
    """The role's zygote, forked from this process (check `refusal` first): a process group of its own, the
    exec'd zygote's environment, working directory, standard streams and sys.path, and no file of this process open
    but its control socket."""
    env = zygote_environment(role, device, dict(os.environ))
    err_r, err_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns (its coverage is the zygote's)
        _become_zygote(control_fd, err_w, env, device, role, flush_ahead)
    os.close(err_w)
    try:
        os.setpgid(pid, pid)  # as the child does: a kill of its group right after the fork must reach it
    except OSError:
        pass
    return ForkedProcess(pid, os.fdopen(err_r, "rb"))


def _become_zygote(control_fd: int, err_w: int, env: dict[str, str], device: str, role: str,
                   flush_ahead: bool) -> Any:  # pragma: no cover - runs in the child
    code = 70
    try:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.dup2(err_w, 2)
        keep = {0, 1, 2, control_fd}
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.chdir(ZYGOTE_CWD)
        driver_path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = [ZYGOTE_CWD, str(PROJECT_ROOT)] + [p for p in sys.path[1:]
                                                         if p and p not in driver_path and p != str(PROJECT_ROOT)]
        from evaluator.worker import zygote
        zygote.serve(control_fd, device, role, flush_ahead)
        code = 0
    except BaseException:  # noqa: BLE001 - said on stderr, which the driver quotes
        traceback.print_exc()
    finally:
        os._exit(code)
