"""The adversarial cases of tests/cheats and tests/honest: their header, the canaries they arm, and the checks that
`test_cheats.py` (the cases whose verdict rests on clocks, run alone) and `test_cheats_beside.py` (the others, run
beside other work) apply to them. Candidates that try to fool the evaluator must be refused, honest ones must pass.

Every file in tests/cheats is a candidate with a comment header (one space after '#', wrapped lines indented further):

    # task: relu                      a task in tests/tasks, without .py
    # expect: rejected|incorrect      the statuses that count as refusing it
    # why: ...                        the trick, in one line
    # gpu: true                       optional: needs CUDA; skipped where torch.cuda.is_available() is False
    # config: compile_timeout_s=10    optional: EvalConfig fields overriding the suite's defaults
    # canary-file: {repo}/x.txt       optional, repeatable: a file the candidate tries to create; it must not exist
    # canary-port: 47821 47822        optional: ports it tries to reach on 127.0.0.1; the test listens, nothing may connect
    # canary-process: marker          optional: argv[0] of processes it spawns; none may outlive the evaluation
    # canary-socket: {repo}/x.sock    optional, repeatable: a Unix socket (@name: abstract) the test listens on; nothing
                                      may connect
    # canary-shm: 0x0f0c4e01 0x...02  optional: System V keys; the test makes a segment with the first, and none with
                                      the second (nor a message queue or semaphore set) may exist afterwards
    # canary-secret: {home}/.ssh/x    optional, repeatable: a file the test writes with a fresh secret (in quotes)
                                      before the evaluation and removes after; the secret must not reach the result
    # slow: true                      optional: marks the test slow (it waits for a timeout or builds CUDA code)
    # beside: true                    optional: its verdict rests on no clock, CPU account or deadline that other work
                                      on the cores could move (a build, the symbol check, a sandbox, a crash, a
                                      timeout): `test_cheats_beside.py` runs it beside other work; without it the
                                      case runs alone, in `test_cheats.py` (tests/conftest.py, SERIAL_FILES)
    # reason: words                   optional, repeatable: words the verdict's reason must hold, where several
                                      defences would refuse it and the case exists for one of them

Honest candidates in tests/honest use the same header; `expect-without-gpu` gives the status where CUDA is missing (for
a cheat: where the CPU interpreter's watch of every call leaves it no way to tell checked calls from timed ones, so it
runs its kernel on every call and is timed honestly), and `max-abs-error` a bound on the reported error. Every evaluation runs with fake API keys in the environment, which must
never appear in the result.
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import os
import re
import secrets
import signal
import socket
import sysconfig
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator import evaluate

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
TASKS_DIR = TESTS_DIR / "tasks"
CHEATS_DIR = TESTS_DIR / "cheats"
HONEST_DIR = TESTS_DIR / "honest"

HAS_CUDA = torch.cuda.is_available()
BASE_CONFIG = {"run_timeout_s": 20, "compile_timeout_s": 60, "max_timing_s": 0.5}
HEADER_KEYS = {
    "task", "expect", "expect-without-gpu", "why", "gpu", "config",
    "canary-file", "canary-port", "canary-process", "max-abs-error", "slow",
    "canary-socket", "canary-shm", "canary-secret",
    "reason",  # words the verdict's reason must hold: which defence refused it, where several would
    "beside",  # the case may run beside other work (see the module's docstring)
}
# Fresh per run, so a value found in a result cannot come from an old log.
STORE_PASSWORD = "store-canary-" + secrets.token_hex(12)
SECRET_CANARIES = {
    "OPENAI_API_KEY": "sk-opforge-canary-" + secrets.token_hex(12),
    "OPFORGE_LLM_API_KEY": "opforge-llm-canary-" + secrets.token_hex(12),
    "AWS_SECRET_ACCESS_KEY": "aws-opforge-canary-" + secrets.token_hex(12),
    "AWS_ACCESS_KEY_ID": "AKIAOPFORGECANARY" + secrets.token_hex(4).upper(),
    # the store's credentials: a worker's database URL, its password a canary
    "OPFORGE_DB": f"postgresql://opforge:{STORE_PASSWORD}@127.0.0.1:5432/opforge",
}


@dataclass(frozen=True)
class Header:
    path: Path
    fields: dict[str, list[str]] = field(default_factory=dict)

    def one(self, key: str, default: str | None = None) -> str | None:
        values = self.fields.get(key)
        return values[-1] if values else default

    @property
    def task(self) -> str:
        return self.one("task") or ""

    @property
    def gpu(self) -> bool:
        return (self.one("gpu") or "").lower() == "true"

    @property
    def beside(self) -> bool:
        return (self.one("beside") or "").lower() == "true"

    def statuses(self, key: str = "expect") -> frozenset[Status]:
        raw = self.one(key) or ""
        return frozenset(Status(s.strip()) for s in raw.split("|") if s.strip())

    def config(self, device: str) -> EvalConfig:
        values: dict[str, object] = {"device": device, **BASE_CONFIG}
        for line in self.fields.get("config", []):
            for item in line.split(","):
                name, _, value = item.partition("=")
                values[name.strip()] = ast.literal_eval(value.strip())
        return EvalConfig(**values)


def read_header(path: Path) -> Header:
    fields: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        m = re.match(r"^# ([a-z][a-z-]*):\s*(.*?)\s*$", line)
        if m and m.group(1) in HEADER_KEYS:
            fields.setdefault(m.group(1), []).append(m.group(2))
    return Header(path=path, fields=fields)


def params(directory: Path, *, gpu_marks: bool = True) -> list:
    params = []
    for path in sorted(directory.glob("*.py")):
        header = read_header(path)
        marks = []
        if header.gpu and gpu_marks:
            marks = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")]
        if (header.one("slow") or "").lower() == "true" and gpu_marks:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(header, id=path.stem, marks=marks))
    return params


CHEATS = params(CHEATS_DIR)
HONEST = params(HONEST_DIR)


def beside(cases: list) -> list:
    """The cases whose header says `beside: true`."""
    return [p for p in cases if p.values[0].beside]


def alone(cases: list) -> list:
    """The cases that run alone: every one whose header does not say `beside: true`."""
    return [p for p in cases if not p.values[0].beside]


# ---------------------------------------------------------------- canaries: damage a candidate must not be able to do


def _expand(template: str) -> Path:
    return Path(template.format(
        repo=REPO_DIR, home=Path.home(), purelib=sysconfig.get_paths()["purelib"], tmp="/tmp",
    ))


def _processes_with_argv0(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0.decode(errors="replace") == marker:
            pids.append(int(entry.name))
    return pids


class _PortListener:
    """Listens on 127.0.0.1:port and records every connection attempt that gets through."""

    def __init__(self, port: int):
        self.port = port
        self.hits: list[bytes] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    self.hits.append(conn.recv(256) or b"<connected>")
                except OSError:
                    self.hits.append(b"<connected>")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()


class _UnixListener(_PortListener):
    """Listens on a Unix socket (a path, or @name for an abstract one) and records every connection that gets through."""

    def __init__(self, where: str):  # noqa: super().__init__ binds a TCP port: not called
        self.port = where  # type: ignore[assignment]
        self.hits = []
        self.path = None if where.startswith("@") else Path(where)
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind("\0" + where[1:] if self.path is None else str(self.path))
        if self.path is not None:
            os.chmod(self.path, 0o777)
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        super().close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)


class _SysV:
    """System V IPC objects by key, through the C library (the test's own, outside any sandbox)."""
    IPC_CREAT, IPC_RMID = 0o1000, 0

    def __init__(self):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.shmat.restype = ctypes.c_void_p
        self.ctypes = ctypes

    def make_segment(self, key: int, text: bytes) -> int:
        shm_id = self.libc.shmget(key, 4096, self.IPC_CREAT | 0o666)
        assert shm_id >= 0, "the test could not make its System V segment"
        address = self.libc.shmat(shm_id, None, 0)
        self.ctypes.memmove(address, text, len(text))
        self.libc.shmdt(self.ctypes.c_void_p(address))
        return shm_id

    def remove(self, key: int) -> list[str]:
        """Removes every object with `key`; names those that existed."""
        found = []
        for kind, get, ctl, args in (("segment", self.libc.shmget, self.libc.shmctl, (0, 0)),
                                     ("message queue", self.libc.msgget, self.libc.msgctl, (0,)),
                                     ("semaphore set", self.libc.semget, self.libc.semctl, (0, 0))):
            ipc_id = get(key, *args)
            if ipc_id >= 0:
                found.append(f"a System V {kind} with key {key:#x}")
                ctl(ipc_id, *((0,) if kind == "semaphore set" else ()), self.IPC_RMID, None)
        return found


class Canaries:
    """Arms the header's canaries before an evaluation; `damage()` lists what got through, and cleans it up."""

    def __init__(self, header: Header):
        self.files = [_expand(t) for t in header.fields.get("canary-file", [])]
        self.ports = [int(p) for line in header.fields.get("canary-port", []) for p in line.split()]
        self.markers = header.fields.get("canary-process", [])
        self.listeners: list[_PortListener] = []
        self.sockets = [str(_expand(t)) if not t.startswith("@") else t for t in header.fields.get("canary-socket", [])]
        self.shm_keys = [int(k, 0) for line in header.fields.get("canary-shm", []) for k in line.split()]
        self.secret_files = [_expand(t) for t in header.fields.get("canary-secret", [])]
        self.secret = "opforge-secret-canary-" + secrets.token_hex(12)
        self._made_dirs: list[Path] = []

    def __enter__(self) -> "Canaries":
        for path in self.files:
            path.unlink(missing_ok=True)
        for marker in self.markers:
            _kill(_processes_with_argv0(marker))
        for port in self.ports:
            try:
                self.listeners.append(_PortListener(port))
            except OSError:
                pass  # port taken: the candidate tries the others
        if self.ports and not self.listeners:
            pytest.skip(f"none of the canary ports {self.ports} could be bound")
        for where in self.sockets:
            self.listeners.append(_UnixListener(where))
        if self.shm_keys:
            sysv = _SysV()
            for key in self.shm_keys:
                sysv.remove(key)
            sysv.make_segment(self.shm_keys[0], b"opforge-canary\0")
        for path in self.secret_files:
            missing = [p for p in reversed(path.parents) if not p.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            self._made_dirs += reversed(missing)
            path.write_text(f'"{self.secret}"\n')
            path.chmod(0o600)
        return self

    def __exit__(self, *exc) -> None:
        for listener in self.listeners:
            listener.close()
        for path in self.files:
            path.unlink(missing_ok=True)
        for marker in self.markers:
            _kill(_processes_with_argv0(marker))
        for key in self.shm_keys:
            _SysV().remove(key)
        for path in self.secret_files:
            path.unlink(missing_ok=True)
        for folder in self._made_dirs:
            with contextlib.suppress(OSError):
                folder.rmdir()

    def damage(self, result=None) -> list[str]:
        found = [f"created {path}" for path in self.files if path.exists()]
        if self.secret_files and result is not None and self.secret in json.dumps(result.to_json()):
            found.append("a secret file's content reached the result")
        found += [f"connected to {l.port} ({l.hits[0]!r})" for l in self.listeners if l.hits]
        if self.shm_keys:
            found += [f"left {what} behind" for what in _SysV().remove(self.shm_keys[-1])]
        deadline = time.monotonic() + 3.0  # grace period for the sandbox's teardown
        for marker in self.markers:
            while (pids := _processes_with_argv0(marker)) and time.monotonic() < deadline:
                time.sleep(0.1)
            if pids:
                found.append(f"{len(pids)} '{marker}' processes outlived the evaluation")
        return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# ---------------------------------------------------------------- helpers


def evaluate_case(header: Header, device: str, monkeypatch: pytest.MonkeyPatch):
    for name, value in SECRET_CANARIES.items():
        monkeypatch.setenv(name, value)
    task = load_task(TASKS_DIR / f"{header.task}.py")
    candidate = load_candidate(header.path)
    return evaluate(task, candidate, header.config(device))


def assert_readable_reason(result, label: str) -> None:
    reason = result.reason
    assert isinstance(reason, str) and reason.strip(), f"{label}: empty reason"
    assert len(reason.split()) >= 3, f"{label}: reason is not a sentence: {reason!r}"
    assert "Traceback (most recent call last)" not in reason, f"{label}: reason is a traceback, not a sentence"


def assert_no_secret(result, label: str) -> None:
    dumped = json.dumps(result.to_json())
    for name, value in SECRET_CANARIES.items():
        assert value not in dumped, f"{label}: the value of {name} leaked into the result"
    assert STORE_PASSWORD not in dumped, f"{label}: the store's password leaked into the result"


def describe(result) -> str:
    return f"{result.status}: {result.reason}"




# ---------------------------------------------------------------- the checks each case gets, in whichever file runs it


def check_refused(header: Header, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cheat: refused with a status its header expects and a readable reason, no damage done, no secret leaked."""
    label = header.path.name
    with Canaries(header) as canaries:
        result = evaluate_case(header, "cuda" if header.gpu else "cpu", monkeypatch)
        damage = canaries.damage(result)
    assert not damage, f"{label}: the candidate did damage: {'; '.join(damage)} (verdict {describe(result)})"
    expected = header.statuses() if header.gpu or HAS_CUDA else (
        header.statuses("expect-without-gpu") or header.statuses())
    assert result.status in expected, (
        f"{label} ({header.one('why')}): expected {'|'.join(sorted(expected))}, got {describe(result)}"
    )
    for words in header.fields.get("reason", []):
        assert words in result.reason, f"{label}: expected a reason holding {words!r}, got {describe(result)}"
    assert_readable_reason(result, label)
    assert_no_secret(result, label)


def check_honest(header: Header, monkeypatch: pytest.MonkeyPatch) -> None:
    """An honest kernel: the status its header expects (ok where it can run), a finite speedup and error."""
    label = header.path.name
    result = evaluate_case(header, "cuda" if HAS_CUDA else "cpu", monkeypatch)
    expected = header.statuses() if HAS_CUDA else (header.statuses("expect-without-gpu") or header.statuses())
    assert result.status in expected, f"{label}: expected {'|'.join(sorted(expected))}, got {describe(result)}"
    assert_readable_reason(result, label)
    assert_no_secret(result, label)
    if result.status == Status.OK:
        assert isinstance(result.speedup, float) and math.isfinite(result.speedup) and result.speedup > 0, (
            f"{label}: speedup {result.speedup!r} is not a positive float"
        )
        assert result.max_abs_error is not None and math.isfinite(result.max_abs_error), (
            f"{label}: max_abs_error {result.max_abs_error!r}"
        )
        bound = header.one("max-abs-error")
        if bound is not None:
            assert result.max_abs_error <= float(bound), f"{label}: max_abs_error {result.max_abs_error} > {bound}"
    elif result.status == Status.RUNTIME_ERROR and not HAS_CUDA:
        assert re.search(r"\b(cuda|gpu)\b", result.reason, re.IGNORECASE), (
            f"{label}: the reason should say that no CUDA device is available: {result.reason!r}"
        )


# ---------------------------------------------------------------- a candidate zygote without dynamo


def lean(cases: list) -> list:
    """The CPU cases whose source a cold `opforge eval` gives a candidate zygote without torch._dynamo."""
    from evaluator.driver.warm_start import may_need_dynamo
    return [p for p in cases if not p.values[0].gpu and not may_need_dynamo(p.values[0].path.read_text())]


@pytest.fixture(scope="module")
def lean_zygotes() -> Iterator[Any]:
    """A `LocalEvaluator` whose candidate zygotes start without torch._dynamo, as a cold `opforge eval` starts them
    (one per test module that imports this fixture)."""
    from evaluator.build.cache import BuildCache
    from evaluator.driver.evaluate import LocalEvaluator
    from evaluator.driver.warm_start import WarmZygotes
    evaluator = LocalEvaluator(zygotes=WarmZygotes.for_cache(BuildCache.open(), dynamo=False))
    try:
        yield evaluator
    finally:
        evaluator.close()


def check_lean(header: Header, evaluator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`opforge eval` starts a native candidate's zygote without torch._dynamo (`warm_start.may_need_dynamo`): each
    native cheat is refused there as it is with dynamo, and each honest native kernel passes."""
    for name, value in SECRET_CANARIES.items():
        monkeypatch.setenv(name, value)
    label = header.path.name
    with Canaries(header) as canaries:
        result = evaluator.evaluate(load_task(TASKS_DIR / f"{header.task}.py"), load_candidate(header.path),
                                    header.config("cpu"))
        damage = canaries.damage()
    assert not damage, f"{label}: the candidate did damage: {'; '.join(damage)} (verdict {describe(result)})"
    expected = header.statuses("expect-without-gpu") or header.statuses()
    assert result.status in expected, f"{label}: expected {'|'.join(sorted(expected))}, got {describe(result)}"
    for words in header.fields.get("reason", []):
        assert words in result.reason, f"{label}: expected a reason holding {words!r}, got {describe(result)}"
    assert result.status is not Status.NEEDS_DYNAMO, describe(result)
    assert_readable_reason(result, label)
    assert_no_secret(result, label)
