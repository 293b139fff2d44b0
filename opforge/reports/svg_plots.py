"""Small inline SVG charts for HTML reports, drawn by hand: no plotting library, no script, nothing fetched.

Each chart function returns one `<svg>` element as a string, every text in it escaped, ready to be placed in an HTML
page as it is. Log axes take positive values only (others are left out); a chart with nothing to draw says so inside
its frame. Points carry a label that becomes their hover tooltip (an SVG `<title>`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import NamedTuple

WIDTH, HEIGHT = 720, 320
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 30, 46
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#7F7F00", "#000000")
STATUS_COLOURS = {"ok": "#009E73", "incorrect": "#E69F00", "compile_error": "#D55E00", "runtime_error": "#CC79A7",
                  "timeout": "#56B4E9", "rejected": "#000000", "crashed": "#7F7F7F", "pending": "#BBBBBB"}
FAILED_STRIP = 18  # pixels under a progress chart's frame for evaluations without a speedup


class Point(NamedTuple):
    x: float
    y: float | None
    label: str = ""
    category: str = ""


def _num(v: float) -> str:
    return f"{v:.1f}"


def _text(x: float, y: float, text: str, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def format_tick(v: float, unit: str = "") -> str:
    """A tick label: 0.001x, 0.5x, 10x, 1e+06x."""
    return f"{v:.3g}{unit}" if abs(v) < 1e5 else f"{v:.0e}{unit}"


def _usable(v: float | None, log: bool) -> bool:
    return v is not None and math.isfinite(v) and (v > 0 or not log)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks for a log axis over [lo, hi] (0 < lo <= hi): decades, with 2 and 5 (or more) when they are few."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mantissas in ((1.0,), (1.0, 2.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)):
        ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in mantissas]
        ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(ticks) >= 3:
            break
    if len(ticks) < 2:  # narrower than a factor of 1.5: round numbers on a linear spacing read fine
        ticks = linear_ticks(lo, hi)
    step = max(1, math.ceil(len(ticks) / 10))
    return ticks[::step]


def linear_ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """Ticks at round numbers (1, 2 or 5 times a power of ten) inside [lo, hi], about `count` of them."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    if integer:
        raw = max(raw, 1.0)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.ceil(lo / step - 1e-9) * step
    return [round(start + i * step, 12) for i in range(int((hi - start) / step + 1e-9) + 1)]


def log_bins(values: Sequence[float]) -> list[float]:
    """Bin edges for a histogram on a log axis: aligned to a power-of-two fraction of a decade, 5 to 30 bins."""
    xs = [v for v in values if _usable(v, True)]
    if not xs:
        return []
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    per_decade = 4
    while per_decade < 16 and (hi - lo) * per_decade < 5:
        per_decade *= 2
    while per_decade > 1 and (hi - lo) * per_decade > 30:
        per_decade //= 2
    first, last = math.floor(lo * per_decade), math.ceil(hi * per_decade)
    if last == first or last * 1.0 / per_decade == hi:  # a value on the top edge gets a bin of its own
        last += 1
    return [10.0 ** (k / per_decade) for k in range(first, last + 1)]


@dataclass(frozen=True, slots=True)
class Scale:
    lo: float
    hi: float
    px_lo: float
    px_hi: float
    log: bool = False
    integer: bool = False  # linear ticks at whole numbers only (counts, evaluation numbers)

    @staticmethod
    def fit(values: Sequence[float], px_lo: float, px_hi: float, log: bool, include: Sequence[float] = (),
            integer: bool = False) -> Scale:
        xs = [v for v in (*values, *include) if _usable(v, log)]
        if not xs:
            lo, hi = (0.1, 10.0) if log else (0.0, 1.0)
        else:
            lo, hi = min(xs), max(xs)
        if log:
            lo, hi = (lo / 2, hi * 2) if hi / lo < 2 else (lo / 1.3, hi * 1.3)
        else:
            pad = (hi - lo) * 0.08 or abs(hi) * 0.5 or 1.0
            lo, hi = (0.0 if lo >= 0 and lo - pad < 0 else lo - pad), hi + pad
        return Scale(lo, hi, px_lo, px_hi, log, integer)

    def __call__(self, v: float) -> float:
        if self.log:
            t = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            t = (v - self.lo) / (self.hi - self.lo)
        return self.px_lo + t * (self.px_hi - self.px_lo)

    def ticks(self) -> list[float]:
        return log_ticks(self.lo, self.hi) if self.log else linear_ticks(self.lo, self.hi, integer=self.integer)


