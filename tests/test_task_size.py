"""A task that cannot fit is refused before it runs, in one sentence (evaluator/worker/task_size.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import load_candidate, load_task
from evaluator.task import TaskError
from evaluator.worker.task_size import GIB, HELD_COPIES, TaskSize, available_bytes, measure_on_meta, refusal

ROOT = Path(__file__).resolve().parent.parent
TOO_BIG = ROOT / "tests" / "tasks" / "relu_too_big.py"


def test_a_task_is_sized_on_the_meta_device_without_allocating_it():
    sizes = measure_on_meta(TOO_BIG.read_text(), "relu_too_big", 1)
    assert sizes == [TaskSize(input_bytes=4096 * 8 * 393216 * 4, weight_bytes=0)]  # 48 GiB, none of it allocated
    layernorm = measure_on_meta((ROOT / "benchmarks" / "tiny" / "layernorm.py").read_text(), "layernorm", 3)
    assert layernorm is not None and len(layernorm) == 3 and layernorm[0].weight_bytes > 0  # its affine parameters


def test_the_refusal_names_the_task_the_need_and_what_the_machine_has_or_the_cap():
    size = TaskSize(6 * GIB, 1 * GIB)
    over_available = refusal("tasks/big.py", [size], available=20 * GIB, limit_bytes=64 * GIB)
    assert over_available is not None and over_available.startswith("tasks/big.py: needs about 28.0 GiB")
    assert "20.0 GiB available" in over_available and "smaller size" in over_available
    over_cap = refusal("tasks/big.py", [size], available=None, limit_bytes=4 * GIB)
    assert over_cap is not None and "4 GiB address-space cap" in over_cap
    assert refusal("tasks/big.py", [size], available=HELD_COPIES * 7 * GIB, limit_bytes=16 * GIB) is None
    assert refusal("tasks/big.py", [], available=1, limit_bytes=1) is None  # unknown size: nothing refused here
    assert TaskSize.from_wire({"input_bytes": -1, "weight_bytes": 0}) is None
    assert TaskSize.from_wire("6 GiB") is None


def test_available_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   20971520 kB\n")
    assert available_bytes(meminfo) == 20 * GIB
    meminfo.write_text("MemTotal:       24000000 kB\n")
    assert available_bytes(meminfo) is None


def test_an_evaluation_and_the_task_check_refuse_a_task_too_big_before_drawing_it():
    from evaluator import default_evaluator
    with pytest.raises(TaskError, match="address-space cap|needs about"):
        default_evaluator().evaluate(load_task(TOO_BIG), load_candidate(ROOT / "benchmarks" / "tiny" / "relu.cpp.py"))
    done = subprocess.run([sys.executable, "-m", "opforge", "task", "check", str(TOO_BIG)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode != 0 and "48.0 GiB of inputs" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
