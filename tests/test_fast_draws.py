"""The fast draws of a task's random inputs on a CPU (`evaluator/worker/fast_draws.py`): the same values in both workers
whatever their thread count, a seed fixing them, the distributions the task asked for, PyTorch's own draws where the
call is one the library does not take, and a worker that cannot load the library saying so rather than drawing
otherwise than the other worker. Built with the machine's real C compiler."""

from __future__ import annotations

import math
import socket

import pytest
import torch

from evaluator.wire.commands import Load
from evaluator.worker.guards import Guards
from evaluator.wire.frames import Channel
from evaluator.worker.loop import Worker
from evaluator.worker.fast_draws import MIN_VALUES, FastDraws
from evaluator.harness_library import library_text, load
from evaluator.worker import task_runtime
from evaluator.worker.task_runtime import TaskRuntime

pytestmark = pytest.mark.skipif(library_text() is None, reason="no C compiler here: inputs are drawn by PyTorch")

TASK = """import torch
import torch.nn as nn
N = 300_001  # odd: the last normal value comes from a pair of its own
class Model(nn.Module):
    def forward(self, *xs):
        return xs[0]
def get_inputs():
    a = torch.randn(N) * 4.0
    b = torch.rand(N // 3, 3)
    c = torch.empty(N).uniform_(-2.0, 5.0)
    d = torch.zeros(N).normal_(1.5, 0.25)
    h = torch.zeros(N).normal_(2.0)
    e = torch.randn_like(a)
    f = torch.randn(N, dtype=torch.bfloat16)
    return [a, b, c, d, e, f, torch.rand(N), h, torch.empty(N).uniform_(-1.0)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def text() -> str:
    found = library_text()
    assert found is not None
    return found


def _inputs(text: str | None, seed: int, threads: int = 2, task: str = TASK) -> list[torch.Tensor]:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return TaskRuntime(task, "draws", "cpu", draws=FastDraws(load(text)) if text else None).inputs(0, seed)
    finally:
        torch.set_num_threads(before)


def test_both_workers_draw_the_same_values_whatever_their_thread_count_and_a_seed_fixes_them(text):
    one, two = _inputs(text, 77, threads=1), _inputs(text, 77, threads=2)
    assert all(torch.equal(a, b) for a, b in zip(one, two))
    other = _inputs(text, 78)
    assert not any(torch.equal(a, b) for a, b in zip(one, other))
    # A draw of its own that PyTorch's generator would give differs: these are the library's values.
    assert not torch.equal(one[0], _inputs(None, 77)[0])


def test_the_draws_have_the_distributions_the_task_asked_for(text):
    a, b, c, d, e, f, g, h, u = (x.double() for x in _inputs(text, 5))
    n = a.numel()
    assert abs(a.mean()) < 4.0 * 5 / math.sqrt(n) and abs(a.std() / 4.0 - 1) < 0.01
    z = e  # standard normal: the share beyond 1, 2 and 3 sigma, and the fourth moment
    for k in (1.0, 2.0, 3.0):
        expected = math.erfc(k / math.sqrt(2))
        assert abs(float((z.abs() > k).double().mean()) - expected) < 5 * math.sqrt(expected / n) + 1e-4
    assert abs(float(((z - z.mean()) ** 4).mean() / z.var() ** 2) - 3.0) < 0.05
    assert 0.0 <= float(b.min()) and float(b.max()) < 1.0 and abs(float(b.mean()) - 0.5) < 0.005
    assert -2.0 <= float(c.min()) and float(c.max()) < 5.0 and abs(float(c.mean()) - 1.5) < 0.05
    assert abs(float(d.mean()) - 1.5) < 0.005 and abs(float(d.std()) - 0.25) < 0.005
    assert _inputs(text, 5)[5].dtype == torch.bfloat16 and abs(float(f.std()) - 1) < 0.01
    assert 0.0 <= float(g.min()) and float(g.max()) < 1.0
    assert abs(float(h.mean()) - 2.0) < 0.01 and abs(float(h.std()) - 1.0) < 0.01  # normal_(mean): std 1
    assert -1.0 <= float(u.min()) and float(u.max()) < 1.0 and abs(float(u.mean())) < 0.01  # uniform_(-1.0): to 1
    assert not torch.equal(a / 4.0, e) and not torch.equal(b.reshape(-1)[:1000], g[:1000])


def test_draws_the_library_does_not_take_are_pytorchs_own(text):
    task = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, *xs):
        return xs[0]
def get_inputs():
    g = torch.Generator().manual_seed(3)
    return [torch.randn(70_000, generator=g), torch.randn(70_000, dtype=torch.float64), torch.randn(100),
            torch.randn_like(torch.empty(300, 400).t()), torch.randint(0, 9, (70_000,))]
def get_init_inputs():
    return []
"""
    fast, plain = _inputs(text, 11, task=task), _inputs(None, 11, task=task)
    assert fast[0].numel() == 70_000 > MIN_VALUES
    assert all(torch.equal(a, b) for a, b in zip(fast, plain))
    assert fast[3].stride() == plain[3].stride() == (1, 400)  # a strided source keeps PyTorch's layout


