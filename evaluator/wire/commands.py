"""The driver's commands to a worker, declared once: each is a frozen dataclass with its fields, `to_wire()` for the
socket and `parse(header)` on the worker's side, which refuses an unknown command or field by name.

The driver sends them (`evaluate.py`, `trials.py`, `measure/blocks.py`, `energy_loops.py`, `degenerate_probes.py`,
`gpu_memory.py`, `cpu_memory.py`, `build/stage.py`) and the worker (`worker/loop.py`) dispatches on `NAME` to its `cmd_<NAME>` method. The
worker's replies are declared in `wire/replies.py`, whose parse treats every field as hostile.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, TypeVar, Union

from evaluator.wire.build_verdict import BuildVerdict


class UnknownCommand(ValueError):
    """A header that names no declared command, or a field the command does not have (a bug of the driver)."""


class _Wire:
    __slots__ = ()
    NAME: ClassVar[str]

    def to_wire(self) -> dict[str, Any]:
        return {"cmd": self.NAME, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Load(_Wire):
    """Load the task (both roles) and, in the candidate's worker, import the candidate. `init_seeds`: one per shape
    variant. `builds`: ask the driver for each load_inline/load_c build (`build/stage.py`); `collect`: record the
    builds only (the ahead-of-time build stage). `copy_grants`: the store ledger's copy grants around each watched
    call (the driver's `backend.names_triton`, sent alike to both roles, which pay the same watch). `harness_library`:
    the harness's native library (base64; `harness_library.py`: the fast draws and the line flush), the same bytes to
    both roles, or None: PyTorch draws, and cold calls are evicted by reading a buffer."""

    NAME: ClassVar[str] = "load"
    task_source: str
    task_name: str
    device: str
    init_seeds: tuple[int, ...]
    interpreter_shape: bool = False
    candidate_source: str | None = None
    require_kernels: bool = False
    compile: bool = False
    builds: bool = False
    build_mode: str = "check"
    collect: bool = False
    copy_grants: bool = True
    torch_glue: bool = False  # the rule for PyTorch inside a candidate (torch_rule.py); False: kernels only
    harness_library: str | None = None
    size_task: bool = False  # the reference's worker: size every variant on the meta device (task_size.py)


@dataclass(frozen=True, slots=True)
class Run(_Wire):
    """One correctness call on fresh inputs from `seed`, outputs sent back. `distribution`: task | normal | large |
    perturbed, at `scale` where it has one. `prime_seed`: call once on those inputs first (`reuse_tensors`: then
    refill the same tensors). The degenerate-task probes (reference only): `init_seed` builds the model from other
    weights, `fresh_input` redraws one input from `fresh_seed`, `exact` runs the float64 reference."""

    NAME: ClassVar[str] = "run"
    variant: int
    seed: int
    distribution: str = "task"
    scale: float | None = None  # None: the distribution's own
    trace: bool = False
    describe_inputs: bool = False
    prime_seed: int | None = None
    reuse_tensors: bool = False
    init_seed: int | None = None
    fresh_input: int | None = None
    fresh_seed: int | None = None
    exact: bool = False  # reference only: the forward in float64 on the same inputs in float64 (exact_reference.py)


@dataclass(frozen=True, slots=True)
class Time(_Wire):
    """A block of timed calls, the first on inputs from `seed`; each call is followed by the driver's `NextCall`."""

    NAME: ClassVar[str] = "time"
    variant: int
    seed: int
    warmup_ms: float = 0.0
    shared_inputs: bool = False  # each call's inputs from the shared input file, laid out in its `go` (input_file.py)
    direct_outputs: bool = False  # name each call's outputs where they lie in memory, no copy (output_slot.py)


@dataclass(frozen=True, slots=True)
class NextCall(_Wire):
    """The driver's word after each timed call, sent once it has read the call's outputs where it picked them (the
    worker is not told which): time another on `next_seed` or end the block (None), and at the end whether to
    compare the whole dispatch table (`check`)."""

    NAME: ClassVar[str] = "next"
    next_seed: int | None
    check: bool = False


@dataclass(frozen=True, slots=True)
class Go(_Wire):
    """The driver's word to make a timed call whose inputs are drawn (the worker said `armed`): its clock for the
    call starts when it sends this and stops at the call's reply (`clock_checks._cross_check`)."""

    NAME: ClassVar[str] = "go"
    inputs: tuple[dict[str, Any], ...] | None = None  # with shared inputs: where the call's inputs lie in the file


@dataclass(frozen=True, slots=True)
class Draw(_Wire):
    """The reference's worker only: draw the inputs of `seed` and copy them into the shared input file, for a
    candidate's timed call (`input_file.py`); the reply's `inputs` says where they lie (None: the file cannot carry
    them)."""

    NAME: ClassVar[str] = "draw"
    variant: int
    seed: int


@dataclass(frozen=True, slots=True)
class Loop(_Wire):
    """Back-to-back calls on one set of inputs for at least `seconds` (the energy meter's loop)."""

    NAME: ClassVar[str] = "loop"
    variant: int
    seed: int
    seconds: float


@dataclass(frozen=True, slots=True)
class MemoryCalls(_Wire):
    """A warm-up call, then `calls` calls on one set of inputs, each announced (`armed`) and made on the driver's
    `Go`, whose process's peak resident set the driver reads around each (`cpu_memory.py`)."""

    NAME: ClassVar[str] = "memory"
    variant: int
    seed: int
    calls: int


@dataclass(frozen=True, slots=True)
class Clock(_Wire):
    """The worker's timer clock, read now (`clock_checks.CandidateClock` asks around each of the reference's blocks)."""

    NAME: ClassVar[str] = "clock"


@dataclass(frozen=True, slots=True)
class Check(_Wire):
    """The costlier checks on their own, the dispatch table included."""

    NAME: ClassVar[str] = "check"


@dataclass(frozen=True, slots=True)
class Batch(_Wire):
    """Inputs for every seed, then (with `calls`) one call on each: the driver times the round trip."""

    NAME: ClassVar[str] = "batch"
    variant: int
    seeds: tuple[int, ...]
    calls: bool


@dataclass(frozen=True, slots=True)
class Profile(_Wire):
    """The PyTorch profiler's table for one call on inputs from `seed`."""

    NAME: ClassVar[str] = "profile"
    seed: int


@dataclass(frozen=True, slots=True)
class Exit(_Wire):
    NAME: ClassVar[str] = "exit"


@dataclass(frozen=True, slots=True)
class Built(_Wire):
    """The driver's answer to a worker's build request (`build/stage.py`): `verdict` is the build's status (or
    skipped: build privately; refused; timeout), the library's bytes travel as the frame's tensor."""

    NAME: ClassVar[str] = "built"
    verdict: BuildVerdict
    log: str = ""
    key: str | None = None
    cached: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", BuildVerdict(self.verdict))  # a ValueError names one outside the list


Command = Union[Load, Run, Time, NextCall, Go, Draw, Loop, MemoryCalls, Clock, Check, Batch, Profile, Exit, Built]
_BY_NAME: Mapping[str, type[Any]] = {c.NAME: c for c in (Load, Run, Time, NextCall, Go, Draw, Loop, MemoryCalls, Clock,
                                                         Check, Batch, Profile, Exit, Built)}
_ENVELOPE = ("cmd", "nonce")  # the channel's own fields (wire.py)


def parse(header: Mapping[str, Any]) -> Command:
    """The command a header carries; `UnknownCommand` names what does not fit."""
    name = header.get("cmd")
    cls = _BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        raise UnknownCommand(f"unknown command {name!r}")
    body = {k: tuple(v) if isinstance(v, list) else v for k, v in header.items() if k not in _ENVELOPE}
    try:
        return cls(**body)
    except (TypeError, ValueError) as exc:
        raise UnknownCommand(f"command {name!r}: {exc}") from None


_C = TypeVar("_C", bound="_Wire")


def parse_as(header: Mapping[str, Any], kind: type[_C], what: str) -> _C:
    """The command a header carries, which must be a `kind` (`what` names it in the error)."""
    cmd = parse(header)
    if not isinstance(cmd, kind):
        raise ValueError(f"expected {what}, got {cmd.NAME!r}")
    return cmd
