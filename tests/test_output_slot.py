"""The timed calls' outputs are judged where the driver reads them: a shared file it made, a uniform sample of the
calls with no budget to count, and a worker that must be idle while the driver reads (issue 33, classes 1 and 2)."""

from __future__ import annotations

import os
import random

import pytest
import torch

from evaluator.measure.clock_checks import QuietWindow
from evaluator.driver.connection import Refused
from evaluator.wire.output_slot import DriverSlot, Layout, Reservoir, WorkerSlot
from evaluator.wire.frames import ProtocolError


def _pair() -> tuple[DriverSlot, WorkerSlot]:
    driver = DriverSlot()
    return driver, WorkerSlot(os.dup(driver.fd))  # the worker's descriptor of the same file, as the zygote hands it


def test_outputs_written_by_the_worker_are_read_back_by_the_driver_bit_for_bit():
    driver, worker = _pair()
    outs = [torch.randn(33, 7).t(), torch.arange(10, dtype=torch.int64), torch.tensor(3.5), torch.empty(0, 4),
            torch.rand(5) > 0.5, torch.randn(1000).to(torch.bfloat16)]
    layout = worker.write(outs)
    got = driver.read(layout.to_wire())
    assert len(got) == len(outs)
    for a, b in zip(outs, got):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    bigger = [torch.randn(300_000)]  # the file grows to fit a larger call, and the driver reads the new bytes
    assert torch.equal(driver.read(worker.write(bigger).to_wire())[0], bigger[0])


def test_the_driver_reads_what_the_file_holds_when_it_reads_not_what_the_worker_said_earlier():
    driver, worker = _pair()
    layout = worker.write([torch.zeros(4)]).to_wire()
    assert worker.map is not None
    torch.frombuffer(worker.map, dtype=torch.float32, count=4).fill_(7.0)  # written after the reply
    assert torch.equal(driver.read(layout)[0], torch.full((4,), 7.0))  # which is why the worker must be idle then


@pytest.mark.parametrize("layout", [
    [{"dtype": "torch.float32", "shape": [1 << 30], "offset": 0}],
    [{"dtype": "torch.float32", "shape": [4], "offset": -8}],
    [{"dtype": "torch.float32", "shape": [-4], "offset": 0}],
    [{"dtype": "object", "shape": [4], "offset": 0}],
    [{"dtype": "torch.float32", "shape": [4], "offset": 1 << 40}],
    "not a list",
    [{"dtype": "torch.float32", "shape": [1], "offset": 0}] * 65,
])
def test_a_forged_layout_is_a_protocol_error(layout):
    driver, worker = _pair()
    worker.write([torch.zeros(16)])
    with pytest.raises(ProtocolError):
        driver.read(layout)


def test_layouts_name_the_bytes_they_cover():
    spans = Layout.parse([{"dtype": "torch.float64", "shape": [2, 3], "offset": 64}], 4096).spans
    assert spans[0].nbytes == 48 and spans[0].dtype == torch.float64


def test_the_reservoir_is_a_uniform_sample_of_every_call_with_no_budget_to_count():
    calls, size, runs = 200, 6, 3000
    rng = random.Random(7)
    counts = [0] * calls
    for _ in range(runs):
        r = Reservoir(size, rng)
        for i in range(calls):
            k = r.pick()
            if k is not None:
                r.put(k, i, [])
        assert len(r.kept) == size
        for seed, _ in r.kept:
            counts[seed] += 1
    expected = runs * size / calls  # 90 per call, early or late alike
    assert min(counts[:20]) > 0.6 * expected and max(counts[:20]) < 1.4 * expected
    assert min(counts[-20:]) > 0.6 * expected and max(counts[-20:]) < 1.4 * expected


def test_a_candidate_wrong_in_the_later_half_of_its_calls_is_almost_always_sampled():
    rng = random.Random(11)
    missed = 0
    for _ in range(2000):
        r = Reservoir(6, rng)
        for i in range(300):
            k = r.pick()
            if k is not None:
                r.put(k, i, [])
        missed += all(seed < 150 for seed, _ in r.kept)
    assert missed / 2000 < 0.03  # 2**-6 = 1.6 %; a budget of early reads missed it every time