def test_the_default_generator_moves_on_from_the_seed_after_a_fast_draw(text):
    rt = TaskRuntime(TASK, "draws", "cpu", draws=FastDraws(load(text)))
    rt.inputs(0, 9)
    first = torch.rand(4)  # what a forward that draws (dropout) would see next
    rt.inputs(0, 9)
    assert torch.equal(first, torch.rand(4))
    rt.inputs(0, 10)
    assert not torch.equal(first, torch.rand(4))


def test_a_draw_can_hand_over_every_tensor_it_made_its_temporaries_included(text, monkeypatch):
    """A timed call flushes the cache lines of what the draw made (timed_calls.py): `randn(N) * 4.0`'s first tensor,
    freed as soon as the task returns, is among them, and so are the inputs; the values are the same either way."""
    rt = TaskRuntime(TASK, "draws", "cpu", draws=FastDraws(load(text)))
    made: list[torch.Tensor] = []
    inputs = rt.inputs(0, 5, made=made)
    made_storages = {t.untyped_storage().data_ptr() for t in made}
    input_storages = {t.untyped_storage().data_ptr() for t in inputs}
    assert input_storages <= made_storages
    temporaries = [t for t in made if t.untyped_storage().data_ptr() not in input_storages]
    assert any(t.shape == inputs[0].shape and torch.equal(t * 4.0, inputs[0]) for t in temporaries)  # randn(N)
    assert all(torch.equal(a, b) for a, b in zip(inputs, rt.inputs(0, 5)))
    few: list[torch.Tensor] = []
    monkeypatch.setattr(task_runtime, "MADE_MAX_BYTES", 1)  # past the cap nothing more is held
    rt.inputs(0, 5, made=few)
    assert len(few) == 1


def test_a_worker_that_cannot_load_the_library_says_so():
    """Bytes that are no library (base64 of 'not an ELF'): the load fails with a reason, and no task is loaded to
    draw with PyTorch beside a worker that draws with the library."""
    a, b = socket.socketpair()
    try:
        worker = Worker(Channel(a, "n" * 32), "reference", Guards())
        worker.cmd_load(Load(task_source=TASK, task_name="draws", device="cpu", init_seeds=(0,),
                             harness_library="bm90IGFuIEVMRg=="))
        reply, _ = Channel(b, "n" * 32).recv(10)
    finally:
        a.close()
        b.close()
    assert reply["status"] == "runtime_error" and "harness's native library" in reply["reason"]
    assert worker.rt is None


def test_the_second_distribution_keeps_equal_entries_equal_and_draws_the_rest_afresh(text):
    """The normal and large-magnitude trials redraw value by value (`TaskRuntime.inputs`): a symmetric matrix stays
    symmetric, a table of two equal halves keeps them, -0.0 and 0.0 draw alike, and both workers draw the same."""
    task = """import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, *xs):
        return xs[0]
def get_inputs():
    a = torch.randn(400, 400)
    half = torch.randn(50_000)
    zeros = torch.tensor([0.0, -0.0] * 10)
    return [a + a.t(), torch.cat([half, half]).double(), zeros]
def get_init_inputs():
    return []
"""
    first = TaskRuntime(task, "redraw", "cpu", draws=FastDraws(load(text)))
    second = TaskRuntime(task, "redraw", "cpu", draws=FastDraws(load(text)))
    sym, halves, zeros = first.inputs(0, 21, "normal")
    assert torch.equal(sym, sym.t()) and torch.equal(halves[:50_000], halves[50_000:])
    assert halves.dtype == torch.float64 and bool((zeros == zeros[0]).all())
    upper = sym[torch.triu(torch.ones(400, 400, dtype=torch.bool))].double()
    assert abs(float(upper.std()) / 4.0 - 1) < 0.02 and len(torch.unique(upper)) > 0.99 * upper.numel()
    assert all(torch.equal(a, b) for a, b in zip(first.inputs(0, 21, "large", 1e5), second.inputs(0, 21, "large", 1e5)))
    large = first.inputs(0, 21, "large", 1e5)[0]
    assert 0.9e5 < float(large.double().std()) < 1.1e5
    assert not torch.equal(sym, first.inputs(0, 22, "normal")[0])


def test_draws_on_another_device_are_left_to_that_devices_generator(text):
    """A GPU run draws on the GPU (its own generator, already fast): the library takes CPU draws only. The device is
    read from the call and from the default device, as a GPU run's `torch.device` context sets it (meta here)."""
    draws = FastDraws(load(text))
    assert draws.draw(torch.randn, (70_000,), {"device": torch.device("meta")}) is None
    assert draws.draw(torch.rand_like, (torch.empty(70_000, device="meta"),), {}) is None
    assert draws.draw(torch.Tensor.normal_, (torch.empty(70_000, device="meta"),), {}) is None
    with torch.device("meta"):
        assert draws.draw(torch.randn, (70_000,), {}) is None
    drawn = draws.draw(torch.randn, (70_000,), {"device": torch.device("cpu")})
    assert drawn is not None and drawn.shape == (70_000,)


def test_without_a_compiler_there_is_no_library_and_the_workers_draw_with_pytorch(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("PATH", str(tmp_path))  # no gcc, no cc
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "cache"))
    library_text.cache_clear()
    try:
        assert library_text() is None
    finally:
        library_text.cache_clear()
    assert "drawn by PyTorch" in caplog.text and "no C compiler" in caplog.text
