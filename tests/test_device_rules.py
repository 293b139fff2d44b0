"""The driver's evaluation branches on a device's rules (`evaluator/device/rules.py`), each named for why it differs,
not on the kind's name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluator.device.rules import CPU, CUDA, rules

ROOT = Path(__file__).resolve().parent.parent
KIND_TEST = re.compile(r"""[!=]=\s*["'](?:cpu|cuda)["']""")


def test_each_resolved_kind_has_its_rules_and_nothing_else_does() -> None:
    assert rules("cpu") is CPU and rules("cuda") is CUDA
    with pytest.raises(ValueError, match="a resolved kind is cpu or cuda"):
        rules("auto")
    # What only the CPU needs: the candidate shares the timed cores, memory and caches with the trusted side.
    assert CPU.trusted_inputs and CPU.worker_cpu_read and CPU.keep_off_timed_cores and not CPU.gpu_memory_share
    assert CUDA.gpu_memory_share and not CUDA.trusted_inputs and CUDA.profiler == "ncu"


def test_the_evaluation_does_not_compare_kind_names() -> None:
    source = (ROOT / "evaluator" / "driver" / "evaluate.py").read_text(encoding="utf-8")
    found = [f"evaluate.py:{n}: {line.strip()}" for n, line in enumerate(source.splitlines(), 1)
             if KIND_TEST.search(line)]
    assert not found, "branch on device_rules.rules(kind) instead:\n" + "\n".join(found)
