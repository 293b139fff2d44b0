"""Timed inputs on a CPU come from the trusted side (evaluator/wire/input_file.py, trusted_inputs.py): the reference's
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
from evaluator.wire.input_file import DriverInputs, InputLayout, InputReader, InputWriter, shareable
from evaluator.wire.frames import ProtocolError

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
    evaluate_module = importlib.import_module("evaluator.driver.evaluate")
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


class _Reference:
    """The reference's connection as `TrustedInputs` uses it: each `draw` writes the seed's inputs into the file."""

    def __init__(self, fd: int, cpu: list[int], busy_ns: int) -> None:
        self.writer, self.cpu, self.busy_ns = InputWriter(fd), cpu, busy_ns
        self.asked: list[object] = []

    def request_as(self, cmd, kind, timeout_s, doing):
        from evaluator.wire.replies import parse
        self.asked.append(cmd)
        self.cpu[0] += self.busy_ns  # what the candidate's process ran meanwhile, by the kernel's accounting
        g = torch.Generator().manual_seed(cmd.seed)
        return parse({"status": "drawn", "inputs": self.writer.write([torch.randn(64, generator=g)]).to_wire()}), []


@pytest.mark.parametrize("busy_ns, refused", [(0, False), (20_000, False), (5_000_000, True)])
def test_the_candidate_working_while_its_inputs_are_drawn_is_refused_and_waiting_is_not(busy_ns, refused):
    from evaluator.driver.connection import Refused
    from evaluator.measure.trusted_inputs import TrustedInputs, quiet_while_drawing
    from evaluator.wire.replies import Armed
    driver = DriverInputs(flush_lines=None)
    flushed: list[int] = []
    driver.flush_lines = lambda views: flushed.append(len(views))
    ref_fd, cand_fd = driver.worker_fd("reference"), driver.worker_fd("candidate")
    reader = InputReader(cand_fd, writable=False)
    cpu = [0]
    reference = _Reference(ref_fd, cpu, busy_ns)
    trusted = TrustedInputs(driver, reference, cold_from_bytes=0, timeout_s=5.0,  # type: ignore[arg-type]
                            quiet=quiet_while_drawing(lambda: cpu[0]))
    try:
        for seed in range(1, 8):
            layout = trusted.armed("candidate", Armed(), 0, seed, last_call_ms=1.0)
            [x] = reader.inputs(layout)
            assert torch.equal(x, torch.randn(64, generator=torch.Generator().manual_seed(seed)))
        assert len(reference.asked) == 7 and flushed == [1] * 7  # every call's inputs drawn by the reference, flushed
        if refused:
            with pytest.raises(Refused, match="drew its next timed call's inputs"):
                trusted.refuse_busy()
        else:
            trusted.refuse_busy()
    finally:
        os.close(ref_fd)
        os.close(cand_fd)
        driver.close()