class _Chart:
    """One frame: a plot area with axes, ticks and labels; marks are appended as SVG strings."""

    def __init__(self, title: str, width: int = WIDTH, height: int = HEIGHT, bottom: int = MARGIN_BOTTOM) -> None:
        self.title, self.width, self.height = title, width, height
        self.left, self.right = MARGIN_LEFT, width - MARGIN_RIGHT
        self.top, self.bottom = MARGIN_TOP, height - bottom
        self.parts: list[str] = []

    def axes(self, x: Scale | None, y: Scale, x_label: str, y_label: str, x_unit: str = "", y_unit: str = "") -> None:
        p = self.parts
        for t in y.ticks():
            py = y(t)
            p.append(f'<line class="grid" x1="{self.left}" x2="{self.right}" y1="{_num(py)}" y2="{_num(py)}" '
                     f'stroke="#ddd"/>')
            p.append(_text(self.left - 6, py + 4, format_tick(t, y_unit), "end"))
        if x is not None:
            for t in x.ticks():
                px = x(t)
                p.append(f'<line class="tick" x1="{_num(px)}" x2="{_num(px)}" y1="{self.bottom}" '
                         f'y2="{self.bottom + 5}" stroke="#444"/>')
                p.append(_text(px, self.bottom + 17, format_tick(t, x_unit)))
        p.append(self._frame())
        if x_label:
            p.append(_text((self.left + self.right) / 2, self.height - 8, x_label))
        cy = (self.top + self.bottom) / 2
        p.append(_text(14, cy, y_label, extra=f' transform="rotate(-90 14 {_num(cy)})"'))

    def _frame(self) -> str:
        return (f'<rect class="frame" x="{self.left}" y="{self.top}" width="{self.right - self.left}" '
                f'height="{self.bottom - self.top}" fill="none" stroke="#444"/>')

    def reference(self, y: Scale, value: float, label: str) -> None:
        if y.lo <= value <= y.hi:
            py = _num(y(value))
            self.parts.append(f'<line class="ref" x1="{self.left}" x2="{self.right}" y1="{py}" y2="{py}" '
                              f'stroke="#888" stroke-dasharray="5 4"/>')
            label_y = float(py) - 4 if float(py) - 4 > self.top + 12 else float(py) + 13  # inside the frame
            self.parts.append(_text(self.right - 4, label_y, label, "end", ' class="reflabel"'))

    def legend(self, entries: Sequence[tuple[str, str]]) -> None:
        x = self.left
        for name, colour in entries:
            name = name if len(name) <= 40 else name[:39] + "…"
            self.parts.append(f'<rect x="{x}" y="9" width="10" height="10" fill="{colour}"/>')
            self.parts.append(_text(x + 14, 18, name, "start"))
            x += 24 + 7 * len(name)

    def empty(self, message: str) -> None:
        self.parts.append(self._frame())
        self.parts.append(_text((self.left + self.right) / 2, (self.top + self.bottom) / 2, message))

    def svg(self) -> str:
        return (f'<svg class="chart" viewBox="0 0 {self.width} {self.height}" width="{self.width}" '
                f'height="{self.height}" role="img" aria-label="{escape(self.title)}"><title>{escape(self.title)}'
                f'</title>{"".join(self.parts)}</svg>')


def _dot(x: float, y: float, colour: str, label: str, r: float = 4.0, cls: str = "dot") -> str:
    tip = f"<title>{escape(label)}</title>" if label else ""
    ring = ' stroke="#333" stroke-width="1.5"' if cls == "ring" else ""
    return f'<circle class="{cls}" cx="{_num(x)}" cy="{_num(y)}" r="{r}" fill="{colour}"{ring}>{tip}</circle>'


