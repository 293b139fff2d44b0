"""A cold `opforge eval` launches both zygotes before the driver imports torch, and nothing it adopts hides less."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.build.cache import BuildCache
from evaluator.driver.warm_start import WarmZygotes, hidden_caches, likely_device

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "benchmarks" / "tiny"


def test_the_likely_device_follows_the_request_and_the_gpu_driver_nodes(tmp_path: Path):
    assert likely_device("cpu", {}, tmp_path) == "cpu" and likely_device("cuda", {}, tmp_path) == "cuda"
    assert likely_device("tpu", {}, tmp_path) is None
    assert likely_device("auto", {}, tmp_path) == "cpu"  # no driver node: torch cannot see a GPU
    (tmp_path / "nvidiactl").touch()
    assert likely_device("auto", {}, tmp_path) == "cuda"
    assert likely_device("auto", {"CUDA_VISIBLE_DEVICES": ""}, tmp_path) == "cpu"
    assert likely_device("auto", {"CUDA_VISIBLE_DEVICES": "-1"}, tmp_path) == "cpu"


def test_an_evaluator_refuses_zygotes_that_hide_other_build_caches(tmp_path: Path):
    from evaluator.driver.evaluate import LocalEvaluator

    theirs = WarmZygotes(hidden_caches(BuildCache.open(tmp_path / "another-cuda-cache")))
    with pytest.raises(ValueError, match="must not see"):
        LocalEvaluator(build_cache=str(tmp_path / "cuda-cache"), zygotes=theirs)
    ours = WarmZygotes.for_cache(BuildCache.open(tmp_path / "cuda-cache"))
    evaluator = LocalEvaluator(build_cache=str(tmp_path / "cuda-cache"), zygotes=ours)
    assert evaluator._zygote("cpu", "candidate", "process").hidden == ours.hidden  # adopted, hiding both caches
    assert str(tmp_path / "cuda-cache") in ours.hidden
    evaluator.close()



def test_a_candidates_zygote_is_kept_per_isolation_asked():
    """An evaluation asking for the process sandbox after one under bubblewrap (the cheat suite's tests without
    bubblewrap) got bubblewrap's zygote when zygotes were kept per device and role alone."""
    zygotes = WarmZygotes(())
    process = zygotes.get("cpu", "candidate", "process")
    assert process.isolation == "process" and zygotes.get("cpu", "candidate", "process") is process
    assert zygotes.get("cpu", "candidate", "auto") is not process  # bubblewrap where it works
    assert zygotes.get("cpu", "reference", "bwrap") is zygotes.get("cpu", "reference", "auto")  # trusted: one
    assert zygotes.get("cpu", "reference", "auto").isolation == "process"
    zygotes.close()

def test_opforge_eval_launches_the_candidates_zygote_before_importing_torch_and_forks_the_reference_after():
    """The launch is recorded and the process ends there: what was imported by then is the driver's start-up. The
    reference's zygote is launched once the driver has imported torch, to be forked from it (`forked_zygote.py`)."""
    probe = textwrap.dedent("""
        import os, sys
        from evaluator.sandbox import launch as sandbox
        launched = []
        def launch(self):
            heavy = sorted(m for m in ("torch", "triton", "sqlalchemy", "openai", "jinja2", "ray", "store", "agents")
                           if m in sys.modules)
            launched.append(f"{self.role}:{self.device}:{','.join(heavy) or 'none'}:flush_ahead={self.flush_ahead}"
                            f":fork={self.fork}")
            if len(launched) == 2:
                print(" ".join(launched), flush=True)
                os._exit(0)
        sandbox.Zygote.launch = launch
        from opforge.cli.program import main
        main(["eval", sys.argv[1], sys.argv[2], "--device", "cpu", "--json"])
    """)
    proc = subprocess.run([sys.executable, "-c", probe, str(TINY / "relu.py"), str(TINY / "relu.seed.py")],
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    # One evaluation: its zygotes fork once each, and neither writes the CPU eviction buffer before it forks.
    assert proc.stdout.split() == ["candidate:cpu:none:flush_ahead=False:fork=False",
                                   "reference:cpu:torch:flush_ahead=False:fork=True"]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300, cwd=REPO)


@pytest.mark.parametrize("role, dynamo", [("reference", False), ("candidate", True)])
def test_only_the_candidates_zygote_imports_dynamo(role: str, dynamo: bool):
    """The candidate's must (a later import under its guards would be refused); the reference's need not, and its
    start competes for the CPU with the candidate's zygote that a cold evaluation waits on."""
    proc = _python(f"""
        import sys
        from evaluator.worker.zygote import warm_imports
        warm_imports({role!r}, "cpu")
        print("torch._dynamo" in sys.modules, "triton" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-2:] == [str(dynamo), "True"]


def test_a_zygote_writes_the_cpu_eviction_buffer_only_where_no_compiler_builds_the_line_flush():
    """Four last-level caches of real pages (here 8 MiB, whatever this machine's), for the timer's fallback eviction:
    shared by every worker of a zygote that forks many, left to the worker that needs it where the zygote forks one
    (a cold `opforge eval`), and not written at all where a C compiler builds the harness's line flush, which evicts
    a cold call's own lines instead (`line_flush.py`)."""
    proc = _python("""
        import os
        from evaluator.worker import timing
        from evaluator.worker.zygote import warm_imports
        timing.cpu_flush_bytes = lambda *_: 8 * 2**20
        warm_imports("reference", "cpu")
        print(timing._prepared is None, end=" ")
        os.environ["PATH"], os.environ["CC"] = "/nonexistent", ""  # no gcc, no cc
        warm_imports("reference", "cpu", flush_ahead=False)
        print(timing._prepared is None, end=" ")
        warm_imports("reference", "cpu")
        prepared = timing._prepared
        print(prepared is not None and prepared.numel() * 4 == timing.cpu_flush_bytes() and bool(prepared[-1] != 0))
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-3:] == ["True", "True", "True"]


def test_the_op_trace_imports_no_dynamo_and_still_keeps_it_out_once_loaded():
    proc = _python("""
        import sys, torch
        from evaluator.worker.op_trace import OpTrace
        with OpTrace() as first:
            torch.ones(3).add(1).mul(2)
        print(sorted(first.ops), "torch._dynamo" in sys.modules)
        compiled = torch.compile(lambda x: x.sin() + 1, backend="eager")  # a task that compiles
        with OpTrace() as later:
            compiled(torch.ones(3))
        raw = OpTrace.__dict__["__torch_dispatch__"].__wrapped__
        print(sorted(later.ops), "torch._dynamo" in sys.modules, getattr(raw, "__dynamo_disable").__name__)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == "['add', 'mul'] False"
    ops, loaded, wrapper = lines[-1].rsplit(" ", 2)
    assert ops == "['add', 'sin']" and loaded == "True"
    assert wrapper != "when_loaded"  # dynamo's own disable, as PyTorch would have cached it


def test_exit_at_once_flushes_the_output_and_runs_atexit_handlers():
    proc = _python("""
        import atexit
        from opforge.cli.program import exit_at_once
        atexit.register(lambda: print("atexit ran"))
        print("verdict", end=" ")
        exit_at_once(3)
        print("never")
    """)
    assert proc.returncode == 3 and proc.stdout == "verdict atexit ran\n", (proc.returncode, proc.stdout, proc.stderr)
