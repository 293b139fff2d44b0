"""The rule for PyTorch inside a candidate (`evaluator/verify/torch_rule.py`): PyTorch's compute measured against the
reference's by the same observer, glue accepted, the reference's work done by PyTorch refused."""

from __future__ import annotations

import argparse

import pytest
import torch
import torch.nn.functional as F

from evaluator.driver.connection import Refused
from evaluator.worker.observer import CallObserver
from evaluator.verify.torch_rule import GLUE_SHARE, RULE_ANY, RULE_GLUE, RULE_STRICT, refuse_torch_share, rule_name, torch_share
from evaluator.wire.replies import Ran
from opforge.reports.leaderboard import bench_torch_rule


def _reads(call) -> int:
    with torch.no_grad():
        observer = CallObserver()
        with observer:
            call()
    glue = observer.glue_work()
    assert glue is not None
    return glue[0]


def _share(candidate, reference) -> float | None:
    return torch_share(Ran(torch_work=_reads(candidate)), Ran(torch_work=_reads(reference)))


X, Y = torch.randn(64, 256), torch.randn(64, 256)


def test_a_mean_of_a_kernels_squared_differences_is_glue():
    squared = (X - Y) ** 2  # what the kernel wrote, outside the observed call
    share = _share(lambda: torch.mean(squared), lambda: F.mse_loss(X, Y))
    assert share is not None and share <= GLUE_SHARE


def test_a_sort_feeding_a_kernel_is_glue():
    weights = torch.softmax(torch.randn(256), 0)
    share = _share(lambda: torch.sort(X, dim=-1), lambda: (torch.sort(X, dim=-1).values * weights).sum(-1))
    assert share is not None and share <= GLUE_SHARE


def test_the_reference_under_another_name_is_refused():
    share = _share(lambda: torch.clamp_min(X, 0.0), lambda: torch.relu(X))
    assert share is not None and share > GLUE_SHARE
    with pytest.raises(Refused, match="read 100% of what the reference's read"):
        refuse_torch_share(0, share, Ran(torch_ops=("aten::clamp_min",)))


def test_the_reference_spread_over_small_calls_adds_up():
    flat = X.reshape(-1)
    share = _share(lambda: [torch.clamp_min(flat[i:i + 256], 0.0) for i in range(0, flat.numel(), 256)],
                   lambda: torch.relu(X))
    assert share is not None and share >= 1.0


def test_pytorch_doing_most_of_a_loss_is_refused():
    d = X - Y  # a token kernel's subtraction
    share = _share(lambda: (d * d).mean(), lambda: F.mse_loss(X, Y))
    assert share is not None and share > GLUE_SHARE


def test_operators_called_from_inside_another_count_once():
    # mse_loss calls mean and sum inside: the reference's reads are what mse_loss itself reads
    assert _reads(lambda: F.mse_loss(X, Y)) == 2 * X.numel()


def test_compute_where_the_reference_computes_nothing_is_refused():
    share = torch_share(Ran(torch_work=10), Ran(torch_work=0))
    assert share == float("inf")
    with pytest.raises(Refused, match="more than the reference computes at all"):
        refuse_torch_share(2, share, Ran(torch_ops=("aten::add",)))


def test_no_pytorch_compute_has_no_share_and_an_unmeasured_call_none():
    assert torch_share(Ran(torch_work=0), Ran(torch_work=100)) == 0.0
    assert torch_share(Ran(), Ran(torch_work=100)) is None
    refuse_torch_share(0, None, Ran())
    refuse_torch_share(0, GLUE_SHARE, Ran())  # the bound itself is accepted


def test_rule_names_and_the_leaderboards_rule_of_a_stored_bench():
    assert rule_name(False, False) == RULE_GLUE
    assert rule_name(False, True) == RULE_STRICT
    assert rule_name(True, False) == RULE_ANY
    assert bench_torch_rule({"eval": {"allow_torch": False, "kernels_only": False}}) == RULE_GLUE
    assert bench_torch_rule({"eval": {"allow_torch": False, "kernels_only": True}}) == RULE_STRICT
    assert bench_torch_rule({"eval": {"allow_torch": False}}) == RULE_STRICT  # stored before the rule existed
    assert bench_torch_rule({"eval": {"allow_torch": True}}) == RULE_ANY


def test_the_eval_command_passes_kernels_only():
    from opforge.cli.commands.eval import config_from
    base = dict(device="cpu", allow_torch=False, timing_s=1.0, sandbox="process", compile_baseline=False,
                timeout=None)
    assert config_from(argparse.Namespace(**base, kernels_only=True)).kernels_only is True
    assert config_from(argparse.Namespace(**base, kernels_only=False)).kernels_only is False


def test_einsum_counts_the_operators_inside_it():
    # einsum's tensors come as a list, whose shapes the profiler does not record: the bmm inside it counts instead
    a, b = torch.randn(32, 64), torch.randn(64, 16)
    share = _share(lambda: torch.einsum("mk,kn->mn", a, b), lambda: torch.matmul(a, b))
    assert share is not None and share >= 1.0


def test_a_custom_operator_of_a_new_namespace_counts_the_operators_inside_it():
    lib = torch.library.Library("opforge_rule_test", "DEF")
    lib.define("hidden_relu(Tensor x) -> Tensor")
    lib.impl("hidden_relu", lambda x: torch.clamp_min(x, 0.0), "CPU")
    share = _share(lambda: torch.ops.opforge_rule_test.hidden_relu(X), lambda: torch.relu(X))
    assert share is not None and share >= 1.0
