"""Nsight Compute's driver side on the CPU (issue 15, finding 4), with a fake `ncu` on PATH: a script that runs the
real target process (`python -m evaluator.profile.ncu_target`, hardened as a candidate worker) and writes a CSV as ncu does.
Modes: ok, a permission error, a metric it does not know, and a hang that leaves an orphan behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from evaluator.profile import ncu
from evaluator.wire.commands import Built
from evaluator.profile.ncu_builds import FileBuildServer, FileChannel

ROOT = Path(__file__).resolve().parent.parent
TASK = (ROOT / "benchmarks" / "tiny" / "add_mul.py").read_text()
SEED = (ROOT / "benchmarks" / "tiny" / "add_mul.seed.py").read_text()

FAKE_NCU = '''#!{python}
import os, subprocess, sys, time
here = os.path.dirname(os.path.abspath(__file__))
mode = open(os.path.join(here, "mode")).read().strip()
args = sys.argv[1:]
open(os.path.join(here, "argv"), "w").write("\\n".join(args))
log = args[args.index("--log-file") + 1]
metrics = args[args.index("--metrics") + 1].split(",")
target = args[args.index("--log-file") + 2:]
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
if mode == "unknown" and "made_up__metric" in metrics:
    print("==ERROR== Failed to find metric made_up__metric")
    sys.exit(1)
if mode == "hang":
    orphan = subprocess.Popen(["sleep", "300"])
    open(os.path.join(here, "orphan"), "w").write(str(orphan.pid))
    time.sleep(300)
code = subprocess.call(target)
if code == 0:
    head = ",".join('"%s"' % h for h in ["ID", "Kernel Name"] + metrics)
    units = ",".join('"%s"' % u for u in ["", ""] + ["nsecond" if m.startswith("gpu__time") else "%" for m in metrics])
    row = ",".join('"%s"' % v for v in ["0", "add_mul_kernel"] + ["1000" if m.startswith("gpu__time") else "50"
                                                                     for m in metrics])
    open(log, "w").write("==PROF== Connected to process 1\\n" + "\\n".join([head, units, row]) + "\\n")
sys.exit(code)
'''


@pytest.fixture()
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ncu"
    script.write_text(FAKE_NCU.format(python=sys.executable))
    script.chmod(0o755)
    (bin_dir / "mode").write_text("ok")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def _profile(candidate: str = SEED, timeout_s: float = 120.0) -> ncu.NcuReport:
    return ncu.profile_with_ncu(TASK, "add_mul", candidate, init_seed=1, seed=2, timeout_s=timeout_s,
                                isolation="process", device="cpu")


def test_the_command_line_keeps_the_timings_clocks_and_base_units():
    cmd = ncu.ncu_command("/opt/ncu", ["python", "-m", "t"], "/job/ncu.csv", ["a.sum", "b.pct"])
    assert cmd[0] == "/opt/ncu" and cmd[-3:] == ["python", "-m", "t"]
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--print-units") + 1] == "base"
    assert cmd[cmd.index("--metrics") + 1] == "a.sum,b.pct"
    assert cmd[cmd.index("--nvtx-include") + 1] == "opforge/"


@pytest.mark.slow
def test_a_profile_runs_the_hardened_target_and_parses_its_csv(fake_ncu: Path):
    report = _profile()
    assert report.problem is None, report.problem
    assert report.metrics["ncu.kernels"] == 1 and report.metrics["ncu.gpu__time_duration.sum"] == 1000
    assert "evaluator.profile.ncu_target" in (fake_ncu / "argv").read_text()


@pytest.mark.slow
def test_the_target_is_guarded_like_a_candidate_worker(fake_ncu: Path):
    cheat = SEED.replace("import torch\n", "import torch\nimport time\ntime.perf_counter = lambda: 0.0\n", 1)
    report = _profile(cheat)
    assert report.problem is not None and "time.perf_counter" in report.problem and not report.metrics


def test_a_permission_error_is_reported(fake_ncu: Path):
    (fake_ncu / "mode").write_text("perm")
    report = _profile()
    assert report.problem is not None and "ERR_NVGPUCTRPERM" in report.problem


@pytest.mark.slow
def test_an_unknown_metric_is_dropped_not_fatal(fake_ncu: Path, monkeypatch: pytest.MonkeyPatch):
    (fake_ncu / "mode").write_text("unknown")
    monkeypatch.setattr(ncu, "NCU_METRICS", (*ncu.NCU_METRICS, "made_up__metric"))
    report = _profile()
    assert report.dropped == ("made_up__metric",)
    assert report.problem is None and report.metrics["ncu.kernels"] == 1


def test_a_hung_profile_is_killed_whole_orphans_included(fake_ncu: Path):
    (fake_ncu / "mode").write_text("hang")
    report = _profile(timeout_s=3.0)
    assert report.problem is not None and "did not finish within 3 s" in report.problem
    orphan = int((fake_ncu / "orphan").read_text())
    time.sleep(0.2)
    assert not _alive(orphan)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def test_build_requests_of_the_target_are_answered_by_the_drivers_build_server(tmp_path: Path):
    asked = []

    def answer(spec: object, timeout_s: float, kind: object = None):  # noqa: ANN202 - BuildServer.answer's shape
        asked.append((spec, kind))
        import torch
        return Built("linked", cached=True), [torch.tensor([1, 2, 3], dtype=torch.uint8)]

    with FileBuildServer(tmp_path, answer, timeout_s=5):
        channel = FileChannel(tmp_path, timeout_s=5)
        channel.send({"status": "build", "spec": {"name": "ext"}, "kind": "cuda"})
        reply, blobs = channel.recv()
        channel.send({"status": "build", "spec": {"name": "lib"}, "kind": "native"})  # load_c's: the native stage
        channel.recv()
    assert asked == [({"name": "ext"}, "cuda"), ({"name": "lib"}, "native")]
    assert reply["verdict"] == "linked" and reply["cached"] is True
    assert blobs[0].tolist() == [1, 2, 3]
