"""Downloads of exported packages: `opforge export` into a temporary folder, handed out as one zip file.

Exporting checks each task's reference once on PyTorch's meta device, in the evaluator's sandbox (as `opforge export`
does), so exports run one at a time: open reads cannot pile up evaluator processes.
"""

from __future__ import annotations

import io
import tempfile
import threading
import zipfile
from pathlib import Path

from opforge.export import ExportError, export_package, suite_runs
from store import Store

MAX_RUNS = 100
_ONE_AT_A_TIME = threading.Lock()


def export_zip(store: Store, run_ids: list[int] | None = None, suite: str | None = None,
               agent: str | None = None) -> tuple[str, bytes]:
    """The package `opforge export RUN_ID ...` (or `--suite NAME [--agent LABEL]`) writes, zipped under its own
    name; returns the file name and the bytes. Raises ExportError (one sentence) when there is nothing to export."""
    if bool(run_ids) == (suite is not None):
        raise ExportError("Name the runs to export (run_id=N, repeatable) or a suite (suite=NAME), not both or "
                          "neither.")
    if agent is not None and suite is None:
        raise ExportError("agent picks a bench of a suite: give suite=NAME with it.")
    if suite is not None:
        run_ids, _ = suite_runs(store, suite, agent)
    assert run_ids is not None
    if len(set(run_ids)) > MAX_RUNS:
        raise ExportError(f"At most {MAX_RUNS} runs can be exported at once; `opforge export` has no such limit.")
    with _ONE_AT_A_TIME, tempfile.TemporaryDirectory(prefix="opforge-export-") as tmp:
        out = Path(tmp) / "package"
        result = export_package(store, sorted(set(run_ids)), out,
                                source={"suite": suite, "agent": agent} if suite is not None else None)
        top = f"{result.package}-{result.version}"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(p for p in out.rglob("*") if p.is_file()):
                archive.write(path, f"{top}/{path.relative_to(out).as_posix()}")
    return f"{top}.zip", buffer.getvalue()
