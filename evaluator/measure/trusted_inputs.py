"""The driver's side of timed calls' inputs on a CPU: drawn by the reference's worker into the shared input file,
flushed from the caches by the driver, handed to either side with its `go` (`input_file.py` says why).

`TrustedInputs.armed` turns a worker's `armed` into the layout its `go` carries: the reference's worker drew its own
call's inputs before saying `armed`; for a candidate's call the driver asks the reference's worker to draw them now
(`Draw`), while it reads the candidate's CPU by the kernel's accounting around that draw (a worker waiting for its
`go` has nothing to run: `clock_checks.QuietWindow`). Then the driver flushes the inputs' lines through its own
mapping, where the call is a cold one, the same for both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from evaluator.measure.clock_checks import QuietWindow
from evaluator.wire.commands import Draw
from evaluator.driver.connection import Refused, WorkerConnection
from evaluator.wire.input_file import DriverInputs
from evaluator.result import Status
from evaluator.wire.frames import ProtocolError
from evaluator.wire.replies import Armed, Drawn

DRAWING_WHAT = ("the candidate's process worked while the reference's worker drew its next timed call's inputs and "
                "the driver flushed them (before the call's `go`: work on inputs it had not been given yet)")


@dataclass
class TrustedInputs:
    """One evaluation's shared inputs. `quiet`: the candidate's CPU while its inputs are drawn (None where the
    driver cannot read it); `cold_from_bytes`: inputs from this size on are flushed before the call (the timer's
    bound, `timing.cpu_cold_from_bytes`)."""

    file: DriverInputs
    reference: WorkerConnection
    cold_from_bytes: int
    timeout_s: float
    quiet: QuietWindow | None = None
    drawn: int = field(default=0)

    def available(self, variant: int, seed: int) -> bool:
        """Whether the file can carry this task's inputs (asked once, before timing: a draw of `seed`)."""
        reply, _ = self.reference.request_as(Draw(variant=variant, seed=seed), Drawn, self.timeout_s,
                                             "drawing a timed call's inputs")
        return reply.inputs is not None

    def armed(self, role: str, armed: Armed, variant: int, seed: int, last_call_ms: float) -> list[Any]:
        """The layout for the `go` of a call whose worker said `armed` (the reference's carries its own draw)."""
        if role == "reference":
            raw = armed.inputs
        else:
            got: dict[str, Any] = {}

            def draw() -> None:
                reply, _ = self.reference.request_as(Draw(variant=variant, seed=seed), Drawn, self.timeout_s,
                                                     "drawing the candidate's timed call's inputs")
                got["raw"] = reply.inputs
                self._flush(got["raw"])
            if self.quiet is not None:
                self.quiet.around(draw, last_call_ms)
            else:
                draw()
            return list(got["raw"] or ())
        self._flush(raw)
        return list(raw or ())

    def _flush(self, raw: object) -> None:
        if raw is None:  # the reference's own worker could carry them at `available`: a bug, not a verdict
            raise Refused(Status.INFRA_FAILED, "the reference's worker could not put a timed call's inputs in the "
                                                "shared input file it had carried before")
        try:
            layout = self.file.layout(raw)
        except ProtocolError as exc:
            raise Refused(Status.INFRA_FAILED, f"the reference's worker laid out its inputs wrongly: {exc}") from None
        if sum(s.nbytes for s in layout.tensor_spans()) >= self.cold_from_bytes:
            self.file.flush(layout)
        self.drawn += 1

    def refuse_busy(self) -> None:
        if self.quiet is not None:
            self.quiet.refuse_busy()


def quiet_while_drawing(read_cpu_ns: Callable[[], int | None]) -> QuietWindow:
    return QuietWindow(read_cpu_ns, what=DRAWING_WHAT)
