"""The driver's side of one worker: requests with per-phase deadlines, and failures turned into verdicts."""

from __future__ import annotations

import contextlib
import select
import threading
from collections.abc import Iterator
from typing import TypeVar

import torch

from evaluator.wire.commands import Clock, Command, Exit
from evaluator.worker.heap import malloc_bytes
from evaluator.result import Status
from evaluator.sandbox.launch import WorkerHandle, Zygote
from evaluator.task import TaskError
from evaluator.wire.frames import Channel, ChannelClosed, ChannelTimeout, ProtocolError
from evaluator.wire.replies import (ClockRead, Failed, MalformedReply, Rep, Reply, TaskFailed, kind_name, parse,
                                    status_of)

R = TypeVar("R")


class Refused(Exception):
    """A verdict reached before the evaluation's end (internal to the evaluator)."""

    def __init__(self, status: Status, reason: str, log: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.log = status, reason, log


class WorkerConnection:
    def __init__(self, zygote: Zygote, handle: WorkerHandle, nonce: str, role: str, task_label: str):
        self.zygote, self.handle, self.role, self.task_label = zygote, handle, role, task_label
        # Received outputs in plain `malloc`ed memory, which a driver that keeps its heap reuses from one trial to
        # the next (`heap.malloc_bytes`); a worker's own channel keeps PyTorch's buffers (its receipts are small).
        self.channel = Channel(handle.sock, nonce, buffer=malloc_bytes)
        self.last_request: Command | None = None
        self.closed = False
        # Messages to and from the worker so far, but reads of its clock: where none passed between two reads of its
        # threads, it waited for its next command throughout (`worker_cpu.WorkerThreads`).
        self.messages = 0
        # Timed calls' outputs named in the worker's memory instead of copied (`output_slot.py`): set by the driver
        # for a block where it can read that memory; `direct_pid` is the worker's process as the driver sees it.
        self.direct_outputs = False
        self.direct_pid: int | None = None

    def send(self, cmd: Command) -> None:
        if not isinstance(cmd, Clock):
            self.messages += 1
        try:
            self.channel.send(cmd.to_wire())
        except OSError:
            raise self._failure(Status.CRASHED, "died while receiving a command") from None

    def recv(self, timeout_s: float, doing: str) -> tuple[Reply, list[torch.Tensor]]:
        """The worker's next reply, parsed (`replies.parse`); its failures raised as the verdict (`Refused`)
        or, for the reference or a task that fails to load, as the task's error."""
        try:
            header, tensors = self.channel.recv(timeout_s)
        except ChannelTimeout:
            raise self._failure(Status.TIMEOUT, f"did not finish {doing} within {timeout_s:g} s") from None
        except ChannelClosed:
            raise self._failure(Status.CRASHED, f"died while {doing} (crash, abort or os._exit)") from None
        except ProtocolError as exc:
            raise self._failure(Status.REJECTED, f"sent a malformed or forged message on the result channel "
                                                 f"({exc})") from None
        try:
            reply = parse(header)
        except MalformedReply as exc:
            raise self._failure(Status.REJECTED, f"sent a malformed reply while {doing}: {exc}") from None
        if not isinstance(reply, ClockRead):
            self.messages += 1
        if isinstance(reply, TaskFailed):
            raise TaskError(f"{self.task_label}: the task fails to load: {reply.reason}")
        if isinstance(reply, Failed):
            if reply.status == Status.NEEDS_DYNAMO and self.zygote.dynamo:  # only a zygote without dynamo may say so
                raise self._failure(Status.REJECTED, "said it needs torch._dynamo, which its worker has loaded")
            if reply.status == Status.INFRA_FAILED:  # the runner's word about its own machinery, never a worker's
                raise self._failure(Status.REJECTED, "claimed an infrastructure failure, which only the runner reports")
            if self.role == "reference":
                raise TaskError(f"{self.task_label}: the reference failed while {doing}: {reply.reason}")
            raise Refused(reply.status, reply.reason or reply.status.value, reply.log)
        return reply, tensors

    def answered(self, wait_s: float) -> bool:
        """Whether the worker's next reply has begun to arrive (within `wait_s`); nothing is read."""
        ready, _, _ = select.select([self.channel.sock], [], [], wait_s)
        return bool(ready)

    def recv_as(self, kind: type[R], timeout_s: float, doing: str) -> tuple[R, list[torch.Tensor]]:
        """The worker's next reply, which must be a `kind`: any other is a protocol failure."""
        reply, tensors = self.recv(timeout_s, doing)
        if not isinstance(reply, kind):
            raise self._failure(Status.REJECTED, f"answered {status_of(reply)!r} where it was to answer "
                                                 f"{kind_name(kind)!r} ({doing})")
        return reply, tensors

    def request(self, cmd: Command, timeout_s: float, doing: str) -> tuple[Reply, list[torch.Tensor]]:
        self.ask(cmd)
        return self.recv(timeout_s, doing)

    def request_as(self, cmd: Command, kind: type[R], timeout_s: float, doing: str) -> tuple[R, list[torch.Tensor]]:
        self.ask(cmd)
        return self.recv_as(kind, timeout_s, doing)

    def ask(self, cmd: Command) -> None:
        """Send a request whose reply `recv` reads later (the driver keeps both workers busy meanwhile)."""
        self.last_request = cmd  # what a failure can be replayed with (evaluate.py: the reference alone)
        self.send(cmd)

    def _failure(self, status: Status, what: str) -> Exception:
        """A candidate's failure is its verdict; the reference's is the task's problem (it runs only trusted code)."""
        if self.role == "reference":
            return TaskError(f"{self.task_label}: the reference process {what}{_last_words(self.log())}")
        return Refused(status, f"the candidate process {what}")

    def read_outputs(self, reply: Rep) -> list[torch.Tensor]:
        """A timed call's outputs, read by the driver from the worker's shared output file where the call's reply
        says they lie, or from the worker's memory where it names them there (`direct_pid` known: the worker's
        process as this one sees it; `output_slot.py`); a malformed layout is the candidate's protocol violation."""
        if reply.direct and self.direct_pid is None:
            raise self._failure(Status.REJECTED, "named its outputs in its memory where it was asked to copy them")
        try:
            return self.handle.outputs.read(reply.outputs, self.direct_pid if reply.direct else None)
        except ProtocolError as exc:
            raise self._failure(Status.REJECTED, f"sent a malformed output layout ({exc})") from None

    def log(self) -> str:
        return self.handle.log_text()[-8000:]

    def close(self) -> None:
        """Ask the worker to exit, then have its zygote kill it and reap it (once: closing again does nothing)."""
        if self.closed:
            return
        self.closed = True
        try:
            self.channel.send(Exit().to_wire())
        except OSError:
            pass
        self.zygote.kill(self.handle)


def _last_words(log: str, lines: int = 12) -> str:
    """The end of a dead reference worker's output, for the task's error: the reference runs trusted code only, so
    what it printed (a traceback while starting, an error of the device's runtime) is the one clue to the cause."""
    tail = [line for line in log.strip().splitlines() if line.strip()][-lines:]
    return "; its last output:\n" + "\n".join(tail) if tail else ""


def close_all(*conns: WorkerConnection | None) -> None:
    """Close several workers at once: each close waits for its zygote to kill the worker, reap it and remove its
    folder (tens of ms for a process that mapped torch), and the zygotes do that side by side."""
    live = [c for c in conns if c is not None]
    others = [threading.Thread(target=c.close, daemon=True) for c in live[1:]]
    for t in others:
        t.start()
    try:
        if live:
            live[0].close()
    finally:
        for t in others:
            t.join()


@contextlib.contextmanager
def closed_meanwhile(conn: WorkerConnection) -> Iterator[None]:
    """Close `conn` in a helper thread while the body runs; done on leaving."""
    closing = threading.Thread(target=conn.close, daemon=True)
    closing.start()
    try:
        yield
    finally:
        closing.join()
