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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union

from evaluator.wire.build_verdict import BuildKind
from evaluator.result import Status

MAX_REASON_CHARS = 20_000
MAX_LOG_CHARS = 1_000_000
MAX_NAME_CHARS = 10_000  # an op's, a kernel's (a C++ template's can run long), a metric's name, a note, a value
MAX_ITEMS = 100_000  # entries of a list or mapping (ops, kernels, layouts, metrics)
MAX_COUNT = 2**62  # launches, calls, bytes, threads
_ENVELOPE = frozenset({"status", "nonce"})  # the channel's own fields (wire.py) and the kind


class MalformedReply(ValueError):
    """A reply that is not one of the declared kinds, or a field that does not fit its kind: one sentence."""


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
        raise MalformedReply(f"a reply without a status ({_shown(status)})")
    reader = _PARSERS.get(status)
    if reader is None and status not in FAILURES:
        raise MalformedReply(f"a reply of unknown status {_shown(status)}")
    f = _Fields(status, header)
    reply: Reply = reader(f) if reader is not None else Failed(Status(status), f.text("reason", MAX_REASON_CHARS),
                                                                   f.text("log", MAX_LOG_CHARS))
    f.done()
    return reply


def kind_name(kind: type[Any]) -> str:
    """A reply kind's status as it travels (for sentences about a reply that was not the one expected)."""
    return str(getattr(kind, "STATUS", kind.__name__))


def status_of(reply: Reply) -> str:
    return reply.status.value if isinstance(reply, Failed) else reply.STATUS


def _shown(value: object) -> str:
    return repr(value)[:40]


class _Fields:
    """The fields of one header, each read once by type; `done` refuses any left unread."""

    def __init__(self, status: str, header: Mapping[str, Any]):
        self.status, self.header = status, header
        self.unread = set(header) - _ENVELOPE

    def _take(self, name: str) -> Any:
        self.unread.discard(name)
        return self.header.get(name)

    def _bad(self, name: str, what: str) -> MalformedReply:
        return MalformedReply(f"a {self.status!r} reply whose {name!r} is {what}")

    def done(self) -> None:
        if self.unread:
            raise MalformedReply(f"a {self.status!r} reply with unknown field {_shown(sorted(self.unread)[0])}")

    def count(self, name: str, default: int | None = None, required: bool = False) -> int | None:
        if name not in self.header and required:
            raise self._bad(name, "missing")
        value = self._take(name)
        if value is None and not required:
            return default
        return self._int(name, value)

    def required_count(self, name: str) -> int:
        value = self.count(name, required=True)
        assert value is not None
        return value

    def _int(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise self._bad(name, f"not a count ({_shown(value)})")
        return value

    def ms(self, name: str, default: float | None = None) -> float:
        if name not in self.header and default is None:
            raise self._bad(name, "missing")
        value = self._take(name)
        if value is None and default is not None:
            return default
        return self._finite(name, value)

    def _finite(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._bad(name, f"not a finite number ({_shown(value)})")
        return float(value)

    def flag(self, name: str) -> bool:
        value = self._take(name)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._bad(name, f"not true or false ({_shown(value)})")
        return value

    def text(self, name: str, limit: int) -> str:
        value = self._take(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._bad(name, f"not a string ({_shown(value)})")
        if len(value) > limit:
            raise self._bad(name, f"longer than {limit} characters ({len(value)})")
        return value

    def _list(self, name: str, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise self._bad(name, f"not a list ({_shown(value)})")
        if len(value) > MAX_ITEMS:
            raise self._bad(name, f"a list of more than {MAX_ITEMS} entries")
        return value

    def _name(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
            raise self._bad(name, f"not a list of names of at most {MAX_NAME_CHARS} characters ({_shown(value)})")
        return value

    def names(self, name: str) -> tuple[str, ...] | None:
        value = self._take(name)
        return None if value is None else tuple(self._name(name, v) for v in self._list(name, value))

    def records(self, name: str) -> tuple[Mapping[str, Any], ...] | None:
        """A list of JSON objects (layouts, descriptions), each judged by its own reader."""
        value = self._take(name)
        if value is None:
            return None
        items = self._list(name, value)
        if not all(isinstance(v, dict) for v in items):
            raise self._bad(name, "not a list of objects")
        return tuple(items)

    def _mapping(self, name: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self._bad(name, f"not an object ({_shown(value)})")
        if len(value) > MAX_ITEMS:
            raise self._bad(name, f"an object of more than {MAX_ITEMS} entries")
        for k in value:
            self._name(name, k)
        return value

    def record(self, name: str) -> Mapping[str, Any] | None:
        value = self._take(name)
        return None if value is None else self._mapping(name, value)

    def counts(self, name: str) -> dict[str, int] | None:
        value = self._take(name)
        return None if value is None else {k: self._int(name, v) for k, v in self._mapping(name, value).items()}

    def numbers(self, name: str) -> dict[str, float] | None:
        value = self._take(name)
        return None if value is None else {k: self._finite(name, v) for k, v in self._mapping(name, value).items()}

    def labels(self, name: str) -> dict[str, str] | None:
        value = self._take(name)
        return None if value is None else self.label_map(name, value)

    def label_map(self, name: str, value: Any) -> dict[str, str]:
        return {k: self._name(name, v) for k, v in self._mapping(name, value).items()}


def _ready(f: _Fields) -> Ready:
    overrides = f._take("variant_overrides")
    return Ready(variants=f.required_count("variants"), threads=f.count("threads"), sizes=f.records("sizes"),
                 variant_overrides=None if overrides is None else tuple(
                     f.label_map("variant_overrides", v) for v in f._list("variant_overrides", overrides)),
                 tolerance=f.numbers("tolerance"), interpreter_shape=f.labels("interpreter_shape"))


def _build(f: _Fields) -> BuildRequest:
    spec = f.record("spec")
    if spec is None:
        raise f._bad("spec", "missing")
    kind = f._take("kind")
    if kind is None:
        kind = BuildKind.CUDA.value
    if not isinstance(kind, str) or kind not in BuildKind._value2member_map_:
        raise f._bad("kind", f"not a kind of build ({_shown(kind)})")
    return BuildRequest(spec=spec, kind=BuildKind(kind), threads=f.count("threads"))


def _ran(f: _Fields) -> Ran:
    return Ran(ops=f.names("ops") or (), outputs=f.records("outputs") or (), inputs=f.records("inputs"),
               probe=f.record("probe"), notes=f.names("notes") or (), peak_memory_bytes=f.count("peak_memory_bytes"),
               launches=f.count("launches", 0) or 0, kernels=f.counts("kernels") or {},
               torch_work=f.count("torch_work"), torch_ops=f.names("torch_ops"))


def _rep(f: _Fields) -> Rep:
    ms = f.ms("ms")
    if ms < 0:
        raise f._bad("ms", f"negative ({ms:g})")
    return Rep(ms=ms, outputs=f._take("outputs"), direct=f.flag("direct"))


def _timed(f: _Fields) -> Timed:
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
