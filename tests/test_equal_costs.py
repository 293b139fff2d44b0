"""The driver's clock compares the two workers' round trips, so both must pay the same per-call costs (issue 15,
finding 6): the same guard checks per call in either role, and the deep checks outside the batches the driver times.
Both workers run here in-process on the CPU, their guards recording what they check."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from evaluator.wire.commands import Batch, Check, Load, Loop
from evaluator.worker.guards import Guards
from evaluator.worker.loop import Worker

TASK = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(32)]
def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""


class RecordingGuards(Guards):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.draw = lambda: 0.0  # the random share of calls whose copy operators are checked: all of them here

    def copy_ops_changed(self) -> str | None:
        self.calls.append("copy_ops")
        return super().copy_ops_changed()

    def dispatcher_changed(self, deep: bool) -> str | None:
        self.calls.append(f"dispatcher(deep={deep})")
        return super().dispatcher_changed(deep)

    def extra_threads(self) -> int:
        self.calls.append("threads")
        return super().extra_threads()


class ScriptedChannel:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, header: dict[str, Any], tensors: Any = None) -> None:
        self.sent.append(header)

    def recv(self) -> tuple[dict[str, Any], list[Any]]:
        raise AssertionError("no reply is expected in a batch")


@pytest.fixture(autouse=True)
def _earlier_children_are_not_the_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker runs inside the test process: processes that earlier tests left running (an evaluator's zygotes)
    are this process's children, and not the in-process candidate's."""
    from evaluator.sandbox import process_tree
    real = process_tree.live_children
    before = set(real(os.getpid()))
    monkeypatch.setattr(process_tree, "live_children", lambda pid: [p for p in real(pid) if p not in before])


def _worker(role: str) -> tuple[Worker, RecordingGuards, ScriptedChannel]:
    guards, channel = RecordingGuards(), ScriptedChannel()
    worker = Worker(channel, role, guards)  # type: ignore[arg-type]
    worker.cmd_load(Load(device="cpu", task_source=TASK, task_name="relu_costs", init_seeds=(1,),
                         candidate_source=CANDIDATE))
    assert channel.sent[-1]["status"] == "ready", channel.sent[-1]
    guards.calls.clear()
    return worker, guards, channel


def test_both_roles_pay_the_same_checks_in_a_timed_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    seen = {}
    for role in ("reference", "candidate"):
        worker, guards, channel = _worker(role)
        worker.cmd_batch(Batch(variant=0, seeds=(1, 2, 3), calls=True))
        assert channel.sent[-1] == {"status": "batched"}
        seen[role] = list(guards.calls)
    assert seen["reference"] == seen["candidate"] == ["copy_ops"] * 3
    assert not any(c.startswith("dispatcher") for c in seen["candidate"])  # the deep check is a later `check`


def test_the_deep_check_comes_on_its_own_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    worker, guards, channel = _worker("candidate")
    worker.cmd_check(Check())
    assert channel.sent[-1] == {"status": "checked"}
    assert "dispatcher(deep=True)" in guards.calls


def test_the_energy_loop_runs_back_to_back_calls_for_as_long_as_asked(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    worker, _, channel = _worker("candidate")
    worker.cmd_loop(Loop(variant=0, seed=7, seconds=0.05))
    assert channel.sent[-1]["status"] == "looped" and channel.sent[-1]["calls"] > 1
