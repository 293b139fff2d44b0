"""Unit tests of the evaluator's parts that need no worker process: wire format, policy, comparison, statistics."""

from __future__ import annotations

import json
import math
import socket
import struct

import pytest
import torch

from evaluator.correctness import compare
from evaluator.verify.policy import check_source
from evaluator.result import DeviceInfo, EvalResult, Status, Timing
from evaluator.worker.timing import relative_standard_error
from evaluator.wire.frames import Channel, ProtocolError


def _pair(nonce: str = "n1") -> tuple[Channel, Channel]:
    a, b = socket.socketpair()
    return Channel(a, nonce), Channel(b, nonce)


def test_tensors_round_trip_bit_exact_over_the_channel():
    left, right = _pair()
    sent = [torch.randn(3, 5), torch.arange(7, dtype=torch.int64), torch.randn(4).to(torch.bfloat16),
            torch.tensor([float("nan"), float("inf")]), torch.empty(0, 3)]
    left.send({"status": "ran"}, sent)
    header, got = right.recv(timeout_s=5)
    assert header["status"] == "ran"
    for a, b in zip(sent, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.view(torch.uint8) if a.numel() else a, b.view(torch.uint8) if b.numel() else b)


def test_frame_without_the_nonce_is_refused():
    a, b = socket.socketpair()
    Channel(a, "wrong-nonce").send({"status": "ok", "speedup": 100})
    with pytest.raises(ProtocolError):
        Channel(b, "right-nonce").recv(timeout_s=5)


def test_pickled_or_mismatched_payload_is_refused_not_loaded():
    a, b = socket.socketpair()
    head = json.dumps({"nonce": "n", "tensors": [{"dtype": "torch.float32", "shape": [4], "nbytes": 3}]}).encode()
    a.sendall(struct.pack("!Q", len(head)) + head + b"abc")
    with pytest.raises(ProtocolError):
        Channel(b, "n").recv(timeout_s=5)
    a2, b2 = socket.socketpair()
    head = json.dumps({"nonce": "n", "tensors": [{"dtype": "pickle", "shape": [1], "nbytes": 1}]}).encode()
    a2.sendall(struct.pack("!Q", len(head)) + head + b"x")
    with pytest.raises(ProtocolError):
        Channel(b2, "n").recv(timeout_s=5)


@pytest.mark.parametrize("source, words", [
    ("import ctypes\n", "ctypes"),
    ("import torch\nclass ModelNew(Model):\n    pass\n", "Model"),
    ("import time\ntime.perf_counter = lambda: 0\n", "patching time"),
    ("import torch\ntorch.cuda.synchronize = lambda: None\n", "patching torch"),
    ("import torch\nx = torch.manual_seed(0)\n", "seed"),
    ("import sys\nm = sys.modules\n", "sys.modules"),
    ("import torch\ndef f(x):\n    try:\n        return k(x)\n    except Exception:\n        return torch.relu(x)\n",
     "except"),
    ("x = open('/etc/passwd').read()\n", "open"),
])
def test_policy_refuses_the_obvious_with_a_line_and_reason(source: str, words: str):
    found = check_source(source)
    assert found, source
    assert any(words in str(v) for v in found), found
    assert all(str(v).startswith("line ") for v in found)


def test_policy_admits_honest_kernel_idioms():
    honest = (
        "import os\nimport torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
        "os.environ['TORCH_CUDA_ARCH_LIST'] = '9.0'\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.scale = 2.0\n        items = [1, 2]\n        items.remove(1)\n"
        "    def forward(self, x):\n        out = torch.empty_like(x)\n        out[0] = 1\n"
        "        for m in self.modules():\n            pass\n        return out\n"
    )
    assert check_source(honest) == []