def progress_chart(points: Sequence[Point], *, title: str = "search progress", y_label: str = "speedup",
                   reference: float | None = 1.0) -> str:
    """Each evaluation (x: its number) as a dot coloured by its category (a status), and the best y so far as a
    step line; evaluations without a y (failures) sit in a strip under the frame."""
    chart = _Chart(title, bottom=MARGIN_BOTTOM + FAILED_STRIP)
    if not points:
        chart.empty("no evaluations yet")
        return chart.svg()
    x = Scale.fit([p.x for p in points], chart.left + 8, chart.right - 8, False, integer=True)
    y = Scale.fit([p.y for p in points if p.y is not None], chart.bottom, chart.top, True,
                  include=() if reference is None else (reference,))
    chart.axes(None, y, "", y_label, y_unit="x")
    for t in x.ticks():
        chart.parts.append(_text(x(t), chart.bottom + FAILED_STRIP + 17, format_tick(t)))
    chart.parts.append(_text((chart.left + chart.right) / 2, chart.height - 8, "evaluation number"))
    strip_y = chart.bottom + FAILED_STRIP / 2
    chart.parts.append(_text(chart.left - 6, strip_y + 4, "failed", "end"))
    if reference is not None:
        chart.reference(y, reference, f"{format_tick(reference)}x")
    best: float | None = None
    steps: list[str] = []
    for p in sorted(points, key=lambda p: p.x):
        if _usable(p.y, True) and (best is None or p.y > best):
            if best is not None:
                steps.append(f"{_num(x(p.x))},{_num(y(best))}")
            best = p.y
            steps.append(f"{_num(x(p.x))},{_num(y(best))}")
    if best is not None:
        steps.append(f"{_num(x(max(p.x for p in points)))},{_num(y(best))}")
        chart.parts.append(f'<polyline class="best" points="{" ".join(steps)}" fill="none" stroke="#333" '
                           f'stroke-width="1.5"/>')
    for p in points:
        colour = STATUS_COLOURS.get(p.category, PALETTE[-1])
        py = y(p.y) if _usable(p.y, True) else strip_y
        chart.parts.append(_dot(x(p.x), py, colour, p.label))
    seen = list(dict.fromkeys(p.category for p in points))
    chart.legend([(c or "?", STATUS_COLOURS.get(c, PALETTE[-1])) for c in seen] + [("best so far", "#333333")])
    return chart.svg()


