"""Inputs are drawn on the run's device with that device's seeded generator (issue 15, finding 7). On the CPU the same
code path runs with the CPU; a default device set elsewhere (here: meta) must not decide where inputs are drawn."""

from __future__ import annotations

import torch

from evaluator.worker.task_runtime import TaskRuntime

TASK = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x, y):
        return x + y
def get_inputs():
    return [torch.randn(64), torch.rand(8, 8)]
def get_init_inputs():
    return []
"""


def test_inputs_are_drawn_on_the_runs_device_whatever_the_default_device():
    torch.set_default_device("meta")  # what a GPU run stands in for: the factory calls must follow the run's device
    try:
        rt = TaskRuntime(TASK, "draws", "cpu")
        inputs = rt.inputs(0, 1234)
        normal = rt.inputs(0, 1234, "normal")
        perturbed = rt.inputs(0, 1234, "perturbed")
    finally:
        torch.set_default_device(None)
    assert all(x.device.type == "cpu" for x in inputs + normal + perturbed)
    again = TaskRuntime(TASK, "draws", "cpu").inputs(0, 1234)
    assert all(torch.equal(a, b) for a, b in zip(inputs, again))  # seeded: both workers draw the same values
    assert not torch.equal(inputs[0], TaskRuntime(TASK, "draws", "cpu").inputs(0, 1235)[0])
    assert sum(int((a != b).sum()) for a, b in zip(inputs, perturbed)) == 1
