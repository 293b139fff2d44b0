"""`opforge report RUN_ID|--suite NAME --out DIR`: a self-contained HTML report with plots, and its data as CSV and
JSON (see opforge/reports/html.py)."""

from __future__ import annotations

import argparse
import csv
import json
import math
import shlex
from pathlib import Path
from typing import Any

from benchmarks import list_suites
from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError
from opforge.reports.html import ReportBundle, run_bundle, suite_bundle
from store import StoreError


def register(sub: argparse._SubParsersAction) -> None:
    # --out is required, but checked in run() (one `opforge:` sentence, exit 2) rather than by argparse: the usage
    # line says so by hand.
    p = sub.add_parser("report", usage="opforge report [-h] (RUN_ID | --suite SUITE) --out DIR [--db URL]",
                       help="write an HTML report (with CSV and JSON) of a run or of a suite's leaderboard",
                       description="Write DIR/index.html, one self-contained page (inline CSS and SVG charts, no "
                                   "script, nothing fetched), and the same data as CSV and JSON beside it. For a run: "
                                   "search progress, speedup distribution, speed vs energy with its Pareto front, the "
                                   "best candidates with their lineage, and the cost (candidates.csv, report.json). "
                                   "For a suite: each agent's speedup per task, speedup distribution, speed vs energy "
                                   "per task and fast_p (leaderboard.csv, tasks.csv, report.json).")
    p.add_argument("run_id", type=int, nargs="?", metavar="RUN_ID", help="the run to report on")
    p.add_argument("--suite", help="report on a suite's leaderboard instead (a built-in name or the folder a bench "
                                   "ran on)")
    p.add_argument("--out", metavar="DIR", help="required: the folder to write into (created when missing)")
    add_db_argument(p)
    p.set_defaults(run=run)


def _suite_key(suite: str) -> str:
    """The same key `opforge bench` stored: a built-in name as it is, a folder as its absolute path."""
    if suite not in list_suites() and Path(suite).expanduser().exists():
        return str(Path(suite).expanduser().resolve())
    return suite


def _out_dir(raw: str | None) -> Path:
    if not raw:
        raise UsageError("Give --out DIR, the folder to write index.html and its CSV and JSON files into.")
    out = Path(raw).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file, not a folder; give --out a folder (it is created when missing).")
    return out


def _command(args: argparse.Namespace, store_url: str, out: Path, suite: str | None) -> str:
    what = ["--suite", suite] if suite is not None else [str(args.run_id)]
    return shlex.join(["opforge", "report", *what, "--db", store_url, "--out", str(out)])


def _finite(value: Any) -> Any:
    """JSON without NaN or Infinity (which strict parsers refuse): such floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_bundle(bundle: ReportBundle, out: Path) -> Path:
    """Write index.html, the CSV tables and report.json into `out` (created when missing); the page's path."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        index = out / "index.html"
        index.write_text(bundle.html, encoding="utf-8")
        for name, (columns, rows) in bundle.tables.items():
            with open(out / name, "w", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
        (out / "report.json").write_text(json.dumps(_finite(bundle.data), indent=1, allow_nan=False) + "\n",
                                         encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"Cannot write the report into {out}: {exc.strerror or exc}.") from None
    return index


def run(args: argparse.Namespace) -> int:
    if args.run_id is not None and args.suite is not None:
        raise UsageError("Give either a RUN_ID or --suite NAME to report on, not both.")
    if args.run_id is None and args.suite is None:
        raise UsageError("Give the RUN_ID of a run (see `opforge runs`) or --suite NAME to report on.")
    out = _out_dir(args.out)
    suite = None if args.suite is None else _suite_key(args.suite)
    store = open_store(args.db)
    try:
        command = _command(args, store.url, out, suite)
        if suite is None:
            bundle = run_bundle(store, args.run_id, command)
        else:
            found = suite_bundle(store, suite, command)
            if found is None:
                raise UsageError(f"The database {store.url} has no bench of suite {suite} with a task yet; run one "
                                 f"with: opforge bench --suite {shlex.quote(suite)}.")
            bundle = found
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    print(write_bundle(bundle, out))
    return 0
