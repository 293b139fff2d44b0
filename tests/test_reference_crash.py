"""A reference worker that dies says why: the task's error quotes the end of its output. The first run on a GPU found
every worker dying at its device warm-up with nothing but "died while loading the task" to go on; the cause (a
traceback in the worker's log) was only found by a second run."""

from __future__ import annotations

import pytest

from evaluator import Candidate, EvalConfig
from evaluator import evaluate
from evaluator.task import TaskError, task_from_source

DIES_RUNNING = '''import os, sys
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        print("reference-marker: the device is gone", file=sys.stderr, flush=True)
        os._exit(3)

def get_inputs():
    return [torch.randn(8)]

def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
'''


def test_a_reference_that_dies_quotes_its_last_output():
    task = task_from_source(DIES_RUNNING, "dies_running")
    with pytest.raises(TaskError) as caught:
        evaluate(task, Candidate.from_source(CANDIDATE), EvalConfig(device="cpu", profile=False))
    message = str(caught.value)
    assert "the reference process died while" in message
    assert "reference-marker: the device is gone" in message
