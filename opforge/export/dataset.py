"""The store as a dataset: one record per candidate kernel, for training and studying kernel-writing models.

A record (schema version 2, documented in docs/DATASET.md) holds the task (name, digest, reference source, input and
output shapes and dtypes, compute ops), the candidate (digest, source, origin, note, generation, parents, backend:
`triton`, `cuda` or native CPU `cpp`, and the device of its best verdict), the LLM call that wrote it where one did
(model, prompt, reply with any reasoning), and its evaluations (one per device: status, reason, timings, speedup,
error, memory, energy, device, backend). Records are deduplicated by candidate digest. Version-1 files still read.

`export_records` reads a store; `write_jsonl` / `write_parquet` write the records (nested fields as JSON text in
Parquet, so every column is a plain string or number); `read_records` reads either back; `import_records` adds them
to another store as archive entries: tasks and candidates (origin `import`) without verdicts. An imported kernel is
only an inspiration until this store's evaluator has measured it (see `opforge.run.archive`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.candidate import Candidate
from evaluator.result import EvalResult
from evaluator.task import Task, source_digest, task_from_source
from evaluator.measure.task_work import task_work
from opforge.run.archive import import_origin
from store import Store

SCHEMA_VERSION = 2  # 2: `backend` and `best_device` per record, `backend` per evaluation (1 lacks them: read as null)
NESTED = ("task_inputs", "task_outputs", "task_ops", "parents", "llm", "evaluations")  # JSON text in Parquet
RECORD_BACKENDS = ("triton", "cuda", "cpp", "torch")  # what a record's `backend` may be (EvalResult.backend)


class DatasetError(Exception):
    """A dataset file that cannot be read or written; one readable sentence."""


@dataclass(frozen=True, slots=True)
class ExportFilter:
    min_speedup: float | None = None
    correct_only: bool = False
    exclude_task_digests: frozenset[str] = frozenset()


def _evaluation(result: EvalResult) -> dict[str, Any]:
    return {"status": result.status.value, "reason": result.reason, "speedup": result.speedup,
            "candidate_ms": None if result.candidate_ms is None else result.candidate_ms.median_ms,
            "reference_ms": None if result.reference_ms is None else result.reference_ms.median_ms,
            "max_abs_error": result.max_abs_error, "peak_memory_bytes": result.peak_memory_bytes,
            "energy_j": result.energy_j, "device": result.device.name, "device_kind": result.device.kind,
            "interpreted": result.interpreted, "backend": result.backend}


def _backend_and_device(evaluations: Sequence[EvalResult]) -> tuple[str | None, str | None]:
    """The kernel's backend (its fastest correct verdict's, else any verdict's that names one) and the device of
    that fastest correct verdict (None: never correct)."""
    correct = [r for r in evaluations if r.speedup is not None]
    best = max(correct, key=lambda r: r.speedup or 0.0, default=None)
    backend = best.backend if best is not None and best.backend else next(
        (r.backend for r in evaluations if r.backend), None)
    return backend, None if best is None else best.device.name


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A record of an older schema version in the current shape: version 1 had no backend nor best device."""
    out = dict(record)
    out.setdefault("backend", None)
    out.setdefault("best_device", None)
    out["evaluations"] = [{"backend": None, **e} for e in out.get("evaluations") or []]
    return out


def export_records(store: Store, flt: ExportFilter = ExportFilter()) -> Iterator[dict[str, Any]]:
    """Every candidate of every run once (the first run that holds it), filtered."""
    seen: set[str] = set()
    task_info: dict[int, dict[str, Any]] = {}
    for run in store.list_runs():
        task = store.get_task(run.task_id)
        if task.digest in flt.exclude_task_digests:
            continue
        writers = {c.candidate_id: c for c in store.llm_calls(run.id)
                   if c.candidate_id is not None and c.role.startswith("coder") and c.outcome == "ok"}
        for sc in store.history(run.id):
            rec = sc.candidate
            if rec.digest in seen:
                continue
            evaluations = [ev.result for ev in store.evaluations_of(rec.id)]
            best = max((r.speedup for r in evaluations if r.speedup is not None), default=None)
            if flt.correct_only and best is None:
                continue
            if flt.min_speedup is not None and (best is None or best < flt.min_speedup):
                continue
            seen.add(rec.digest)
            if task.id not in task_info:
                work = task_work(task.task)
                task_info[task.id] = {"inputs": list(work.inputs) if work else [],
                                      "outputs": list(work.outputs) if work else [],
                                      "ops": list(work.ops) if work else list(task.ops or [])}
            info = task_info[task.id]
            call = writers.get(rec.id)
            backend, best_device = _backend_and_device(evaluations)
            yield {
                "schema_version": SCHEMA_VERSION,
                "task_name": task.name, "task_digest": task.digest, "reference_source": task.source,
                "task_inputs": info["inputs"], "task_outputs": info["outputs"], "task_ops": info["ops"],
                "candidate_digest": rec.digest, "candidate_source": rec.source, "origin": rec.origin,
                "note": rec.note, "generation": rec.generation, "parents": list(rec.parents),
                "llm": None if call is None else {"model": call.model, "role": call.role, "prompt": call.prompt,
                                                  "reply": call.reply, "tokens_in": call.tokens_in,
                                                  "tokens_out": call.tokens_out, "cost_usd": call.cost_usd},
                "best_speedup": best,
                "correct": best is not None,
                "backend": backend,
                "best_device": best_device,
                "evaluations": [_evaluation(r) for r in evaluations],
            }


