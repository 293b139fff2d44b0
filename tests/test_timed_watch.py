"""The watch around timed calls: the candidate's calls in it as its checked calls are, the reference's after an empty
one (the profiler's record of every operator, 4-11 us each, inflated a many-operator reference's time: 7-9% of
gelu_bn_pool's call, until 2026-11-29), and the copy grants only for a source that names Triton (issue 18).
Both workers run in-process on the CPU."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evaluator.worker import call_watch
from evaluator.backend import names_triton
from evaluator.wire.commands import Batch, Load, Time
from evaluator.worker.guards import Guards
from evaluator.worker.loop import Worker

# What the forward saw inside its call: whether the profiler was on, how many dispatch modes were active.
TASK = """import torch
import torch.nn as nn
SEEN = []
class Model(nn.Module):
    def forward(self, x):
        SEEN.append((torch.autograd._profiler_enabled(), torch._C._len_torch_dispatch_stack()))
        return torch.relu(x)
def get_inputs():
    return [torch.randn(32)]
def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
import torch.nn as nn
SEEN = []
class ModelNew(nn.Module):
    def forward(self, x):
        SEEN.append((torch.autograd._profiler_enabled(), torch._C._len_torch_dispatch_stack()))
        return torch.relu(x)
"""


class ScriptedChannel:
    """Answers each timed call with the driver's word: `calls` calls, outputs never kept (and `go` to each call whose
    inputs the worker has drawn)."""

    def __init__(self, calls: int = 0) -> None:
        self.sent: list[dict[str, Any]] = []
        self.calls = calls

    def send(self, header: dict[str, Any], tensors: Any = None) -> None:
        self.sent.append(header)

    def recv(self) -> tuple[dict[str, Any], list[Any]]:
        if self.sent and self.sent[-1].get("status") == "armed":
            return {"cmd": "go"}, []
        self.calls -= 1
        return {"cmd": "next", "next_seed": self.calls if self.calls > 0 else None}, []


@pytest.fixture(autouse=True)
def _earlier_children_are_not_the_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluator.sandbox import process_tree
    real = process_tree.live_children
    before = set(real(os.getpid()))
    monkeypatch.setattr(process_tree, "live_children", lambda pid: [p for p in real(pid) if p not in before])


def _seen(role: str, copy_grants: bool, require_kernels: bool, command: Any,
          entered: list[str] | None = None) -> list[tuple[bool, int]]:
    """What the forward saw in each call of `command`; `entered`, where given, is emptied right before it."""
    guards, channel = Guards(), ScriptedChannel()
    guards.stores_accounted = True  # as under the interpreter (the ledger's hooks themselves are not needed here)
    worker = Worker(channel, role, guards)  # type: ignore[arg-type]
    worker.cmd_load(Load(device="cpu", task_source=TASK, task_name="relu_watch", init_seeds=(1,),
                         candidate_source=CANDIDATE if role == "candidate" else None,
                         require_kernels=require_kernels, copy_grants=copy_grants))
    assert channel.sent[-1]["status"] == "ready", channel.sent[-1]
    seen = worker.rt.module.SEEN if role == "reference" else worker.model_cls.forward.__globals__["SEEN"]
    seen.clear()
    channel.calls = 3
    if entered is not None:
        entered.clear()
    getattr(worker, f"cmd_{command.NAME}")(command)
    # (The candidate here computes with PyTorch: refused where its calls are watched, after what it saw is recorded.)
    assert channel.sent[-1]["status"] in ("timed", "batched", "rejected"), channel.sent[-1]
    return list(seen)


@pytest.mark.parametrize("command", [Time(variant=0, seed=5), Batch(variant=0, seeds=(1, 2), calls=True)],
                         ids=["time", "batch"])
@pytest.mark.parametrize("copy_grants", [True, False])
def test_the_candidate_calls_under_the_watch_and_the_reference_after_an_empty_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: Any, copy_grants: bool):
    monkeypatch.chdir(tmp_path)
    entered: list[str] = []
    real = call_watch.watched

    def counted(guards: Guards, observe: bool, seen: dict[str, Any], *args: Any) -> Any:
        entered.append("watch")
        return real(guards, observe, seen, *args)
    monkeypatch.setattr(call_watch, "watched", counted)
    reference = _seen("reference", copy_grants, True, command, entered)
    reference_watches = len(entered)
    candidate = _seen("candidate", copy_grants, True, command)
    assert reference and candidate
    # The reference's operators unrecorded (the profiler off inside its calls), yet a watch entered and left for each
    # of them: the same fixed costs in both windows of the driver's clock.
    assert set(reference) == {(False, 0)}
    assert reference_watches == len(reference)
    # The profiler on in the candidate's; the grants' dispatch mode where the source needs it (in the reference's
    # worker, its first operator would import dynamo).
    assert set(candidate) == {(True, 1 if copy_grants else 0)}


def test_without_the_kernel_requirement_neither_role_is_watched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    for role in ("reference", "candidate"):
        assert set(_seen(role, True, False, Time(variant=0, seed=5))) == {(False, 0)}


def test_the_grants_follow_the_source_naming_triton():
    assert names_triton("import triton\nimport triton.language as tl\n")
    assert names_triton("from triton import jit\n")
    assert not names_triton("from evaluator.native import load_c\nlib = load_c('relu', SRC, ['relu'])\n")
    assert not names_triton("x = 'tritonic'\n")


def test_a_triton_only_call_without_grants_is_judged_more_strictly():
    """Without the grants a PyTorch copy of a kernel's bytes is not the kernel's: refused, and the reason says why."""
    guards = Guards()
    guards.stores_accounted = True
    src, kernels = torch.arange(6, dtype=torch.float32), {"triton:copy": 1}
    for grants in (True, False):
        seen: dict[str, Any] = {}
        with call_watch.watched(guards, False, seen, grants):
            ptrs = src.data_ptr() + np.arange(6, dtype=np.uint64) * 4
            guards.ledger.record_elements(ptrs, src.numpy(), None)  # the kernel's stores
            out = src.clone()  # the output: PyTorch's copy of them
        found = call_watch.problem(guards, [out], kernels, seen, [src])
        if grants:
            assert found is None
        else:
            assert found is not None and "6 of the 6 values" in found and "does not name Triton" in found


def _glue_call(reduce: Any) -> str | None:
    """A Triton-only call observed under the rule for PyTorch inside a candidate: the kernel stores a row of squared
    differences, `reduce` (PyTorch) makes the output from them."""
    guards = Guards()
    guards.stores_accounted = True
    sq, kernels = torch.arange(64, dtype=torch.float32), {"triton:squared_diff": 1}
    seen: dict[str, Any] = {}
    with call_watch.watched(guards, True, seen, True):
        ptrs = sq.data_ptr() + np.arange(64, dtype=np.uint64) * 4
        guards.ledger.record_elements(ptrs, sq.numpy(), None)
        out = reduce(sq)
    return call_watch.problem(guards, [out], kernels, seen, [sq], glue=True)


def test_a_scalar_that_pytorch_summed_from_a_kernels_output_is_not_unwritten_under_the_rule():
    assert _glue_call(torch.sum) is None
    # more output values than PyTorch's compute read stay unwritten: not values its compute could have made
    found = _glue_call(lambda sq: torch.sum(sq[:2]).expand(64).clone())  # 64 values from 2 elements read
    assert found is not None and "of the 64 values of output 0 were not written by any kernel" in found


def test_a_timed_call_may_not_compute_more_with_pytorch_than_a_checked_one():
    guards = Guards()
    x = torch.randn(256)
    seen: dict[str, Any] = {}
    with call_watch.watched(guards, True, seen, False):
        out = torch.sum(x)
    assert call_watch.problem(guards, [out], {"cpp:k": 1}, seen, [x], glue=True, glue_limit=256) is None
    found = call_watch.problem(guards, [out], {"cpp:k": 1}, seen, [x], glue=True, glue_limit=100)
    assert found is not None and "timed call computed more with PyTorch" in found
