"""`opforge model profile|extract|export`: from a whole model to its hot groups, their tasks, and a patched model.

    opforge model profile MODEL.py [--json]                        hot groups and ATen ops, with shares of the time
    opforge model extract MODEL.py --out DIR                       the groups as task files (+ seeds) and model.json
    opforge bench --suite DIR --coder tune --backend cpp           optimise them (any bench option)
    opforge model export DIR --out PKG [--name NAME] [--min-speedup X] [--measure [--html FILE]]
                                                                   patch(model) + Kernel Hub layout (docs/MODEL.md),
                                                                   and the model's end-to-end figure
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("model", help="profile a whole model, extract its hot groups as tasks, export a patch",
                       description="Work on a whole model: a Python file with get_model() (or a KernelBench-style "
                                   "Model and get_init_inputs()) and get_inputs().")
    msub = p.add_subparsers(dest="model_command", metavar="ACTION")
    prof = msub.add_parser("profile", help="time the model's modules and ATen ops; match groups to built-in tasks")
    prof.add_argument("model", help="the model file")
    prof.add_argument("--runs", type=int, default=5, help="timed forwards (default 5)")
    prof.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    prof.set_defaults(run=run_profile)
    ext = msub.add_parser("extract", help="write each hot group as a task file at the model's shapes")
    ext.add_argument("model", help="the model file")
    ext.add_argument("--out", required=True, metavar="DIR", help="a new or empty folder (or an earlier extraction)")
    ext.add_argument("--runs", type=int, default=5, help="timed forwards (default 5)")
    ext.add_argument("--json", action="store_true", help="print model.json's content")
    ext.set_defaults(run=run_extract)
    exp = msub.add_parser("export", help="the bench's best kernels as a package with patch(model) and Hub layers")
    exp.add_argument("extracted", metavar="DIR", help="the folder `opforge model extract` wrote (and a bench ran on)")
    exp.add_argument("--out", required=True, metavar="PKG", help="where to write the package")
    exp.add_argument("--name", default="opforge_model", help="the package's import name (default opforge_model)")
    exp.add_argument("--min-speedup", type=float, default=1.0, metavar="X",
                     help="swap in only kernels measured at least X times as fast as the group's PyTorch (default 1: "
                          "a kernel slower than PyTorch would make the patched model slower; 0 keeps every correct "
                          "one)")
    add_db_argument(exp)
    exp.add_argument("--measure", action="store_true",
                     help="then time the model the extraction came from end to end: eager, torch.compile, patched "
                          "and patched + torch.compile, outputs checked against eager's first (exit status 1 if "
                          "one differs)")
    exp.add_argument("--rounds", type=int, default=20, metavar="N", help="timed rounds of --measure (default 20)")
    exp.add_argument("--no-compile", action="store_true", help="--measure without the torch.compile variants")
    exp.add_argument("--html", metavar="FILE", help="--measure also writes its figures, per-group breakdown and "
                                                    "chart to this page")
    exp.add_argument("--json", action="store_true", help="print one JSON object describing the package")
    exp.set_defaults(run=run_export)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def _profile(args: argparse.Namespace) -> Any:
    from opforge.model import ModelError, load_model
    from opforge.model.profiling import profile_model

    if args.runs < 1:
        raise UsageError(f"--runs must be at least 1, not {args.runs}.")
    try:
        loaded = load_model(Path(args.model))
        return loaded, profile_model(loaded, runs=args.runs)
    except ModelError as exc:
        raise UsageError(str(exc)) from None


def run_profile(args: argparse.Namespace) -> int:
    _, prof = _profile(args)
    print(json.dumps(prof.to_json()) if args.json else prof.table())
    return 0


def run_extract(args: argparse.Namespace) -> int:
    from opforge.model import ModelError
    from opforge.model.extraction import extract

    loaded, prof = _profile(args)
    try:
        plan = extract(loaded, prof, Path(args.out))
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(plan))
        return 0
    print(prof.table(), end="\n\n")
    for g in plan["groups"]:
        if g.get("seeded"):
            print(f"{args.out}/{g['task']}: {', '.join(g['paths'])} as {g['builtin']['task']} at "
                  f"{g['builtin']['constants']}, its seed beside it")
        elif g.get("task"):
            print(f"{args.out}/{g['task']}: {', '.join(g['paths'])} ({g['kind']}) has no seed: an LLM run would "
                  f"be asked to make this task's Model faster (opforge bench --suite {args.out}/needs_llm "
                  f"--coder llm). The task:\n")
            print((Path(args.out) / g["task"]).read_text(encoding="utf-8"))
        else:
            print(f"{', '.join(g['paths'])} ({g['kind']}): {g['note']}")
    print(f"\nnext: opforge bench --suite {args.out} --coder tune --backend cpp; then opforge model export "
          f"{args.out} --out PKG --measure")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from opforge.export import ExportError, check_name
    from opforge.model import ModelError
    from opforge.model.packaging import export_model
    from store import StoreError

    try:
        check_name(args.name)
    except ExportError as exc:
        raise UsageError(str(exc)) from None
    if not args.min_speedup >= 0:
        raise UsageError(f"--min-speedup must be a non-negative number, not {args.min_speedup}.")
    if args.rounds < 1:
        raise UsageError(f"--rounds must be at least 1, not {args.rounds}.")
    if (args.html or args.no_compile) and not args.measure:
        raise UsageError("--html and --no-compile go with --measure.")
    store = open_store(args.db)
    try:
        result, groups = export_model(store, Path(args.extracted), Path(args.out), args.name,
                                      min_speedup=args.min_speedup or None)
    except (ExportError, ModelError, StoreError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    for note in result.notes:
        print(f"opforge: note: {note}", file=sys.stderr)
    figures = _measure(Path(args.extracted), result.out, result.package, args) if args.measure else None
    if args.json:
        print(json.dumps({**result.to_json(), "groups": groups,
                          **({"end_to_end": figures.to_json()} if figures is not None else {})}))
        return 0
    print(f"exported {len(groups)} group{'s' if len(groups) != 1 else ''} to {result.out} as package "
          f"{result.package}: `import {result.package}; {result.package}.patch(model)`, or "
          f"kernels.get_local_kernel({str(result.out)!r}) for the Kernel Hub layers")
    if figures is not None:
        print(figures.text())
        if args.html:
            print(f"report: {args.html}")
    return 0


def _measure(extracted: Path, package_dir: Path, package_name: str, args: argparse.Namespace) -> Any:
    """The end-to-end figures of the model `extracted`'s model.json names, patched by the package just written."""
    from opforge.model import ModelError, load_model
    from opforge.model.endtoend import OutputMismatch, html, import_package, measure
    from opforge.model.extraction import PLAN

    try:
        model_file = Path(json.loads((extracted / PLAN).read_text(encoding="utf-8"))["model"])
        loaded = load_model(model_file)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{extracted / PLAN}: cannot name the model to measure ({type(exc).__name__}: {exc}); "
                         "run scripts/bench_model.py MODEL.py --package PKG instead.") from None
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    package = import_package(package_dir, package_name)
    try:
        figures = measure(loaded, package, rounds=args.rounds, with_compile=not args.no_compile)
    except OutputMismatch as exc:
        print(f"opforge: {model_file}: the patched model's output differs: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    if args.html:
        Path(args.html).write_text(html(figures), encoding="utf-8")
    return figures
