"""The reference's zygote forked from a driver that imported torch (`forked_zygote.py`): taken only where it is the
zygote an exec would start, and an evaluation through it gives the same verdict."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evaluator.sandbox.forked_zygote import refusal
from evaluator.sandbox.zygote_env import openmp_environment

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "benchmarks" / "tiny"


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The environment a forked zygote must match: the driver's OpenMP and Kineto settings, as `opforge eval` sets them.
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE_PROCESS_", "COV_CORE_"))}
    full = {**base, **openmp_environment(base), "KINETO_LOG_LEVEL": "6", "PYTHONPATH": str(REPO), **env}
    full.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                          timeout=300, cwd=REPO)


def test_only_the_references_zygote_on_a_cpu_is_forked():
    assert "reference" in (refusal("candidate", "cpu") or "")
    assert "CPU" in (refusal("reference", "cuda") or "")


def test_a_fork_needs_torch_imported_one_thread_and_the_zygotes_environment():
    proc = _python("""
        import os, sys, threading
        from evaluator.sandbox.forked_zygote import refusal
        print(refusal("reference", "cpu"))  # no torch yet: an exec costs the same
        import torch
        print(refusal("reference", "cpu"))
        env = dict(os.environ)
        print(refusal("reference", "cpu", {**env, "OMP_WAIT_POLICY": "ACTIVE"}))
        print(refusal("reference", "cpu", {k: v for k, v in env.items() if k != "KINETO_LOG_LEVEL"}))
        print(refusal("reference", "cpu", {**env, "COVERAGE_PROCESS_START": "x"}))
        t = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
        t.start()
        print(refusal("reference", "cpu"))
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert "torch is not imported" in lines[0]
    assert lines[1] == "None"
    assert lines[2].endswith("OMP_WAIT_POLICY") and lines[3].endswith("KINETO_LOG_LEVEL")
    assert lines[4].endswith("COVERAGE_PROCESS_START")
    assert "threads" in lines[5]


@pytest.mark.parametrize("task, candidate, expected", [
    (TINY / "relu.py", TINY / "relu.seed.py", "ok"),
    # Found as its own zygote's sibling (a forked zygote's command line is the driver's), the reference's workers
    # are signalled: the seccomp filter kills the candidate's worker as it would beside an exec'd zygote.
    (REPO / "tests" / "tasks" / "poly_sized.py", REPO / "tests" / "cheats" / "native_stop_reference.py", "crashed"),
])
def test_an_evaluation_through_a_forked_reference_zygote_gives_its_verdict_and_the_zygote_is_a_fork(
        task: Path, candidate: Path, expected: str):
    proc = _python("""
        import os, sys
        from evaluator.build.cache import BuildCache
        from evaluator.driver.warm_start import WarmZygotes
        zygotes = WarmZygotes.for_cache(BuildCache.open(), flush_ahead=False, fork_reference=True)
        zygotes.warm("cpu", "process", roles=("candidate",))
        from evaluator.driver.evaluate import LocalEvaluator
        from evaluator.config import EvalConfig
        from evaluator.task import load_task
        from evaluator.candidate import load_candidate
        zygotes.warm("cpu", "process", roles=("reference",))
        reference = zygotes.get("cpu", "reference", "process")
        pid = reference.host_pid
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        result = LocalEvaluator(zygotes=zygotes).evaluate(load_task(sys.argv[1]), load_candidate(sys.argv[2]),
                                                          EvalConfig(device="cpu", sandbox="process", max_timing_s=0.3))
        # Read once it has served: right after the fork it may not have left the driver's directory yet.
        print("forked", b"evaluator.worker.zygote" not in cmdline, os.getpgid(pid) == pid, os.readlink(f"/proc/{pid}/cwd"))
        print("status", result.status.value, result.reason[:200])
        zygotes.close()
        print("closed", reference.host_pid is None)
    """.replace("sys.argv[1]", repr(str(task))).replace("sys.argv[2]", repr(str(candidate))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.split("\n")
    assert "forked True True /tmp" in out, proc.stdout
    assert any(line.startswith(f"status {expected}") for line in out), proc.stdout + proc.stderr[-2000:]
    assert "closed True" in out
