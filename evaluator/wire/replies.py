"""A worker's replies to the driver, declared once: a frozen dataclass for each kind, and `parse(header)`, the
driver's one strict reading of what a worker sent (`connection.py` parses every reply).

The candidate's process writes these headers, so every field is hostile: a status outside the list, a field
missing, of the wrong type or unknown, a string or list over its bound, a time that is not finite: each is
`MalformedReply`, whose message is one sentence, and the connection turns it into the candidate's protocol failure.
The wire format is the worker's plain JSON header (`worker/loop.py`, `timed_calls.py`, `memory_calls.py`); nested layouts
(an output or input file's, a task's sizes) are judged further by their own readers (`output_slot.py`,
`input_file.py`, `task_size.py`), here only bounded.

A worker's failure (`compile_error`, `rejected`, ...) is a `Failed` with the verdict's `Status`; a task that fails to
load is `TaskFailed`. Everything else says what the command asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

from evaluator.wire.build_verdict import BuildKind
# The bounds are read here as `replies.MAX_...` too (tests, callers); the reader is reply_fields.py.
from evaluator.wire.reply_fields import (MAX_COUNT, MAX_ITEMS, MAX_LOG_CHARS, MAX_NAME_CHARS, MAX_REASON_CHARS,  # noqa: F401
                                         Fields, MalformedReply, shown)
from evaluator.result import Status

# -- the kinds ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Ready:
    """The task loaded (and, in the candidate's worker, the candidate imported). The reference's says what the task
    is: its variants' overrides, tolerance, interpreter shape and, when asked, sizes (`task_size.py`); the
    candidate's its OS threads at the guards' snapshot (`worker_cpu.WorkerThreads`)."""

    STATUS: ClassVar[str] = "ready"
    variants: int
    threads: int | None = None
    sizes: tuple[Mapping[str, Any], ...] | None = None
    variant_overrides: tuple[Mapping[str, str], ...] | None = None
    tolerance: Mapping[str, float] | None = None
    interpreter_shape: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class BuildRequest:
    """A worker's request, while it imports the candidate, that the driver build one load_inline or load_c call
    (`build/stage.py`); `spec` is validated by the build's own spec class."""

    STATUS: ClassVar[str] = "build"
    spec: Mapping[str, Any]
    kind: BuildKind = BuildKind.CUDA
    threads: int | None = None


@dataclass(frozen=True, slots=True)
class Ran:
    """One correctness call's report (its outputs travel as the frame's tensors). A float64 run sends none of it."""

    STATUS: ClassVar[str] = "ran"
    ops: tuple[str, ...] = ()
    outputs: tuple[Mapping[str, Any], ...] = ()
    inputs: tuple[Mapping[str, Any], ...] | None = None
    probe: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()
    peak_memory_bytes: int | None = None
    launches: int = 0
    kernels: Mapping[str, int] = field(default_factory=dict)
    torch_work: int | None = None
    torch_ops: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class NoExact:
    """The reference's worker: the forward has no float64 path (`exact_reference.py`)."""

    STATUS: ClassVar[str] = "no-exact"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Armed:
    """A timed or memory-measured call's inputs are drawn; the worker waits for the driver's `go`. The reference's
    worker, with shared inputs, says where its own lie (`inputs`; None: the file cannot carry them)."""

    STATUS: ClassVar[str] = "armed"
    inputs: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True, slots=True)
class Drawn:
    """The reference's worker drew a candidate's timed call's inputs into the shared file: where they lie (None: the
    file cannot carry them)."""

    STATUS: ClassVar[str] = "drawn"
    inputs: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True, slots=True)
class Rep:
    """One timed call: the worker's own time of it and where its outputs lie in the shared output file."""

    STATUS: ClassVar[str] = "rep"
    ms: float
    outputs: Any = None  # the outputs' layout, judged by `output_slot.DriverSlot.read`
    direct: bool = False  # the layout names the outputs in the worker's memory, not in the shared file


@dataclass(frozen=True, slots=True)
class Timed:
    """A block of timed calls is over: the fewest launches per kernel of any call, the median time work outlived a
    call."""

    STATUS: ClassVar[str] = "timed"
    kernels: Mapping[str, int] = field(default_factory=dict)
    left_running_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Looped:
    """The energy meter's loop is over: how many calls it made."""

    STATUS: ClassVar[str] = "looped"
    calls: int


@dataclass(frozen=True, slots=True)
class ClockRead:
    """The worker's timer clock, read now."""

    STATUS: ClassVar[str] = "clock"
    now_ms: float


@dataclass(frozen=True, slots=True)
class Profiled:
    """The PyTorch profiler's table for one call, as named metrics."""

    STATUS: ClassVar[str] = "profiled"
    profile: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Batched:
    STATUS: ClassVar[str] = "batched"


@dataclass(frozen=True, slots=True)
class Checked:
    STATUS: ClassVar[str] = "checked"


@dataclass(frozen=True, slots=True)
class Called:
    """A memory-measured call returned (its outputs still held)."""

    STATUS: ClassVar[str] = "called"