def test_policy_admits_flags_queries_in_except_and_a_lock():
    honest = (
        "import threading\nimport torch\n"
        "torch.backends.cuda.matmul.allow_tf32 = False\ntorch.backends.cudnn.allow_tf32 = False\n"
        "_lock = threading.Lock()\n"
        "try:\n    import psutil\n    n = psutil.cpu_count()\n"
        "except ImportError:\n    n = torch.get_num_threads() if not torch.cuda.is_available() else "
        "torch.cuda.device_count()\n"
    )
    assert check_source(honest) == []
    # A compute call in the same clause is still a fallback, and torch outside torch.backends is still patching.
    assert any("except" in str(v) for v in check_source(
        "import torch\ntry:\n    y = 1\nexcept Exception:\n    n = torch.get_num_threads()\n    y = torch.relu(n)\n"))
    assert any("patching torch" in str(v) for v in check_source("import torch\ntorch.relu = abs\n"))


def test_compare_reports_errors_and_nan_positions():
    e = torch.tensor([1.0, 2.0, float("nan")])
    assert compare([e], [e.clone()]).ok
    off = compare([e], [torch.tensor([1.0, 2.1, float("nan")])])
    assert not off.ok and math.isclose(off.max_abs_error, 0.1, rel_tol=1e-3)
    assert not compare([e], [torch.tensor([1.0, 2.0, 3.0])]).ok
    assert "shape" in compare([e], [e[:2]]).reason
    assert "dtype" in compare([e], [e.double()]).reason
    assert compare([torch.ones(3)], [torch.ones(3) + 0.5]).reason.startswith("output 0 is off")
    assert compare([torch.ones(3)], [torch.ones(3) + 0.5], {"atol": 1.0, "rtol": 0.0}).ok
    assert not compare([torch.ones(2, dtype=torch.float16)], [torch.full((2,), 1.05, dtype=torch.float16)]).ok


def test_result_json_round_trip_and_derived_speedup():
    r = EvalResult(Status.OK, "fine", candidate_ms=Timing(2.0, 0.1, 50), reference_ms=Timing(3.0, 0.2, 40),
                   max_abs_error=1e-6, device=DeviceInfo(kind="cpu", name="CPU", interpreted=True))
    assert r.speedup == pytest.approx(1.5)
    back = EvalResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back.speedup == pytest.approx(1.5) and back.device == r.device and back.candidate_ms == r.candidate_ms
    failed = EvalResult(Status.INCORRECT, "wrong", candidate_ms=Timing(1.0, 0.0, 5), reference_ms=Timing(9.0, 0, 5))
    assert failed.speedup is None


def test_rse_stopping_rule():
    assert relative_standard_error([1.0]) == math.inf
    assert relative_standard_error([1.0] * 50) == 0.0
    assert 0 < relative_standard_error([1.0, 1.1, 0.9, 1.05]) < 0.1
    assert Timing.from_samples([1, 2, 3, 4, 100]).median_ms == 3


# -- the dispatcher and the kernels a timed call launches -----------------------------------------------------------


def test_dispatcher_backstop_names_an_operator_whose_kernels_changed_and_a_mode_left_active():
    from torch.utils._python_dispatch import TorchDispatchMode

    from evaluator.worker.guards import Guards

    guards = Guards()
    guards.take_snapshot(dispatcher=True)
    assert guards.dispatcher_changed(deep=True) is None
    library = torch.library.Library("aten", "IMPL")  # not through the guard: a library PyTorch itself could hold
    try:
        library.impl("clone", lambda t, memory_format=None: t, "CPU")
        assert guards.dispatcher_changed(deep=False) is None  # the cheap check looks at modes only
        assert guards.dispatcher_changed(deep=True) == "the kernels of aten::clone"
    finally:
        library._destroy()
    assert guards.dispatcher_changed(deep=True) is None
    mode = TorchDispatchMode()
    mode.__enter__()
    try:
        assert guards.dispatcher_changed(deep=False) == "a dispatch or function mode left active"
    finally:
        mode.__exit__(None, None, None)