def _bin_counts(values: Sequence[float], edges: Sequence[float]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for v in values:  # clamped, so that a value on an outer edge is never lost to rounding
        counts[min(max(bisect_right(edges, v) - 1, 0), len(counts) - 1)] += 1
    return counts


def histogram(series: Mapping[str, Sequence[float]], *, title: str = "distribution", x_label: str = "speedup",
              x_unit: str = "x", reference: float | None = 1.0) -> str:
    """Counts of positive values in log-spaced bins, one bar colour per series (side by side within a bin)."""
    chart = _Chart(title)
    data = {name: [v for v in vs if _usable(v, True)] for name, vs in series.items()}
    edges = log_bins([v for vs in data.values() for v in vs])
    if not edges:
        chart.empty("no values to count")
        return chart.svg()
    counts = {name: _bin_counts(vs, edges) for name, vs in data.items()}
    step = edges[1] / edges[0]  # one empty bin of margin on each side
    x = Scale(edges[0] / step, edges[-1] * step, chart.left, chart.right, True)
    y = Scale(0.0, max(max(c) for c in counts.values()) * 1.15, chart.bottom, chart.top, integer=True)
    chart.axes(x, y, x_label, "count", x_unit=x_unit)
    for s, (name, cs) in enumerate(counts.items()):
        colour = PALETTE[s % len(PALETTE)]
        for (a, b), n in zip(zip(edges, edges[1:]), cs):
            if not n:
                continue
            w = (x(b) - x(a)) / len(counts)
            x0 = x(a) + s * w
            tip = f"{name}: {n} in [{format_tick(a, x_unit)}, {format_tick(b, x_unit)})"
            chart.parts.append(f'<rect class="bar" x="{_num(x0 + 0.5)}" y="{_num(y(n))}" width="{_num(w - 1)}" '
                               f'height="{_num(y(0) - y(n))}" fill="{colour}"><title>{escape(tip)}</title></rect>')
    if reference is not None and x.lo <= reference <= x.hi:
        px = _num(x(reference))
        chart.parts.append(f'<line class="ref" x1="{px}" x2="{px}" y1="{chart.top}" y2="{chart.bottom}" '
                           f'stroke="#888" stroke-dasharray="5 4"/>')
        chart.parts.append(_text(float(px) + 4, chart.top + 12, f"{format_tick(reference)}{x_unit}", "start",
                                 ' class="reflabel"'))
    if len(counts) > 1:
        chart.legend([(name, PALETTE[i % len(PALETTE)]) for i, name in enumerate(counts)])
    return chart.svg()


def scatter(series: Mapping[str, Sequence[Point]], *, title: str, x_label: str, y_label: str, log_x: bool = False,
            log_y: bool = True, x_unit: str = "", y_unit: str = "x", front: Sequence[tuple[float, float]] = (),
            reference: float | None = 1.0) -> str:
    """Dots per series; `front` (x, y pairs) is drawn as a line through ringed points."""
    chart = _Chart(title)
    data = {n: [p for p in ps if _usable(p.x, log_x) and _usable(p.y, log_y)] for n, ps in series.items()}
    points = [p for ps in data.values() for p in ps]
    if not points:
        chart.empty("no points to draw")
        return chart.svg()
    x = Scale.fit([p.x for p in points], chart.left, chart.right, log_x)
    y = Scale.fit([p.y for p in points], chart.bottom, chart.top, log_y, include=() if reference is None else
                  (reference,))
    chart.axes(x, y, x_label, y_label, x_unit=x_unit, y_unit=y_unit)
    if reference is not None:
        chart.reference(y, reference, f"{format_tick(reference)}{y_unit}")
    line = sorted((fx, fy) for fx, fy in front if _usable(fx, log_x) and _usable(fy, log_y))
    if line:
        steps = " ".join(f"{_num(x(a))},{_num(y(b))}" for a, b in line)
        chart.parts.append(f'<polyline class="front" points="{steps}" fill="none" stroke="#333" '
                           f'stroke-width="1.5"/>')
        chart.parts += [_dot(x(a), y(b), "none", "", r=7, cls="ring") for a, b in line]
    for s, ps in enumerate(data.values()):
        chart.parts += [_dot(x(p.x), y(p.y), PALETTE[s % len(PALETTE)], p.label) for p in ps]
    entries = [(n, PALETTE[i % len(PALETTE)]) for i, n in enumerate(data)]
    chart.legend((entries if len(entries) > 1 else []) + ([("Pareto front", "#333333")] if line else []))
    return chart.svg()


def grouped_bars(categories: Sequence[str], series: Mapping[str, Sequence[float | None]], *, title: str,
                 y_label: str = "speedup", y_unit: str = "x", baseline: float = 1.0, missing: str = "no value") -> str:
    """One group per category, one bar per series, on a log y axis, each bar drawn from `baseline` (up: above it)
    to its value; a missing value is an x on the baseline."""
    n_series = max(len(series), 1)
    plot_px = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    group_px = max(18.0, 10.0 * n_series + 8, plot_px / max(len(categories), 1))
    width = max(WIDTH, round(MARGIN_LEFT + MARGIN_RIGHT + group_px * len(categories)))
    label_px = round(min(max((len(c) for c in categories), default=0), 40) * 4.5)  # labels at 45 degrees
    chart = _Chart(title, width=width, height=HEIGHT - MARGIN_BOTTOM + 24 + label_px, bottom=24 + label_px)
    values = [v for vs in series.values() for v in vs if _usable(v, True)]
    if not categories or not series:
        chart.empty("nothing to compare")
        return chart.svg()
    y = Scale.fit(values, chart.bottom, chart.top, True, include=(baseline,))
    chart.axes(None, y, "", y_label, y_unit=y_unit)
    chart.reference(y, baseline, f"{format_tick(baseline)}{y_unit}")
    bar = min((group_px - 8) / n_series, 28.0)
    for i, cat in enumerate(categories):
        gx = chart.left + i * group_px + (group_px - bar * n_series) / 2
        for s, (name, vs) in enumerate(series.items()):
            v = vs[i] if i < len(vs) else None
            bx, colour = gx + s * bar, PALETTE[s % len(PALETTE)]
            if not _usable(v, True):
                tip = escape(f"{cat} · {name}: {missing}")
                chart.parts.append(f'<text class="miss" x="{_num(bx + bar / 2)}" y="{_num(y(baseline) + 4)}" '
                                   f'text-anchor="middle" fill="{colour}"><title>{tip}</title>×</text>')
                continue
            top, bottom = sorted((y(v), y(baseline)))
            tip = f"{cat} · {name}: {format_tick(v, y_unit)}"
            chart.parts.append(f'<rect class="bar" x="{_num(bx)}" y="{_num(top)}" width="{_num(max(bar - 1, 1))}" '
                               f'height="{_num(max(bottom - top, 1))}" fill="{colour}"><title>{escape(tip)}</title>'
                               f'</rect>')
        cx, cy = gx + bar * n_series / 2, chart.bottom + 10
        chart.parts.append(_text(cx, cy, cat, "end", f' transform="rotate(-45 {_num(cx)} {_num(cy)})"'))
    chart.legend([(n, PALETTE[i % len(PALETTE)]) for i, n in enumerate(series)])
    return chart.svg()
