"""`perf stat` counters for native CPU kernels (issue 19), with a fake `perf` on PATH that runs the real hardened
target (`python -m evaluator.profile.ncu_target`) and answers perf's control FIFOs as perf does; modes: ok, no hardware
counters (a VM), a permission error, a hang that leaves an orphan behind. Then one run of the real `perf` where this
machine has it, and one evaluation whose profile carries the counters."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from evaluator import EvalConfig, load_candidate, load_task
from evaluator import evaluate
from evaluator.profile import perf_stat

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"
NATIVE = ROOT / "tests" / "honest" / "relu_openmp_c.py"

FAKE_PERF = '''#!{python}
import os, subprocess, sys, threading, time
here = os.path.dirname(os.path.abspath(__file__))
mode = open(os.path.join(here, "mode")).read().strip()
args = sys.argv[1:]
out = args[args.index("-o") + 1]
events = args[args.index("-e") + 1].split(",")
target = args[args.index("--") + 1:]
probing = target == ["true"]
with open(os.path.join(here, "calls"), "a") as f:
    f.write(" ".join(args) + "\\n")
if mode == "perm":
    print("Error:\\nAccess to performance monitoring and observability operations is limited.")
    sys.exit(255)
if mode == "hang" and not probing:
    orphan = subprocess.Popen(["sleep", "300"])
    open(os.path.join(here, "orphan"), "w").write(str(orphan.pid))
    time.sleep(300)
commands = []
if not probing:
    ctl, ack = args[args.index("--control") + 1].removeprefix("fifo:").split(",")
    ctl_fd, ack_fd = os.open(ctl, os.O_RDWR), os.open(ack, os.O_RDWR)

    def answer():
        for line in os.fdopen(ctl_fd, "r"):
            commands.append(line.strip())
            os.write(ack_fd, b"ack\\n")
    threading.Thread(target=answer, daemon=True).start()
code = subprocess.call(target)
time.sleep(0.1)
if not probing:
    open(os.path.join(here, "commands"), "w").write(" ".join(commands))
rows = []
for e in events:
    counted = mode in ("ok", "hang") or e == "task-clock"
    rows.append(("%d" % (1000 + len(e)) if counted else "<not supported>") + ",," + e + ":u,1000,100.00,,")
open(out, "w").write("# started on Tue\\n\\n" + "\\n".join(rows) + "\\n")
sys.exit(code)
'''


@pytest.fixture()
def fake_perf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "perf"
    script.write_text(FAKE_PERF.format(python=sys.executable))
    script.chmod(0o755)
    (bin_dir / "mode").write_text("ok")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "native-cache"))
    perf_stat.probe.cache_clear()
    yield bin_dir
    perf_stat.probe.cache_clear()


def _profile(timeout_s: float = 120.0, **kw: object) -> perf_stat.PerfReport:
    return perf_stat.profile_with_perf(TASK.read_text(), "relu", NATIVE.read_text(), init_seed=1, seed=2,
                                       timeout_s=timeout_s, isolation="process", **kw)  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_perf_csv_lines_become_metrics_and_unsupported_events_are_named():
    text = ("# started on Mon\n\n10.13,msec,task-clock,10130000,100.00,1.992,CPUs utilized\n"
            "2100000,,cycles:u,10130000,100.00,,\n<not supported>,,LLC-loads,0,100.00,,\n"
            "<not counted>,,branches:u,0,0.00,,\n")
    metrics, missing = perf_stat.parse_perf_csv(text, ("task-clock", "cycles", "LLC-loads", "branches", "instructions"))
    assert metrics == {"perf.task-clock": 10.13, "perf.cycles": 2100000.0}
    assert missing == ("LLC-loads", "branches", "instructions")
    cmd = perf_stat.perf_command("/usr/bin/perf", ["python", "-m", "t"], "/job/perf.csv", ["cycles"], ["c", "a"])
    assert cmd[cmd.index("--delay") + 1] == "-1" and cmd[cmd.index("--control") + 1] == "fifo:c,a"
    assert cmd[-3:] == ["python", "-m", "t"]


@pytest.mark.slow
def test_the_counters_cover_one_call_switched_on_by_the_hardened_target(fake_perf: Path):
    report = _profile()
    assert report.problem is None and report.unsupported == (), report
    assert report.metrics["perf.cycles"] == 1006 and set(report.metrics) == {f"perf.{e}" for e in perf_stat.EVENTS}
    assert (fake_perf / "commands").read_text() == "enable disable"  # one window, around the call
    assert "evaluator.profile.ncu_target" in (fake_perf / "calls").read_text()


def test_without_hardware_counters_no_profiled_run_is_made_and_the_note_says_why(fake_perf: Path):
    (fake_perf / "mode").write_text("vm")
    report = _profile()
    assert report.metrics == {} and report.problem is None and "cycles" in report.unsupported
    assert "task-clock" not in report.unsupported
    assert report.note() is not None and report.note().startswith("perf cannot count cycles, instructions")
    assert (fake_perf / "calls").read_text().count("\n") == 1  # the probe only


@pytest.mark.parametrize("mode,runs", [("ok", True), ("vm", False), ("perm", False)])
def test_a_run_is_announced_exactly_where_one_will_be_made(fake_perf: Path, mode: str, runs: bool):
    """The driver takes the timed phase for a run under perf only (evaluate.py): a probe that finds no hardware
    counter, or no permission, must not wait for it."""
    (fake_perf / "mode").write_text(mode)
    assert perf_stat.makes_a_run() is runs
    assert perf_stat.makes_a_run(require_hardware=False) is (mode != "perm")


def test_a_permission_error_is_one_sentence(fake_perf: Path):
    (fake_perf / "mode").write_text("perm")
    report = _profile()
    assert report.metrics == {} and report.problem == perf_stat.PERMISSION_PROBLEM
    assert report.note() == f"no perf counters: {perf_stat.PERMISSION_PROBLEM}"


def test_a_hung_perf_is_killed_whole_orphans_included(fake_perf: Path):
    (fake_perf / "mode").write_text("hang")
    report = _profile(timeout_s=3.0)
    assert report.problem is not None and "did not finish within 3 s" in report.problem
    orphan = int((fake_perf / "orphan").read_text())
    time.sleep(0.2)
    assert not _alive(orphan)


@pytest.mark.skipif(shutil.which("perf") is None, reason="no perf on this machine")
def test_the_real_perf_counts_only_the_window_the_target_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "native-cache"))
    perf_stat.probe.cache_clear()
    report = _profile()  # with the real events: counters where this machine has a PMU, else the note
    assert report.problem is None, report.problem
    assert report.metrics or report.unsupported
    windowed = _profile(events=("task-clock",), require_hardware=False)  # the control FIFOs of the real perf
    assert windowed.problem is None and windowed.metrics.get("perf.task-clock", 0) > 0, windowed


@pytest.mark.slow
def test_an_evaluation_of_a_native_kernel_carries_the_counters(fake_perf: Path):
    result = evaluate(load_task(TASK), load_candidate(NATIVE), EvalConfig(max_timing_s=0.2, sandbox="process"))
    assert result.status.value == "ok" and result.backend == "cpp", result.reason
    assert result.profile["perf.instructions"] == 1012 and "perf" not in result.reason
    (fake_perf / "mode").write_text("vm")
    perf_stat.probe.cache_clear()
    again = evaluate(load_task(TASK), load_candidate(NATIVE), EvalConfig(max_timing_s=0.2, sandbox="process"))
    assert not any(k.startswith("perf.") for k in again.profile) and "perf cannot count cycles" in again.reason
