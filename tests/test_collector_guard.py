"""The candidate's worker keeps the garbage collector from saving what it frees (`evaluator/worker/collector_guard.py`):
`gc.garbage` would hand a candidate its own finished frames, and through their `f_back` the worker's. Run in a child
process: the guard holds for the rest of the process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent('''
    import gc, importlib.util, json
    from evaluator.worker import collector_guard

    def saved_frames(set_debug):
        """Frames a collection under DEBUG_SAVEALL leaves in gc.garbage: a cycle through a finished frame."""
        def cycle():
            try:
                raise ValueError
            except ValueError as error:
                kept = error
        gc.collect()
        cycle()
        set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        set_debug(0)
        found = sum(type(o).__name__ == "frame" for o in gc.garbage)
        gc.garbage.clear()
        return found

    report = {"before": saved_frames(gc.set_debug), "problem": collector_guard.forbid_saving()}
    fresh = importlib.util.module_from_spec(importlib.util.find_spec("gc"))  # its own set_debug object
    report["after"] = saved_frames(gc.set_debug)
    report["after, a fresh gc module"] = saved_frames(fresh.set_debug)
    gc.set_debug(gc.DEBUG_LEAK)
    report["flags"] = gc.get_debug()
    report["is_tracked"] = [gc.is_tracked([]), gc.is_tracked(1)]
    print(json.dumps(report))
''')


def test_collector_saves_no_frames_once_guarded(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["before"] >= 1  # the hole, unguarded
    assert report["problem"] is None
    assert report["after"] == 0 and report["after, a fresh gc module"] == 0
    assert report["flags"] == 0
    assert report["is_tracked"] == [True, False]  # the function set_debug now shares still works
