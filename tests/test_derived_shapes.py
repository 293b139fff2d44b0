"""A task without SHAPES is verified at more than one shape (issue 39): variants derived from its sizes are added
where the reference runs them on the meta device, and an export whose kernels were verified at one shape only says
so."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from evaluator import Candidate, TaskError
from evaluator.derived_shapes import MARK, candidates, with_shapes
from evaluator.task import load_task, task_from_source
from opforge.export import export_package
from opforge.run.shapes import with_derived_shapes
from store import get_store
from store_fixtures import CPU, ok_result

ROOT = Path(__file__).resolve().parent.parent
RELU = '''import torch
import torch.nn as nn

batch_size = 4096 * 4
dim = 1 << 14


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x){view}


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
'''


def _shapes(source: str) -> object:
    [node] = [n for n in ast.parse(source).body if isinstance(n, ast.Assign) and n.targets[0].id == "SHAPES"]  # type: ignore[attr-defined]
    return ast.literal_eval(node.value)


def test_the_leading_size_moves_both_ways_and_the_last_one_goes_odd() -> None:
    assert candidates(RELU.format(view="")) == [{"batch_size": 16385}, {"batch_size": 5461}, {"dim": 16383}]
    gemm = ("import torch\nM = 256\nK = 4096\nN = 128\nscale = 0.5\nflag = True\n"
            "def get_inputs():\n    return [torch.randn(M, K) * scale, torch.randn(K, N)]\n")
    assert candidates(gemm) == [{"M": 257}, {"M": 85}, {"N": 127}]
    assert candidates("import torch\nB = 1\ndef get_inputs():\n    return [torch.randn(B)]\n") == []  # below 2
    assert candidates(ROOT.joinpath("benchmarks", "tiny", "softmax.py").read_text()) == []  # it has SHAPES


def test_the_variants_are_appended_as_shapes_and_marked() -> None:
    task = task_from_source(RELU.format(view=""), "relu")
    shaped = with_shapes(task, [{"batch_size": 3}])
    assert _shapes(shaped.source) == [{"batch_size": 3}] and MARK in shaped.source
    assert shaped.digest != task.digest and with_shapes(task, []) is task


def test_only_the_variants_the_check_passes_are_kept() -> None:
    task = task_from_source(RELU.format(view=""), "relu", "relu.py")
    seen: list[object] = []

    def check(t):  # noqa: ANN001, ANN202 - a seam standing for the reference on the meta device
        shapes = _shapes(t.source)
        seen.append(shapes)
        if {"dim": 16383} in shapes:  # type: ignore[operator]
            raise TaskError("relu.py: the reference failed")
        return None

    shaped = with_derived_shapes(task, check)
    assert _shapes(shaped.task.source) == [{"batch_size": 16385}, {"batch_size": 5461}]
    assert len(seen) == 4  # all at once, then each alone
    assert "also verified at batch_size=16385, batch_size=5461" in shaped.note

    def never(t):  # noqa: ANN001, ANN202
        raise TaskError("relu.py: no")

    alone = with_derived_shapes(task, never)
    assert alone.task is task and "one shape only" in alone.note


def test_the_reference_on_the_meta_device_decides_which_variants_run() -> None:
    """A forward that needs dim divisible by 4 runs at the derived batch sizes, not at an odd dim."""
    task = task_from_source(RELU.format(view=".view(x.shape[0], -1, 4).sum(-1)"), "relu_fours", "relu_fours.py")
    shaped = with_derived_shapes(task)
    assert _shapes(shaped.task.source) == [{"batch_size": 16385}, {"batch_size": 5461}], shaped.note


@pytest.mark.slow
def test_an_export_of_a_kernel_verified_at_one_shape_says_so(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'hand.db'}"
    one = load_task(ROOT / "tests" / "tasks" / "relu_too_big.py")
    one = dataclasses.replace(one, source=one.source.replace("BATCH = 4096 * 8", "BATCH = 16").replace(
        "DIM = 393216", "DIM = 512"))
    one = task_from_source(one.source, "relu_one_shape")
    native = ROOT.joinpath("tests", "honest", "relu_openmp_c.py").read_text()
    store = get_store(url)
    try:
        record = store.add_task(one)
        run = store.create_run(record.id, {"coder": "tune"}, {"max_candidates": 1})
        cand, _ = store.add_candidate(run.id, record.id, Candidate.from_source(native))
        store.add_result(cand.id, run.id, dataclasses.replace(ok_result(1.5, device=CPU), backend="cpp"))
        result = export_package(store, [run.id], tmp_path / "pkg", "one_shape")
    finally:
        store.close()
    assert any("verified at one shape only" in n and "relu_one_shape" in n for n in result.notes), result.notes
