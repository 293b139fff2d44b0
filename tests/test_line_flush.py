"""The harness's line flush (`evaluator/worker/line_flush.py`), built from its real sources by the system compiler: what
it flushes, that flushing loses no data, and that a worker's timer uses it when the driver sends the library."""

from __future__ import annotations

import platform
import socket

import pytest
import torch

from evaluator.wire.commands import Load
from evaluator.worker.guards import Guards
from evaluator.harness_library import library_text, local, local_flush
from evaluator.worker.line_flush import KINDS, LineFlush
from evaluator.wire.frames import Channel
from evaluator.worker.loop import Worker

pytestmark = pytest.mark.skipif(library_text() is None, reason="no C compiler here: cold calls read a buffer")

TASK = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    return [torch.randn(64)]
def get_init_inputs():
    return []
"""


def test_this_machine_has_an_instruction_for_it():
    flush = local_flush()
    assert flush is not None
    if platform.machine() in ("x86_64", "AMD64"):
        assert flush.instruction in ("clflushopt", "clflush")
    assert flush.instruction in KINDS.values()


def test_flushing_writes_dirty_lines_back_and_loses_nothing():
    flush = local_flush()
    assert flush is not None
    x = torch.arange(3 * 2**20 + 7, dtype=torch.float32)  # not a whole number of lines
    x.mul_(2)  # dirty lines, in cache
    expected = torch.arange(3 * 2**20 + 7, dtype=torch.float32) * 2
    assert flush([x]) == x.numel() * 4
    assert torch.equal(x, expected)


def test_a_view_flushes_its_whole_storage_and_what_is_not_a_plain_cpu_tensor_is_passed_over():
    flush = local_flush()
    assert flush is not None
    base = torch.ones(1000, 10)
    assert flush([base[::7, 3], "text", 3, None]) == base.numel() * 4
    assert flush([base, base[2:], base.view(-1)]) == base.numel() * 4  # a storage once, however many share it
    assert flush([torch.empty(0)]) == 0

    class Sub(torch.Tensor):
        pass

    assert flush([torch.ones(100).as_subclass(Sub)]) == 0  # a subclass's methods are not run by the harness
    assert flush([torch.ones(100, device="meta")]) == 0


def test_a_library_without_an_instruction_gives_no_flush():
    class NoInstruction:
        def flush_kind(self) -> int:
            return 0

    assert LineFlush.of(NoInstruction()) is None  # type: ignore[arg-type]
    assert LineFlush.of(None) is None
    assert LineFlush.of(local()) is not None


def _loaded(library: str | None) -> Worker:
    a, b = socket.socketpair()
    try:
        worker = Worker(Channel(a, "n" * 32), "reference", Guards())
        worker.cmd_load(Load(task_source=TASK, task_name="flush", device="cpu", init_seeds=(0,),
                             harness_library=library))
        reply, _ = Channel(b, "n" * 32).recv(30)
    finally:
        a.close()
        b.close()
    assert reply["status"] == "ready", reply
    return worker


def test_a_workers_timer_flushes_lines_when_the_driver_sent_the_library_and_reads_a_buffer_when_not():
    assert _loaded(library_text()).timer.flushes_lines  # type: ignore[union-attr]
    assert not _loaded(None).timer.flushes_lines  # type: ignore[union-attr]