def write_jsonl(records: Iterable[dict[str, Any]], path: Path) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True) + "\n")
            n += 1
    return n


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise DatasetError("Parquet needs the pyarrow package: pip install pyarrow (or use --format jsonl).") from None
    return pyarrow


def write_parquet(records: Iterable[dict[str, Any]], path: Path) -> int:
    pa = _pyarrow()
    rows = [{k: (json.dumps(v) if k in NESTED else v) for k, v in r.items()} for r in records]
    schema = pa.schema([("schema_version", pa.int32()), ("task_name", pa.string()), ("task_digest", pa.string()),
                        ("reference_source", pa.string()), ("task_inputs", pa.string()), ("task_outputs", pa.string()),
                        ("task_ops", pa.string()), ("candidate_digest", pa.string()),
                        ("candidate_source", pa.string()), ("origin", pa.string()), ("note", pa.string()),
                        ("generation", pa.int64()), ("parents", pa.string()), ("llm", pa.string()),
                        ("best_speedup", pa.float64()), ("correct", pa.bool_()), ("backend", pa.string()),
                        ("best_device", pa.string()), ("evaluations", pa.string())])
    table = pa.Table.from_pylist(rows, schema=schema)
    pa.parquet.write_table(table, path)
    return len(rows)


def read_records(path: Path) -> list[dict[str, Any]]:
    """Records from a .jsonl or .parquet file written by this module (any schema version up to ours)."""
    if path.is_dir():
        raise DatasetError(f"{path} is a directory, not a file; give the kernels.jsonl or kernels.parquet file.")
    if not path.is_file():
        raise DatasetError(f"{path}: no such dataset file.")
    if path.suffix == ".parquet":
        pa = _pyarrow()
        try:
            rows = pa.parquet.read_table(path).to_pylist()
        except (pa.ArrowException, OSError):
            raise DatasetError(f"{path}: cannot be read as a Parquet file; it is damaged or not Parquet.") from None
        try:
            records = [{k: (json.loads(v) if k in NESTED and isinstance(v, str) else v) for k, v in r.items()}
                       for r in rows]
        except ValueError:
            raise DatasetError(f"{path}: a nested field is not valid JSON; it is not an opforge dataset.") from None
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise DatasetError(f"{path}: cannot be read as UTF-8 text; a .jsonl dataset is JSON Lines text (give a "
                               ".parquet file its .parquet suffix).") from None
        except OSError as exc:
            raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise DatasetError(f"{path}: line {number} is not a JSON object.") from None
            if not isinstance(record, dict):
                raise DatasetError(f"{path}: line {number} is not a JSON object.")
            records.append(record)
    if not records:
        raise DatasetError(f"{path} holds no records.")
    for number, r in enumerate(records, start=1):
        missing = [k for k in ("schema_version", "reference_source", "candidate_source", "task_name") if k not in r]
        if missing:
            raise DatasetError(f"{path}: record {number} lacks {', '.join(missing)}; it is not an opforge dataset.")
        if r.get("backend") is not None and r["backend"] not in RECORD_BACKENDS:
            raise DatasetError(f"{path}: record {number} names the backend {r['backend']!r}, not one of "
                               f"{', '.join(RECORD_BACKENDS)}; it is not an opforge dataset.")
        if int(r["schema_version"]) > SCHEMA_VERSION:
            raise DatasetError(f"{path}: record {number} has schema version {r['schema_version']}, newer than this "
                               f"opforge ({SCHEMA_VERSION}); upgrade opforge to import it.")
    return [upgrade(r) for r in records]


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    tasks: int
    added: int
    known: int


def import_records(store: Store, records: Sequence[dict[str, Any]]) -> ImportOutcome:
    """Add the records' tasks and kernels to the store as unverified archive entries (origin `import`)."""
    tasks: dict[str, int] = {}
    added = known = 0
    for r in records:
        source = r["reference_source"]
        digest = source_digest(source)
        if digest not in tasks:
            task: Task = task_from_source(source, str(r["task_name"]))
            record = store.add_task(task)
            tasks[digest] = record.id
            if record.ops is None and r.get("task_ops"):
                store.set_task_work(record.id, record.flops, record.min_bytes, list(r["task_ops"]))
        claimed = r.get("best_speedup")
        note = f"imported: {r.get('origin', '?')}" + (f", {claimed:.2f}x claimed" if claimed else "")
        candidate = Candidate.from_source(r["candidate_source"], origin=import_origin(r.get("backend")),
                                          parents=tuple(r.get("parents") or ()), note=note)
        _, new = store.add_candidate(None, tasks[digest], candidate, generation=int(r.get("generation") or 0))
        added += new
        known += not new
    return ImportOutcome(len(tasks), added, known)
