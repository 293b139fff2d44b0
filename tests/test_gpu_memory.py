"""A reference failure after the candidate loaded (issue 15, finding 5), decided on the CPU through the evaluator's own
code path: replayed alone in a fresh reference worker, it is the candidate's fault if it succeeds there, and the
task's error if it fails there too."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import Candidate, EvalConfig, Status, TaskError, load_task
from evaluator import evaluate

CANDIDATE = """import torch
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

# Fails from its fourth call in one process: as if something else on the device (the candidate) ran it out of memory
# after a while; a fresh process alone runs it fine.
FAILS_LATER = """import torch
import torch.nn as nn
N = 256
CALLS = [0]
class Model(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 3:
            raise RuntimeError("CUDA out of memory (simulated)")
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
"""

# Fails on its second shape variant wherever it runs: the task's own error.
FAILS_ALWAYS = FAILS_LATER.replace("CALLS[0] > 3", "x.numel() == 64").replace("N = 256", "N = 256\nSHAPES = [{'N': 64}]")

CFG = EvalConfig(device="cpu", max_timing_s=0.3, profile=False)


def _task(tmp_path: Path, source: str):  # noqa: ANN202
    path = tmp_path / "task_under_test.py"
    path.write_text(source)
    return load_task(path)


@pytest.mark.slow
def test_a_reference_that_succeeds_alone_makes_it_the_candidates_fault(tmp_path: Path):
    result = evaluate(_task(tmp_path, FAILS_LATER), Candidate.from_source(CANDIDATE), CFG)
    assert result.status == Status.RUNTIME_ERROR, result.reason
    assert "succeeds alone" in result.reason and "out of memory" in result.reason


@pytest.mark.slow
def test_a_reference_that_fails_alone_too_is_the_tasks_error(tmp_path: Path):
    with pytest.raises(TaskError, match="reference failed while computing expected outputs"):
        evaluate(_task(tmp_path, FAILS_ALWAYS), Candidate.from_source(CANDIDATE), CFG)


def test_peak_memory_is_taken_from_the_trials_after_the_first():
    from evaluator.measure.gpu_memory import steady_peak
    first_call_autotunes = [(900, 500), (100, 40), (120, 40), (110, 60)]
    assert steady_peak(first_call_autotunes) == (120, 60)
    assert steady_peak([(900, 500)]) == (900, 500)  # one trial: it is all there is
    assert steady_peak([(None, None), (None, None)]) == (None, None)  # the CPU reports none