def test_dispatcher_backstop_on_the_zygotes_laid_out_snapshot_names_a_changed_operator_and_lets_meta_kernels_be():
    from evaluator.worker import dispatch_table
    from evaluator.worker.guards import Guards

    dispatch_table.prime_dispatch_snapshot()  # as a candidate's zygote does before it forks
    guards = Guards()
    guards.take_snapshot(dispatcher=True)
    assert guards._dispatch_text is not None and dispatch_table.take_primed_dispatch() is None  # taken over
    assert guards.dispatcher_changed(deep=True) is None
    library = torch.library.Library("aten", "IMPL")
    try:
        library.impl("clone", lambda t, memory_format=None: t, "CPU")
        assert guards.dispatcher_changed(deep=True) == "the kernels of aten::clone"
    finally:
        library._destroy()
    assert guards.dispatcher_changed(deep=True) is None
    library = torch.library.Library("aten", "IMPL")
    try:  # a meta (shape-only) kernel, as PyTorch registers lazily: no data flows through it
        library.impl("clone", lambda t, memory_format=None: torch.empty_like(t), "Meta")
        assert guards.dispatcher_changed(deep=True) is None
        assert guards.dispatcher_changed(deep=True) is None  # the snapshot as `_same_kernels` keeps it
        library.impl("relu", lambda t: t, "CPU")
        assert guards.dispatcher_changed(deep=True) == "the kernels of aten::relu"
    finally:
        library._destroy()


def test_timed_calls_must_launch_every_kernel_a_checked_call_launched():
    from evaluator.driver.connection import Refused
    from evaluator.verify.trials import refuse_other_work_when_timed as _refuse_other_work_when_timed

    _refuse_other_work_when_timed({"triton:k": 2}, {"triton:k": 2, "triton:extra": 1})
    _refuse_other_work_when_timed({}, {})
    _refuse_other_work_when_timed({"triton:k": 2}, {"triton:k": 1})  # launch counts may follow the data
    with pytest.raises(Refused, match="never launched k,"):
        _refuse_other_work_when_timed({"triton:k": 2}, {"triton:other": 1})
    with pytest.raises(Refused, match="never launched relu,"):
        _refuse_other_work_when_timed({"extension:relu": 1}, {"triton:k": 3})


@pytest.mark.parametrize("source", [
    "try:\n    raise RuntimeError\nexcept RuntimeError as e:\n    f = e.__traceback__.tb_frame\n",
    "def g():\n    yield 1\nframe = g().gi_frame\n",
    "import torch\nset_it = torch._dynamo.eval_frame.set_eval_frame\n",
    "import torch\nlib = torch.library._dispatch_library\n",
])
def test_policy_names_frame_and_dispatcher_access(source):
    assert check_source(source), source


class _BarrierZygote:
    """A zygote whose kill returns only once every other close has reached its own kill (a barrier)."""

    def __init__(self, barrier: "threading.Barrier"):
        self.barrier, self.killed = barrier, 0

    def kill(self, handle: object) -> None:
        self.barrier.wait()
        self.killed += 1


def test_workers_close_side_by_side_and_once():
    import threading
    from types import SimpleNamespace

    from evaluator.driver.connection import WorkerConnection, close_all, closed_meanwhile

    barrier = threading.Barrier(2, timeout=10)
    zygotes = [_BarrierZygote(barrier) for _ in range(2)]
    pairs = [socket.socketpair() for _ in range(2)]
    conns = [WorkerConnection(z, SimpleNamespace(sock=ours, pid=0), "n" * 32, role, "task")  # type: ignore[arg-type]
             for z, (ours, _), role in zip(zygotes, pairs, ("reference", "candidate"))]
    close_all(conns[0], None, conns[1])  # one after the other, the first kill would wait for the second forever
    assert [z.killed for z in zygotes] == [1, 1] and not barrier.broken
    close_all(*conns)
    assert [z.killed for z in zygotes] == [1, 1]  # closing again does nothing
    barrier.reset()
    third = WorkerConnection(_BarrierZygote(barrier), SimpleNamespace(sock=socket.socketpair()[0], pid=0),  # type: ignore[arg-type]
                             "n" * 32, "reference", "task")
    with closed_meanwhile(third):
        barrier.wait()  # the close runs while the body does
    assert third.closed
