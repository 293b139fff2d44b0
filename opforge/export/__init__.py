"""`opforge export`: the best kernels of some runs as a pip-installable Python package that carries its evidence.

    result = export_package(store, [run_id], Path("out"), name="my_kernels")

The package (see docs/EXPORT.md) holds each kernel's source unchanged, each task's reference, generated glue (a
registry of where each kernel was verified, custom ops registered with torch.library, drop-in nn.Modules that fall
back to the reference elsewhere), its own tests, a `bench` entry point and manifest.json with the evidence.

Modules: `selection` (which kernels), `sources` (what their syntax says), `operators` (signatures and dispatch
buckets), `evidence` (the manifest), `compile_evidence` (the manifest's torch.compile record, traced at export),
`writer` (templates and the output folder).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from opforge import __version__
from opforge.display import format_speedup
from opforge.export.compile_evidence import add_to_manifest, trace_record
from opforge.export.evidence import manifest
from opforge.export.operators import OperatorPlan, plan_operators
from opforge.export.native_vendor import rewrite_kernel, vendored_loader
from opforge.export.selection import ExportError, select
from opforge.export.writer import OutputError, check, prepare, render, write
from opforge.reports.leaderboard import leaderboard
from store import Store

__all__ = ["ExportError", "ExportResult", "export_package", "suite_runs", "check_name"]

NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]*\Z")
TAKEN_NAMES = {"opforge", "torch", "triton", "numpy", "test", "tests", "evaluator", "store", "agents", "prompts",
               "benchmarks"}


@dataclass(frozen=True, slots=True)
class ExportResult:
    out: Path
    package: str
    version: str
    operators: tuple[dict[str, Any], ...]  # name, class, kernels: [(id, device, speedup)]
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "package": self.package, "version": self.version,
                "operators": list(self.operators), "notes": list(self.notes)}


def check_name(name: str) -> str:
    if not NAME_PATTERN.match(name) or keyword.iskeyword(name):
        raise ExportError(f"--name {name!r} is not a lower-case Python package name (letters, digits and _, starting "
                          f"with a letter), e.g. my_kernels.")
    if name in TAKEN_NAMES:
        raise ExportError(f"--name {name!r} would shadow the {name} package; choose another name.")
    return name


def suite_runs(store: Store, suite: str, agent: str | None = None) -> tuple[list[int], list[str]]:
    """The runs of the leaderboard's top row for a suite (or every row of one agent label): those with a correct
    kernel, and notes for the tasks left out."""
    rows = leaderboard(store, suite)
    if not rows:
        raise ExportError(f"The store {store.url} has no bench of suite {suite!r}; run one with `opforge bench --suite "
                          f"{suite}`.")
    if agent is not None:
        chosen = [r for r in rows if r.agent == agent]
        if not chosen:
            labels = ", ".join(sorted({r.agent for r in rows}))
            raise ExportError(f"Suite {suite!r} has no bench by agent {agent!r}; its agents are: {labels}.")
    else:
        chosen = rows[:1]
    run_ids = [t.run_id for r in chosen for t in r.tasks if t.correct]
    notes = [f"suite {suite}, agent {r.agent}: task {t.task} has no correct kernel (run {t.run_id})"
             for r in chosen for t in r.tasks if not t.correct]
    if not run_ids:
        raise ExportError(f"No task of suite {suite!r} has a correct kernel in the chosen bench ({chosen[0].agent}).")
    return run_ids, notes


def export_package(store: Store, run_ids: list[int], out: Path, name: str | None = None,
                   min_speedup: float | None = None, source: dict[str, Any] | None = None) -> ExportResult:
    if name is not None:
        check_name(name)
    try:
        check(out)
    except OutputError as exc:
        raise ExportError(str(exc)) from None
    selection = select(store, run_ids, min_speedup)
    plans = plan_operators(selection.picks)
    package = name if name is not None else _default_name(plans)
    now = datetime.now(timezone.utc)
    version = f"{now:%Y.%m.%d}.{now.hour * 3600 + now.minute * 60 + now.second}"
    dist_name = package.replace("_", "-")
    origin = {"store": store.url, "runs": sorted(set(run_ids)), **(source or {})}
    context = _context(plans, package, dist_name, version, now, origin)
    native = any(k.language == "cpp" for op in plans for k in op.kernels)
    kernels = {k.id: (rewrite_kernel(k.pick.candidate.source, package) if k.language == "cpp"
                      else k.pick.candidate.source)
               for op in plans for k in op.kernels}
    references = {op.name: op.source for op in plans}
    evidence = manifest(store, plans, package, dist_name, version, now, origin)
    files = render(context, kernels, references, evidence)
    if native:
        files.update(vendored_loader(package))
    try:
        prepare(out)
        write(out, files, package)
    except OutputError as exc:
        raise ExportError(str(exc)) from None
    add_to_manifest(out, package, trace_record(out, package))  # torch.compile traced a model calling each op
    summary = tuple({"name": op.name, "class": op.class_name,
                     "kernels": [{"id": k.id, "device": k.pick.device, "speedup": k.speedup} for k in op.kernels]}
                    for op in plans)
    one_shape = [f"{op.name}: its kernels are verified at one shape only (its task gives no SHAPES and none could be "
                 "derived), so calls at any other size run PyTorch" for op in plans if len(op.report.variants) < 2]
    return ExportResult(out, package, version, summary, (*selection.notes, *one_shape))


def _default_name(plans: list[OperatorPlan]) -> str:
    return f"opforge_{plans[0].name}" if len(plans) == 1 else "opforge_kernels"


def _context(plans: list[OperatorPlan], package: str, dist_name: str, version: str, now: datetime,
             origin: dict[str, Any]) -> dict[str, Any]:
    ops = [p.template_context() for p in plans]
    kernels = [k for op in plans for k in op.kernels]
    slow = sorted({f"{k.id} {format_speedup(k.speedup)} on {k.pick.device}" for k in kernels if (k.speedup or 0) < 1})
    runs = ", ".join(str(r) for r in origin["runs"])
    names = ", ".join(op.name for op in plans)
    return {
        "package": package,
        "dist_name": dist_name,
        "version": version,
        "opforge_version": __version__,
        "exported_at": now.strftime("%Y-%m-%d %H:%M UTC"),
        "source": f"run{'s' if len(origin['runs']) != 1 else ''} {runs} of {origin['store']}",
        "description": f"{len(plans)} PyTorch operator{'s' if len(plans) != 1 else ''} ({names}) with kernels tuned "
                       f"and verified by opforge",
        "operators": ops,
        "uses_triton": any(k.language == "triton" for k in kernels),
        "uses_native": any(k.language == "cpp" for k in kernels),
        "uses_scalars": any(kind != "tensor" for op in plans for kind in op.arg_kinds),
        "interpreted": any(k.pick.evaluation.result.interpreted for k in kernels),
        "any_triton_op": any(all(k.language == "triton" and k.traceable for k in op.kernels) for op in plans),
        "slow": "; ".join(slow),
    }