class _Cpu:
    """The worker's CPU as the kernel would report it: the test says what the worker ran in each window."""

    def __init__(self) -> None:
        self.ns = 0

    def __call__(self) -> int:
        return self.ns


def _window(quiet: QuietWindow, cpu: _Cpu, used_ms: float, call_ms: float, reading: bool = True) -> None:
    def read() -> None:
        cpu.ns += int(used_ms * 1e6)
    quiet.around(read, call_ms, reading)


def test_a_worker_that_waits_while_the_driver_reads_passes_and_one_stray_wake_up_is_forgiven():
    cpu = _Cpu()
    quiet = QuietWindow(cpu)
    for i in range(9):
        _window(quiet, cpu, 5.0 if i == 3 else 0.03, call_ms=1.0)
    quiet.refuse_busy()


def test_a_worker_that_finishes_its_outputs_while_the_driver_reads_is_refused():
    cpu = _Cpu()
    quiet = QuietWindow(cpu)
    for _ in range(6):
        _window(quiet, cpu, 0.4, call_ms=1.0)  # 40 % of the call's work done after its reply
    with pytest.raises(Refused, match="kept working after its timed calls had returned"):
        quiet.refuse_busy()


def test_windows_in_which_the_driver_did_not_read_are_not_judged():
    cpu = _Cpu()
    quiet = QuietWindow(cpu)
    for _ in range(6):
        _window(quiet, cpu, 3.0, call_ms=1.0, reading=False)
    quiet.refuse_busy()


def test_probe_scales_are_drawn_from_a_continuous_range_not_a_fixed_value():
    from evaluator.verify.probes import SCALE_SPREAD, first_sent
    from evaluator.wire.commands import Run
    from evaluator.worker.task_runtime import LARGE_SCALES, NORMAL_SCALE
    for dist, nominal in (("normal", NORMAL_SCALE), ("large", LARGE_SCALES[0])):
        scales = {first_sent(Run(variant=0, seed=1, distribution=dist)).scale for _ in range(50)}
        assert len(scales) == 50  # no value a kernel could recognise
        assert all(s is not None and nominal / SCALE_SPREAD <= s <= nominal * SCALE_SPREAD for s in scales)


def test_the_two_large_magnitude_trials_fall_on_either_side_of_the_nominal_value_so_no_narrow_window_holds_both():
    """A router that took magnitudes within 3% of 1e5 down an exact path passed 2.7% of evaluations when the probe
    was drawn once: of two, one below and one above by at least LARGE_GAP, no window narrower than the gap holds both."""
    from evaluator.wire.commands import Run
    from evaluator.config import EvalConfig
    from evaluator.verify.probes import LARGE_GAP, SCALE_SPREAD, first_sent
    from evaluator.worker.task_runtime import LARGE_SCALES
    from evaluator.verify.trials import plan
    assert sorted(t.side or "" for t in plan(EvalConfig(), 1) if t.distribution == "large") == ["above", "below"]
    nominal = LARGE_SCALES[0]
    for _ in range(50):
        below, above = (first_sent(Run(variant=0, seed=1, distribution="large"), side).scale
                        for side in ("below", "above"))
        assert below is not None and above is not None
        assert nominal / SCALE_SPREAD <= below <= nominal / LARGE_GAP
        assert nominal * LARGE_GAP <= above <= nominal * SCALE_SPREAD


def test_a_worker_that_claims_an_infrastructure_failure_is_refused():
    """A status the search never stores would let a candidate re-queue itself until its run fails: only the runner
    reports infrastructure failures, so the candidate's word is a refusal."""
    import socket
    from types import SimpleNamespace

    from evaluator.driver.connection import WorkerConnection
    from evaluator.result import Status
    from evaluator.wire.frames import Channel
    ours, theirs = socket.socketpair()
    handle = SimpleNamespace(sock=ours, outputs=DriverSlot())
    conn = WorkerConnection(SimpleNamespace(dynamo=True), handle, "n" * 32, "candidate", "relu")  # type: ignore[arg-type]
    Channel(theirs, "n" * 32).send({"status": "infra_failed", "reason": "the node went away"})
    with pytest.raises(Refused) as refused:
        conn.recv(5.0, "a timed call")
    assert refused.value.status == Status.REJECTED and "only the runner" in refused.value.reason


