"""The end-to-end figure: eager, torch.compile, patched and patched + torch.compile on fresh inputs.

Every variant is checked first: its output on fresh inputs must match eager's within the loosest tolerance of the
swapped operators' tasks (manifest.json), else the bench stops with the difference. Timed rounds interleave the
variants (one forward each per round, a fresh input drawn before each) and report medians. Per group, the time of its
modules in eager and in the patched model (forward hooks, as the profile takes them) gives the time each swap
removed. `html()` renders the figures, the per-group breakdown and a bar chart as one page.
"""

from __future__ import annotations

import copy
import html as html_escape
import importlib
import json
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from opforge.model.groups import candidate_groups, capture
from opforge.model.loading import LoadedModel
from opforge.model.profiling import device_label


@dataclass
class Figures:
    model: str
    device: str
    package: str
    atol: float
    rtol: float
    times_ms: dict[str, float]
    max_error: dict[str, float]
    groups: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def speedup(self, variant: str) -> float:
        return self.times_ms["eager"] / self.times_ms[variant]

    def text(self) -> str:
        """The figures as lines for a terminal: each variant, each swapped group, the notes."""
        lines = [f"{self.model} on {self.device}"]
        for name, ms in self.times_ms.items():
            lines.append(f"  {name:<16} {ms:8.2f} ms  {self.speedup(name):5.2f}x over eager  max abs error "
                         f"{self.max_error[name]:.2e}")
        for g in self.groups:
            lines.append(f"  {g['operator']:<20} eager {g['eager_ms']:.2f} ms -> patched {g['patched_ms']:.2f} ms "
                         f"({share_text(g['removed_share'])})")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "device": self.device, "package": self.package,
                "tolerance": {"atol": self.atol, "rtol": self.rtol},
                "times_ms": {k: round(v, 3) for k, v in self.times_ms.items()},
                "speedup_over_eager": {k: round(self.speedup(k), 3) for k in self.times_ms},
                "max_abs_error": self.max_error, "groups": self.groups, "notes": self.notes}


class OutputMismatch(Exception):
    pass


def import_package(package_dir: Path, name: str) -> Any:
    sys.path.insert(0, str(Path(package_dir).resolve()))
    return importlib.import_module(name)


def tolerance(package: Any) -> tuple[float, float]:
    manifest = json.loads((Path(package.__file__).parent / "manifest.json").read_text(encoding="utf-8"))
    tols = [op["tolerance"] for op in manifest["operators"] if op["tolerance"].get("atol") is not None]
    return (max((t["atol"] for t in tols), default=1e-4), max((t["rtol"] for t in tols), default=1e-4))


