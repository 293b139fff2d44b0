"""The timing protocol's own safeguards, with honest candidates (cheats live in tests/cheats)."""

from __future__ import annotations

from pathlib import Path

from evaluator import Candidate, EvalConfig, Status, load_task
from evaluator import evaluate

SLOW_REFERENCE = """import time
import torch
import torch.nn as nn
N = 256
class Model(nn.Module):
    def forward(self, x):
        time.sleep(0.08)   # a deliberately slow reference, so that an honest kernel is far above 10x
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""

RELU = """import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y + offs, tl.maximum(tl.load(x + offs, mask=mask), 0.0), mask=mask)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
"""


def test_speedup_above_threshold_is_flagged_and_confirmed_by_the_drivers_clock(tmp_path: Path):
    task_file = tmp_path / "slow_relu.py"
    task_file.write_text(SLOW_REFERENCE)
    result = evaluate(load_task(task_file), Candidate.from_source(RELU),
                      EvalConfig(device="cpu", max_timing_s=0.5, profile=False))
    assert result.status == Status.OK, result.reason
    assert result.speedup is not None and result.speedup > 10
    assert result.suspicious
    assert "confirmed" in result.reason


def test_profile_feedback_names_launches_and_torch_ops(tmp_path: Path):
    task_file = tmp_path / "relu_task.py"
    task_file.write_text(SLOW_REFERENCE.replace("time.sleep(0.08)", "pass"))
    result = evaluate(load_task(task_file), Candidate.from_source(RELU), EvalConfig(device="cpu", max_timing_s=0.3))
    assert result.status == Status.OK, result.reason
    assert result.profile.get("launches.triton", 0) >= 1
    assert any(key.endswith("self_cpu_us") for key in result.profile)
    assert result.device.interpreted and result.device.torch_version


PLAIN_TORCH = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
"""


def test_allow_torch_admits_a_pytorch_only_candidate_that_is_otherwise_refused(tmp_path: Path):
    task_file = tmp_path / "relu_task.py"
    task_file.write_text(SLOW_REFERENCE.replace("time.sleep(0.08)", "pass"))
    task, cand = load_task(task_file), Candidate.from_source(PLAIN_TORCH)
    refused = evaluate(task, cand, EvalConfig(device="cpu", max_timing_s=0.2, profile=False))
    assert refused.status == Status.REJECTED and "no custom kernel" in refused.reason and "--allow-torch" in refused.reason
    admitted = evaluate(task, cand, EvalConfig(device="cpu", max_timing_s=0.2, profile=False, allow_torch=True))
    assert admitted.status == Status.OK, admitted.reason


def test_meta_check_falls_back_to_cpu_for_a_task_that_needs_values(tmp_path: Path):
    from evaluator import default_evaluator
    task_file = tmp_path / "item_task.py"
    task_file.write_text("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
                         "        k = int(x.abs().max().item() > 0) + 1\n        return x * k\n"
                         "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n")
    report = default_evaluator().check_task(load_task(task_file), "meta")
    assert report.device.startswith("cpu")
    assert report.outputs[0][0]["shape"] == [8]
