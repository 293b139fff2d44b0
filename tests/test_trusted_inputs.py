"""Timed inputs on a CPU come from the trusted side (evaluator/input_file.py, trusted_inputs.py): the reference's
worker writes them into a shared file, the candidate's maps it read-only, and an evaluation's timed calls read their
inputs from it."""

from __future__ import annotations

import importlib
import mmap
import os
from pathlib import Path

import pytest
import torch

from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator.input_file import DriverInputs, InputLayout, InputReader, InputWriter, shareable
from evaluator.wire import ProtocolError

ROOT = Path(__file__).resolve().parent.parent


def test_inputs_written_by_the_reference_are_read_back_exactly_by_the_candidate_in_order_with_plain_values():
    driver = DriverInputs(flush_lines=None)
    flushed: list[int] = []
    driver.flush_lines = lambda views: flushed.append(sum(v.numel() for v in views))
    ref_fd, cand_fd = driver.worker_fd("reference"), driver.worker_fd("candidate")
    try:
        x = torch.randn(37, 5)
        w = torch.arange(6, dtype=torch.int64).reshape(2, 3)
        g = torch.randn(4, requires_grad=True)
        inputs = [x, 3, w, None, 0.5, g, True]
        assert shareable(inputs)
        layout = InputWriter(ref_fd).write(inputs)
        wire = layout.to_wire()
        got = InputReader(cand_fd, writable=False).inputs(tuple(wire))  # as the `go` command carries it
        assert [type(v) for v in got] == [torch.Tensor, int, torch.Tensor, type(None), float, torch.Tensor, bool]
        assert torch.equal(got[0], x) and torch.equal(got[2], w) and torch.equal(got[5], g.detach())
        assert got[1] == 3 and got[4] == 0.5 and got[6] is True
        assert got[5].requires_grad and not got[0].requires_grad
        driver.flush(driver.layout(wire))
        assert flushed == [x.numel() * 4 + w.numel() * 8 + g.numel() * 4]  # the tensors' bytes, through its mapping
    finally:
        os.close(ref_fd)
        os.close(cand_fd)
        driver.close()


def test_the_candidates_descriptor_cannot_write_the_file_or_map_it_writable():
    driver = DriverInputs(flush_lines=None)
    cand_fd = driver.worker_fd("candidate")
    try:
        os.ftruncate(driver.fd, mmap.PAGESIZE)
        with pytest.raises(OSError):
            os.write(cand_fd, b"forged")
        with pytest.raises(OSError):
            os.ftruncate(cand_fd, 0)
        with pytest.raises(PermissionError):
            mmap.mmap(cand_fd, mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(cand_fd)
        driver.close()


def test_a_layout_outside_the_file_or_with_an_object_is_a_protocol_error_and_unshareable_inputs_are_named():
    with pytest.raises(ProtocolError, match="outside"):
        InputLayout.parse([{"dtype": "torch.float32", "shape": [1024], "offset": 0}], file_bytes=64)
    with pytest.raises(ProtocolError, match="plain input"):
        InputLayout.parse([{"value": [1, 2]}], file_bytes=64)
    with pytest.raises(ProtocolError):
        InputLayout.parse("not a list", file_bytes=64)
    assert not shareable([torch.randn(4, 4).t()])  # non-contiguous: its strides would be lost
    assert not shareable([torch.randn(2), "a string"])
    assert not shareable([torch.randn(2).to_sparse()])


@pytest.mark.slow
def test_an_evaluation_times_both_sides_on_inputs_the_reference_drew_into_the_shared_file(monkeypatch):
    """The seam: `evaluate`'s measure, wrapped to see its measurement; every timed call of the candidate got its
    inputs from a draw of the reference's worker."""
    evaluate_module = importlib.import_module("evaluator.evaluate")
    seen: list[tuple[bool, int]] = []
    real = evaluate_module.measure

    def watched(*args, **kwargs):
        m = real(*args, **kwargs)
        trusted = kwargs.get("trusted_inputs")
        seen.append((m.shared_inputs, trusted.drawn if trusted is not None else 0))
        return m
    monkeypatch.setattr(evaluate_module, "measure", watched)
    evaluator = evaluate_module.LocalEvaluator()
    try:
        result = evaluator.evaluate(load_task(ROOT / "benchmarks" / "tiny" / "relu.py"),
                                    load_candidate(ROOT / "benchmarks" / "tiny" / "relu.cpp.py"),
                                    EvalConfig(profile=False, max_timing_s=0.5))
    finally:
        evaluator.close()
    assert result.status == Status.OK, result.reason
    assert seen and all(shared for shared, _ in seen)
    assert all(drawn >= 1 for _, drawn in seen)  # the candidate's timed calls' inputs came from the reference's draws
