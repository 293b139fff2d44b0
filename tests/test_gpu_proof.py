"""scripts/gpu_proof.py, issue 8's measurement script, kept runnable between GPU sessions: its parsing and sizing
helpers, and a dry run of its parts on the CPU (figures that prove nothing about a GPU; the script must simply work
when a session has one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_proof  # noqa: E402

CSV = '''==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum"
"","","usecond"
"0","a","10"
"1","b","2"
"2","a","11"
"3","b","2"
"4","a","30"
"5","b","3"
'''


def test_ncu_rows_become_a_median_per_call_in_milliseconds():
    assert gpu_proof.per_call_median_ms(CSV, calls=3) == pytest.approx(0.013)  # calls of 12, 13 and 33 us
    assert gpu_proof.per_call_median_ms(CSV, calls=4) is None  # 6 kernels do not split into 4 equal calls
    assert gpu_proof.per_call_median_ms(CSV.replace('"usecond"', '"us"'), calls=3) == pytest.approx(0.013)
    assert gpu_proof.per_call_median_ms(CSV.replace('"usecond"', '"furlong"'), calls=3) is None
    assert gpu_proof.per_call_median_ms("==PROF== nothing profiled\n", calls=3) is None


def test_sized_source_sets_each_constant_once_and_refuses_a_missing_one():
    source = "BATCH = 256\nDIM = 1024\nX = BATCH\n"
    assert gpu_proof.sized_source(source, {"BATCH": 8, "DIM": 16}) == "BATCH = 8\nDIM = 16\nX = BATCH\n"
    with pytest.raises(SystemExit, match="'M = <int>'"):
        gpu_proof.sized_source(source, {"M": 4})


def test_memory_bound_is_decided_by_the_measured_ridge_point():
    env = {"copy_gbps": 3000.0, "bf16_tflops": 750.0}  # ridge: 250 FLOP per byte
    assert gpu_proof.memory_bound(flops=0.0, min_bytes=1 << 20, env=env)
    assert not gpu_proof.memory_bound(flops=2 * 4096**3, min_bytes=3 * 2 * 4096**2, env=env)
    assert gpu_proof.memory_bound(flops=0.0, min_bytes=1, env={"copy_gbps": 4.0})  # no rate measured: no FLOPs only
    assert not gpu_proof.memory_bound(flops=10.0, min_bytes=1, env={"copy_gbps": 4.0})


@pytest.mark.slow
def test_a_dry_run_on_cpu_writes_every_part_it_ran(tmp_path):
    out = tmp_path / "proof"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_proof.py"), "--device", "cpu", "--out",
                           str(out), "--parts", "env,warmup,timer,calibration,cap,lock,prompt,loop",
                           "--loop-evals", "2", "--timing-s", "0.1"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "gpu_proof.json").read_text())
    assert data["env"]["copy_gbps"] > 0
    assert [r["case"].split("[")[0] for r in data["timer"]] == [c.task for c in gpu_proof.TIMER_CASES]
    assert all(r["opforge_ms"] > 0 and r["do_bench_ms"] > 0 and r["ncu_ms"] is None for r in data["timer"])
    assert data["loop"][0]["evaluations"] == 2 and data["loop"][0]["by_status"] == {"ok": 2}
    assert data["prompt"]["profile_metrics"] > 0
    assert data["warmup"]["ok"] and data["warmup"]["tampered_after_first_launch"] is None
    assert data["calibration"]["empty_call_ms"] >= 0 and data["calibration"]["tiny_kernel_opforge_ms"] > 0
    assert data["cap"]["ok"] and data["cap"]["honest_status"] == "ok"
    assert data["lock"]["ok"] and data["lock"]["timed_phases"] >= 2 and data["lock"]["most_at_once"] == 1
    prompt = (out / "judge_prompt.txt").read_text()
    assert "softmax" in prompt and "BATCH = 8" in prompt  # the task at the size it ran, rendered for the judge
    tables = (out / "gpu_proof.md").read_text()
    assert all(f"### {part}" in tables for part in ("env", "warmup", "timer", "calibration", "cap", "lock", "prompt",
                                                    "loop"))
    assert "### sol" not in tables
