"""The manifest's torch.compile record: at export, a model calling each exported operator is traced whole.

Right after the package is written, a child Python imports it from the output folder (as an installed package would
be imported) and, per operator, builds its drop-in module with the inputs of the first shape variant (the benchmark
shape first) that one of its kernels was proven for on this machine, compiles it with
`torch.compile(fullgraph=True)` (a graph break is an error then) through a backend that records the traced graph
and hands it to `aot_eager` (no C++ compiler needed), runs it once and compares the result with the reference's.
The record says, per operator: traced or not (with the error), whether the package's own op is in the graph (it is
not where dispatch chose the reference), whether the result matched, and the torch version and device it was done
on. A failure is evidence too: it is recorded, never a reason to refuse the export. The package's own test
(`test_compiled_dropin_matches_reference`) repeats the check wherever the package is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

TIMEOUT_S = 300.0
ERROR_CHARS = 600

# Runs in the child with the output folder first on sys.path; prints one JSON object.
PROGRAM = r'''
import json, os, sys, warnings
import torch
if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"    # as the package's conftest does: Triton kernels verified on a CPU
package = sys.argv[1]
pkg = __import__(package)
from importlib import import_module
_task, _runtime = import_module(package + "._task"), import_module(package + "._runtime")
_dispatch = import_module(package + "._dispatch")
MODULES, OPERATORS = import_module(package + ".modules").MODULES, import_module(package + ".registry").OPERATORS
here = torch.device("cuda" if torch.cuda.is_available() and not _runtime.INTERPRETING else "cpu")
records = []


def _first(op):
    reference = _task.reference_model(op, 0, 0, here)
    dropin = MODULES[op.name](*_task.init_inputs(op, 0)).to(here)
    dropin.load_state_dict(reference.state_dict())
    return reference, dropin, _task.inputs(op, 0, 0, here)


for op in OPERATORS.values():
    record = {"operator": op.name, "fullgraph": True, "backend": "aot_eager"}
    seen = []

    def recording(gm, example_inputs):
        seen.extend(str(node.target) for node in gm.graph.nodes if node.op == "call_function")
        return torch._dynamo.lookup_backend("aot_eager")(gm, example_inputs)
    try:
        for variant in range(len(_task.variants(op))):  # the first shape variant a kernel serves here
            reference = _task.reference_model(op, variant, 0, here)
            dropin = MODULES[op.name](*_task.init_inputs(op, variant)).to(here)
            dropin.load_state_dict(reference.state_dict())
            args = _task.inputs(op, variant, 0, here)
            names, state = _runtime.state_of(dropin)
            if _dispatch.choose(op, dropin, args, names, state)[0] is not None:
                break
        else:
            reference, dropin, args, variant = (*_first(op), 0)
        record["variant"] = variant
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            actual = torch.compile(dropin, backend=recording, fullgraph=True)(*args)
        mine = sorted({t for t in seen if t.startswith(package + ".")})
        record.update(traced=True, graph_breaks=0, op_in_graph=bool(mine), ops_in_graph=mine,
                      matches_reference=_task.mismatch(op, reference(*args), actual) is None,
                      fallbacks=sorted({str(w.message) for w in caught if w.category is pkg.FallbackWarning}))
    except Exception as exc:
        record.update(traced=False, error=f"{type(exc).__name__}: {exc}")
    records.append(record)
print(json.dumps({"torch": torch.__version__, "device": here.type, "operators": records}))
'''


def trace_record(out: Path, package: str, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The torch.compile record of the package written in `out` (see the module's docstring)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(out), *filter(None, [os.environ.get("PYTHONPATH")])])}
    checked_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    base = {"checked_at": checked_at, "python": sys.version.split()[0],
            "how": "torch.compile(drop-in module, fullgraph=True), aot_eager, one call on the first proven shape variant"}
    try:
        done = subprocess.run([sys.executable, "-c", PROGRAM, package], cwd=out, env=env, capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {**base, "traced": False, "error": f"the check did not finish in {timeout_s:.0f} s"}
    lines = done.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**base, "traced": False, "error": f"the check exited with status {done.returncode}: {tail}"[
            :ERROR_CHARS]}
    for record in found["operators"]:
        if "error" in record:
            record["error"] = str(record["error"])[:ERROR_CHARS]
    found["traced"] = all(r.get("traced") and r.get("op_in_graph") for r in found["operators"])
    return {**base, **found}


def add_to_manifest(out: Path, package: str, record: dict[str, Any]) -> None:
    """Write the record into the package's manifest.json as `torch_compile`."""
    path = out / package / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["torch_compile"] = record
    path.write_text(json.dumps(manifest, indent=1, allow_nan=True) + "\n", encoding="utf-8")