@dataclass(frozen=True, slots=True)
class Measured:
    """The memory-measured calls are over and their checks passed."""

    STATUS: ClassVar[str] = "measured"


@dataclass(frozen=True, slots=True)
class Failed:
    """The worker's verdict on what it was asked: a status of `result.Status` (never `ok`), one sentence, a log."""

    status: Status
    reason: str = ""
    log: str = ""


@dataclass(frozen=True, slots=True)
class TaskFailed:
    """The task itself fails to load (the task's problem, not the candidate's)."""

    STATUS: ClassVar[str] = "task_error"
    reason: str = ""
    log: str = ""


Reply = Union[Ready, BuildRequest, Ran, NoExact, Armed, Drawn, Rep, Timed, Looped, ClockRead, Profiled, Batched,
              Checked, Called, Measured, Failed, TaskFailed]
FAILURES = frozenset(s.value for s in Status if s is not Status.OK)


# -- the parse ---------------------------------------------------------------------------------------------------------
def parse(header: Mapping[str, Any]) -> Reply:
    """The reply a header carries; `MalformedReply` says in one sentence what does not fit."""
    status = header.get("status")
    if not isinstance(status, str):
        raise MalformedReply(f"a reply without a status ({shown(status)})")
    reader = _PARSERS.get(status)
    if reader is None and status not in FAILURES:
        raise MalformedReply(f"a reply of unknown status {shown(status)}")
    f = Fields(status, header)
    reply: Reply = reader(f) if reader is not None else Failed(Status(status), f.text("reason", MAX_REASON_CHARS),
                                                                   f.text("log", MAX_LOG_CHARS))
    f.done()
    return reply


def kind_name(kind: type[Any]) -> str:
    """A reply kind's status as it travels (for sentences about a reply that was not the one expected)."""
    return str(getattr(kind, "STATUS", kind.__name__))


def status_of(reply: Reply) -> str:
    return reply.status.value if isinstance(reply, Failed) else reply.STATUS


def _ready(f: Fields) -> Ready:
    overrides = f._take("variant_overrides")
    return Ready(variants=f.required_count("variants"), threads=f.count("threads"), sizes=f.records("sizes"),
                 variant_overrides=None if overrides is None else tuple(
                     f.label_map("variant_overrides", v) for v in f._list("variant_overrides", overrides)),
                 tolerance=f.numbers("tolerance"), interpreter_shape=f.labels("interpreter_shape"))


def _build(f: Fields) -> BuildRequest:
    spec = f.record("spec")
    if spec is None:
        raise f._bad("spec", "missing")
    kind = f._take("kind")
    if kind is None:
        kind = BuildKind.CUDA.value
    if not isinstance(kind, str) or kind not in BuildKind._value2member_map_:
        raise f._bad("kind", f"not a kind of build ({shown(kind)})")
    return BuildRequest(spec=spec, kind=BuildKind(kind), threads=f.count("threads"))


def _ran(f: Fields) -> Ran:
    return Ran(ops=f.names("ops") or (), outputs=f.records("outputs") or (), inputs=f.records("inputs"),
               probe=f.record("probe"), notes=f.names("notes") or (), peak_memory_bytes=f.count("peak_memory_bytes"),
               launches=f.count("launches", 0) or 0, kernels=f.counts("kernels") or {},
               torch_work=f.count("torch_work"), torch_ops=f.names("torch_ops"))


def _rep(f: Fields) -> Rep:
    ms = f.ms("ms")
    if ms < 0:
        raise f._bad("ms", f"negative ({ms:g})")
    return Rep(ms=ms, outputs=f._take("outputs"), direct=f.flag("direct"))


def _timed(f: Fields) -> Timed:
    return Timed(kernels=f.counts("kernels") or {}, left_running_ms=f.ms("left_running_ms", 0.0))


_PARSERS: Mapping[str, Any] = {
    Ready.STATUS: _ready,
    BuildRequest.STATUS: _build,
    Ran.STATUS: _ran,
    NoExact.STATUS: lambda f: NoExact(f.text("reason", MAX_REASON_CHARS)),
    Armed.STATUS: lambda f: Armed(f.records("inputs")),
    Drawn.STATUS: lambda f: Drawn(f.records("inputs")),
    Rep.STATUS: _rep,
    Timed.STATUS: _timed,
    Looped.STATUS: lambda f: Looped(f.required_count("calls")),
    ClockRead.STATUS: lambda f: ClockRead(f.ms("now_ms")),
    Profiled.STATUS: lambda f: Profiled(f.numbers("profile") or {}),
    Batched.STATUS: lambda f: Batched(),
    Checked.STATUS: lambda f: Checked(),
    Called.STATUS: lambda f: Called(),
    Measured.STATUS: lambda f: Measured(),
    TaskFailed.STATUS: lambda f: TaskFailed(f.text("reason", MAX_REASON_CHARS), f.text("log", MAX_LOG_CHARS)),
}
