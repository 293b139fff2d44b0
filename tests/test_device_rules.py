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


# The trusted side's packages branch on a device's rules, each named for why it differs. What stays is a kind's
# identity, not a difference of method: a user's `--device` string that may still be `auto`.
KIND_NAMES_ALLOWED = {
    "driver/ray_runner.py": "cfg.device is the user's request (auto, cpu or cuda), read before any device resolves",
}


def test_the_trusted_side_does_not_compare_kind_names() -> None:
    found = []
    for package in ("driver", "measure", "verify", "profile"):
        for path in sorted((ROOT / "evaluator" / package).glob("*.py")):
            rel = f"{package}/{path.name}"
            if rel in KIND_NAMES_ALLOWED:
                continue
            found += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
                      if KIND_TEST.search(line)]
    assert len(found) == 0, "branch on device.rules.rules(kind) instead:\n" + "\n".join(found)
    assert all((ROOT / "evaluator" / rel).is_file() for rel in KIND_NAMES_ALLOWED)  # the list names real files


def test_every_rule_is_set_for_both_kinds_and_some_differ_for_a_reason() -> None:
    """A field added to the rules gets a value for each kind (a dataclass without defaults refuses a missing one), and
    the fields that name a method differ between the kinds: that is why they exist."""
    assert CPU.host_timer and not CUDA.host_timer
    assert CPU.energy_meter == "rapl" and CUDA.energy_meter == "nvml"
    assert CPU.triton_interpreted and not CUDA.triton_interpreted
    assert CPU.machine_load_read and not CUDA.machine_load_read
    assert CPU.clock_gap_floor_ms > CUDA.clock_gap_floor_ms > 0
