"""A run's live progress on stderr: one line rewritten in place on a terminal, one plain line per result otherwise."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TextIO

from opforge.display import format_speedup
from opforge.run.search import Progress

CLEAR_LINE = "\r\x1b[K"


def failures_text(by_status: Mapping[str, int]) -> str:
    counts = {k: v for k, v in by_status.items() if k != "ok" and v}
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"


def progress_line(p: Progress) -> str:
    parts = [f"run {p.run_id}: {p.done}/{p.budget} evaluated", f"{p.in_flight} running",
             f"best {format_speedup(p.best_speedup)}", f"failures {failures_text(p.by_status)}"]
    if p.faults:
        parts.append(f"{p.faults} lost to the workers, retried")
    if p.usd is not None:
        parts.append(f"LLM ${p.usd:.4f}, {format_tokens(p.tokens or 0)} tok")
    parts.append(f"{p.elapsed_s:.0f} s" + (f", about {format_duration(p.left_s)} left" if p.left_s is not None
                                           and p.event != "stop" else ""))
    return " | ".join(parts)


def format_duration(seconds: float) -> str:
    """`42 s`, `7 min`, `2.5 h`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def format_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def last_text(p: Progress) -> str:
    if p.event == "fault":
        return f"an evaluation was lost ({p.note}); it is queued again"
    if p.event in ("notice", "stalled"):
        return p.note
    m = p.last
    if m is None:
        return ""
    if p.event == "confirm":
        return f"re-measured #{m.candidate_id}: {m.status} {format_speedup(m.speedup)}"
    return f"#{m.candidate_id} {m.status} {format_speedup(m.speedup)} ({m.candidate.note or m.candidate.origin})"


class ProgressPrinter:
    def __init__(self, stream: TextIO | None = None, tty: bool | None = None, note: str = "") -> None:
        """`note`: one sentence said once, above the live line (e.g. that Triton on a CPU is interpreted)."""
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._drawn = False
        self._last = ""
        self._note = note

    def __call__(self, p: Progress) -> None:
        if self._note:
            self.stream.write(f"opforge: note: {self._note}\n")
            self._note = ""
        self._last = last_text(p) or self._last
        line = progress_line(p) + (f" | last {self._last}" if self._last else "")
        if self.tty:
            end = "\n" if p.event == "stop" else ""
            self.stream.write(CLEAR_LINE + line[:160] + end)
            self._drawn = not end
        elif p.event in ("start", "result", "fault", "notice", "stalled", "confirm"):
            self.stream.write(line + "\n")
        else:
            return
        self.stream.flush()

    def finish(self) -> None:
        """End a half-drawn line (after an error or an interrupt)."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