# ---------------------------------------------------------------- outputs named in the worker's memory (no copy)


def test_outputs_named_where_they_lie_are_read_from_that_process_bit_for_bit():
    driver, worker = _pair()
    outs = [torch.randn(33, 7), torch.arange(10, dtype=torch.int64), torch.tensor(3.5), torch.empty(0, 4),
            torch.randn(1000).to(torch.bfloat16)]
    layout = worker.describe(outs)
    assert layout is not None and worker.map is None  # nothing copied: the file was never even mapped
    got = driver.read(layout.to_wire(), direct_pid=os.getpid())  # process_vm_readv of this process itself
    for a, b in zip(outs, got):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    outs[0].fill_(1.0)  # the driver reads what the memory holds when it reads
    assert torch.equal(driver.read(layout.to_wire(), direct_pid=os.getpid())[0], torch.ones(33, 7))


def test_an_output_that_is_not_one_contiguous_block_of_host_memory_is_copied_instead():
    assert WorkerSlot.describe([torch.randn(4), torch.randn(33, 7).t()]) is None


def test_a_layout_that_names_memory_the_process_does_not_have_is_a_protocol_error():
    driver, _ = _pair()
    with pytest.raises(ProtocolError, match="not in its memory"):
        driver.read([{"dtype": "torch.float32", "shape": [4], "offset": 4096}], direct_pid=os.getpid())
    with pytest.raises(ProtocolError, match="address space"):
        driver.read([{"dtype": "torch.float32", "shape": [4], "offset": (1 << 64) - 8}], direct_pid=os.getpid())


def test_a_reply_says_whether_its_layout_names_memory_and_nothing_else_is_taken_for_yes():
    from evaluator.wire.replies import MalformedReply, Rep, parse
    assert parse({"status": "rep", "ms": 1.0, "outputs": [], "direct": True}) == Rep(1.0, [], True)
    assert parse({"status": "rep", "ms": 1.0, "outputs": []}).direct is False
    with pytest.raises(MalformedReply, match="direct"):
        parse({"status": "rep", "ms": 1.0, "outputs": [], "direct": 1})


ROOT = os.path.join(os.path.dirname(__file__))


@pytest.mark.parametrize("direct", [True, False], ids=["named in memory", "copied into the file"])
def test_an_evaluation_reads_the_candidates_outputs_from_its_memory_where_it_may_and_copies_elsewhere(
        direct: bool, monkeypatch: pytest.MonkeyPatch):
    from evaluator import EvalConfig, evaluate, load_candidate, load_task
    from evaluator.driver import evaluate as evaluate_module
    from evaluator.wire import output_slot
    if direct and not output_slot.direct_reads_possible():
        pytest.skip("this driver cannot read an undumpable worker's memory (no CAP_SYS_PTRACE): the file is used")
    monkeypatch.setattr(evaluate_module, "direct_reads_possible", lambda: direct)
    reads: list[int] = []
    real = output_slot.read_memory

    def counted(pid: int, address: int, into: torch.Tensor) -> int:
        reads.append(pid)
        return real(pid, address, into)

    monkeypatch.setattr(output_slot, "read_memory", counted)
    task = load_task(os.path.join(ROOT, "tasks", "relu.py"))
    result = evaluate(task, load_candidate(os.path.join(ROOT, "honest", "relu_openmp_c.py")),
                      EvalConfig(device="cpu", run_timeout_s=20, compile_timeout_s=60, max_timing_s=0.5))
    assert result.ok, result.reason
    if direct:  # the reservoir's picks, read from the candidate's worker, not from this process
        assert reads and all(pid != os.getpid() for pid in reads)
    else:
        assert reads == []