def measure(loaded: LoadedModel, package: Any, rounds: int = 20, with_compile: bool = True) -> Figures:
    eager = loaded.model
    patched = package.patch(copy.deepcopy(eager))
    variants: dict[str, Callable[..., Any]] = {"eager": eager, "patched": patched}
    notes: list[str] = []
    if with_compile:
        variants["compile"] = torch.compile(copy.deepcopy(eager))
        variants["patched+compile"] = torch.compile(package.patch(copy.deepcopy(eager)))
    atol, rtol = tolerance(package)
    errors: dict[str, float] = {}
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in (101, 102):
            inputs = loaded.fresh_inputs(seed)
            want = eager(*inputs)
            for name, fn in list(variants.items()):
                try:
                    got = fn(*inputs)
                except Exception as exc:  # noqa: BLE001 - a variant torch.compile cannot build is left out, said
                    if "compile" not in name:
                        raise
                    notes.append(f"{name} left out: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                    del variants[name]
                    continue
                err = float((got - want).abs().max())
                errors[name] = max(errors.get(name, 0.0), err)
                if not torch.allclose(got, want, atol=atol, rtol=rtol):
                    raise OutputMismatch(f"{name}: output differs from eager by up to {err:.3g} on fresh inputs "
                                         f"(tolerance atol {atol}, rtol {rtol})")
        times: dict[str, list[float]] = {name: [] for name in variants}
        for r in range(rounds):
            for name, fn in variants.items():
                inputs = loaded.fresh_inputs(1000 + r)
                t0 = time.perf_counter()
                fn(*inputs)
                times[name].append(time.perf_counter() - t0)
    notes += sorted({f"{w.category.__name__}: {w.message}" for w in caught if "Fallback" in w.category.__name__})
    figures = Figures(model=str(loaded.path), device=device_label(), package=package.__name__, atol=atol, rtol=rtol,
                      times_ms={k: statistics.median(v) * 1e3 for k, v in times.items()}, max_error=errors,
                      notes=notes)
    figures.groups = breakdown(loaded, eager, patched, package, figures.times_ms["eager"])
    return figures


BREAKDOWN_TURNS = 4  # eager and patched captured in turns, so that a change of the machine's speed falls on both
BREAKDOWN_RUNS = 3  # forwards per turn, after the turn's warm-up forward


def breakdown(loaded: LoadedModel, eager: nn.Module, patched: nn.Module, package: Any,
              eager_ms: float) -> list[dict[str, Any]]:
    """Per swapped group: its modules' time in eager and patched (the median over forwards taken in turns, after a
    warm-up forward of each turn: a swapped kernel's first call may build it), and the share of eager's time the
    swap removed. Until 2026-11-28 each model was captured once, eager's forwards all before the patched ones', and
    on a loaded host the swapped groups read slower than eager's while the whole patched model read 1.35x faster."""
    inputs = loaded.fresh_inputs(7)
    before = {g.path: g for g in candidate_groups(eager)}
    after = {g.path: g for g in candidate_groups(patched)}
    for _ in range(BREAKDOWN_TURNS):
        capture(eager, inputs, list(before.values()), runs=BREAKDOWN_RUNS)
        capture(patched, inputs, list(after.values()), runs=BREAKDOWN_RUNS)
    rows = []
    for group in package.model_patch.GROUPS:
        paths = [_swapped_path(p) for p in group["paths"]]
        eager_path_ms = sum(before[p].time_s for p in group["paths"] if p in before) * 1e3
        patched_path_ms = sum(after[p].time_s for p in paths if p in after) * 1e3
        rows.append({"operator": group["operator"], "paths": group["paths"], "eager_ms": round(eager_path_ms, 3),
                     "patched_ms": round(patched_path_ms, 3),
                     "removed_share": round((eager_path_ms - patched_path_ms) / eager_ms, 4) if eager_ms else 0.0})
    return rows


def share_text(removed_share: float) -> str:
    """A swap's effect on the model's time in words: a negative removed share is time the swap added."""
    if removed_share < 0:
        return f"adds {-removed_share:.1%} of eager's time"
    return f"removes {removed_share:.1%} of eager's time"


def _swapped_path(path: str) -> str:
    """Where the drop-in sits after patch(): a window `seq[i:j]` becomes the module at `seq.i`."""
    if "[" not in path:
        return path
    parent, rest = path.split("[", 1)
    index = rest.split(":", 1)[0]
    return f"{parent}.{index}" if parent else index


def _bars(times_ms: dict[str, float]) -> str:
    width, bar_h, gap, left = 520, 22, 10, 130
    top = max(times_ms.values()) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + left + 90}" '
             f'height="{len(times_ms) * (bar_h + gap) + gap}" role="img" aria-label="forward time per variant">']
    for i, (name, ms) in enumerate(times_ms.items()):
        y = gap + i * (bar_h + gap)
        w = width * ms / top
        colour = "#888" if name in ("eager", "compile") else "#2a7"
        parts.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end" font-size="13">{name}</text>')
        parts.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}"/>')
        parts.append(f'<text x="{left + w + 6:.1f}" y="{y + 16}" font-size="13">{ms:.2f} ms</text>')
    parts.append("</svg>")
    return "".join(parts)


def html(figures: Figures) -> str:
    e = html_escape.escape
    rows = "".join(f"<tr><td>{e(k)}</td><td>{v:.2f}</td><td>{figures.speedup(k):.2f}x</td>"
                   f"<td>{figures.max_error.get(k, 0.0):.2e}</td></tr>" for k, v in figures.times_ms.items())
    groups = "".join(f"<tr><td>{e(g['operator'])}</td><td>{e(', '.join(g['paths']))}</td><td>{g['eager_ms']:.2f}"
                     f"</td><td>{g['patched_ms']:.2f}</td><td>{e(share_text(g['removed_share']))}</td></tr>"
                     for g in figures.groups)
    notes = "".join(f"<li>{e(n)}</li>" for n in figures.notes) or "<li>every swapped call ran its kernel</li>"
    return (f"<!doctype html><meta charset='utf-8'><title>opforge model bench: {e(Path(figures.model).name)}</title>"
            f"<style>body{{font-family:sans-serif;max-width:900px;margin:2em auto}}table{{border-collapse:collapse}}"
            f"td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}</style>"
            f"<h1>{e(Path(figures.model).name)}: end to end</h1><p>{e(figures.device)}; package "
            f"{e(figures.package)}; outputs within atol {figures.atol}, rtol {figures.rtol} of eager on fresh "
            f"inputs.</p>{_bars(figures.times_ms)}"
            f"<h2>Forward time (median)</h2><table><tr><th>variant</th><th>ms</th><th>over eager</th>"
            f"<th>max abs error</th></tr>{rows}</table>"
            f"<h2>Per group</h2><table><tr><th>operator</th><th>paths</th><th>eager ms</th><th>patched ms</th>"
            f"<th>effect on eager's time</th></tr>{groups}</table><h2>Fall-backs</h2><ul>{notes}</ul>")
