"""`opforge dataset export|import`: the store's kernels as a dataset (JSON Lines or Parquet), and back."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evaluator import TaskError, load_task
from opforge.run.bench import bench_tasks
from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError
from opforge.export.dataset import (
    SCHEMA_VERSION,
    DatasetError,
    ExportFilter,
    export_records,
    import_records,
    read_records,
    write_jsonl,
    write_parquet,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dataset", help="export the store's kernels as a dataset, or import one",
                       description="Export every candidate kernel in the store (reference, kernel, the LLM prompt "
                                   "and reply that wrote it, its evaluations, its lineage) as a dataset, or import "
                                   "such a file into another store as archive entries. Schema: docs/DATASET.md.")
    dsub = p.add_subparsers(dest="dataset_command", metavar="ACTION")
    e = dsub.add_parser("export", help="write the store's kernels to DIR",
                        description="Write DIR/kernels.jsonl (or .parquet) and DIR/dataset_info.json; one record per "
                                    "candidate, deduplicated by digest.")
    e.add_argument("--out", required=True, metavar="DIR", help="the folder to write (created if missing)")
    e.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", help="file format (default jsonl)")
    e.add_argument("--min-speedup", type=float, metavar="X", help="only kernels at least this fast somewhere")
    e.add_argument("--correct-only", action="store_true", help="only kernels the evaluator found correct")
    e.add_argument("--exclude-suite", action="append", default=[], metavar="NAME",
                   help="drop every task of this suite (a held-out benchmark; repeatable)")
    add_db_argument(e)
    e.set_defaults(run=run_export)
    i = dsub.add_parser("import", help="add a dataset file's kernels to the store's archive",
                        description="Add the tasks and kernels of a dataset file to the store. Imported kernels "
                                    "carry no verdict here: they are inspirations (and, for the same task, seeds that "
                                    "the next run measures first) until this store's evaluator says ok.")
    i.add_argument("file", help="a kernels.jsonl or kernels.parquet written by `opforge dataset export`")
    add_db_argument(i)
    i.set_defaults(run=run_import)
    p.set_defaults(run=lambda args: (p.print_help(), 2)[1])


def _excluded_digests(suites: list[str]) -> frozenset[str]:
    digests = set()
    for suite in suites:
        try:
            for t in bench_tasks(suite):
                digests.add(load_task(t.path).digest)
        except (ValueError, TaskError) as exc:
            raise UsageError(f"--exclude-suite {suite}: {exc}") from None
    return frozenset(digests)


def run_export(args: argparse.Namespace) -> int:
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file; give --out a folder.")
    flt = ExportFilter(args.min_speedup, args.correct_only, _excluded_digests(args.exclude_suite))
    store = open_store(args.db)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"kernels.{args.format}"
    try:
        records = export_records(store, flt)
        n = write_parquet(records, path) if args.format == "parquet" else write_jsonl(records, path)
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    info = {"name": "opforge kernels", "schema_version": SCHEMA_VERSION, "records": n, "file": path.name,
            "format": args.format, "filters": {"min_speedup": args.min_speedup, "correct_only": args.correct_only,
                                               "excluded_suites": args.exclude_suite},
            "schema": "docs/DATASET.md in the opforge repository"}
    (out / "dataset_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {n} records to {path}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    try:
        records = read_records(Path(args.file).expanduser())
    except DatasetError as exc:
        raise UsageError(str(exc)) from None
    store = open_store(args.db)
    try:
        outcome = import_records(store, records)
    finally:
        store.close()
    print(f"imported {outcome.added} new kernels for {outcome.tasks} tasks ({outcome.known} were known already); "
          "they are inspirations until this store's evaluator measures them")
    return 0
