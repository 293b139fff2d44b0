"""One timed phase per device at a time (issue 15, finding 8): the lock itself, across threads and processes, and two
evaluations run in parallel on the CPU whose timed phases, recorded through the evaluator's observer, never overlap."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator.device.lock import DeviceBusy, DeviceLock, device_key
from evaluator.driver.evaluate import LocalEvaluator

ROOT = Path(__file__).resolve().parent.parent


class Phases:
    def __init__(self) -> None:
        self.events: list[tuple[float, str, str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, event: str, key: str, what: str) -> None:
        with self._lock:
            self.events.append((time.monotonic(), event, key, what))

    def intervals(self) -> list[tuple[float, float, str]]:
        open_at: list[tuple[float, str]] = []
        spans = []
        for t, event, _, what in sorted(self.events):
            if event == "start":
                open_at.append((t, what))
            else:
                t0, w = open_at.pop(0)
                spans.append((t0, t, w))
        return spans

    def overlapping(self) -> bool:
        """True when a phase started before the previous one ended (events are appended while the lock is held)."""
        depth = 0
        for _, event, _, _ in self.events:  # in the order they happened
            depth += 1 if event == "start" else -1
            if depth > 1:
                return True
        return False


def test_two_holders_of_one_device_take_turns(tmp_path: Path):
    phases = Phases()

    def work() -> None:
        for _ in range(3):
            with DeviceLock("cpu", tmp_path, phases).held("timing"):
                time.sleep(0.02)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(phases.events) == 12 and not phases.overlapping()


def test_other_devices_do_not_wait(tmp_path: Path):
    with DeviceLock("cuda-0", tmp_path).held("timing"):
        with DeviceLock("cuda-1", tmp_path).held("timing", timeout_s=0.5):
            pass


def test_a_lock_held_by_another_process_is_waited_for(tmp_path: Path):
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(tmp_path / 'cpu.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DeviceBusy, match="cpu device stayed busy"):
            with DeviceLock("cpu", tmp_path).held("timing", timeout_s=0.3):
                pass
    finally:
        holder.kill()
        holder.wait()
    with DeviceLock("cpu", tmp_path).held("timing", timeout_s=5):  # released when its holder died
        pass


def test_the_device_key_follows_cuda_visible_devices():
    assert device_key("cpu", {}) == "cpu"
    assert device_key("cuda", {}) == "cuda-0"
    assert device_key("cuda", {"CUDA_VISIBLE_DEVICES": "3,1"}) == "cuda-3"
    assert device_key("cuda", {"CUDA_VISIBLE_DEVICES": "GPU-8a6c/x"}) == "cuda-GPU-8a6c_x"


@pytest.mark.slow
def test_two_evaluations_in_parallel_never_time_at_once(tmp_path: Path):
    phases = Phases()
    evaluator = LocalEvaluator(lock_dir=tmp_path, phase_observer=phases)
    candidate = load_candidate(ROOT / "benchmarks" / "tiny" / "softmax.seed.py")
    task = load_task(ROOT / "benchmarks" / "tiny" / "softmax.py")
    cfg = EvalConfig(device="cpu", max_timing_s=0.3, profile=False, compile_baseline=True)
    results = []

    def run() -> None:
        results.append(evaluator.evaluate(task, candidate, cfg))

    try:
        threads = [threading.Thread(target=run) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        evaluator.close()
    assert [r.status for r in results] == [Status.OK, Status.OK], [r.reason for r in results]
    whats = [w for _, _, w in phases.intervals()]
    assert whats.count("timing") == 2 and whats.count("the torch.compile baseline") == 2
    assert not phases.overlapping()


def test_shared_work_runs_side_by_side_but_never_beside_a_timed_phase(tmp_path: Path):
    inside = threading.Barrier(2, timeout=5)

    def trials() -> None:
        with DeviceLock("cpu", tmp_path).shared("correctness trials"):
            inside.wait()  # both holders are in at once, or this times out

    threads = [threading.Thread(target=trials) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not inside.broken
    with DeviceLock("cpu", tmp_path).shared("a build"):
        with pytest.raises(DeviceBusy):
            with DeviceLock("cpu", tmp_path).held("timing", timeout_s=0.3):
                pass
    with DeviceLock("cpu", tmp_path).held("timing"):
        with pytest.raises(DeviceBusy):
            with DeviceLock("cpu", tmp_path).shared("correctness trials", timeout_s=0.3):
                pass


def test_a_waiting_timed_phase_goes_before_shared_work_that_came_later(tmp_path: Path):
    order: list[str] = []
    first_in, timing_waits = threading.Event(), threading.Event()

    def early_trials() -> None:
        with DeviceLock("cpu", tmp_path).shared("trials of A"):
            first_in.set()
            timing_waits.wait(5)
            time.sleep(0.2)  # the timed phase is queued by now
            order.append("A trials end")

    def timing() -> None:
        first_in.wait(5)
        timing_waits.set()
        with DeviceLock("cpu", tmp_path).held("timing of B"):
            order.append("B timing")

    def late_trials() -> None:
        timing_waits.wait(5)
        time.sleep(0.1)  # after the timed phase started waiting
        with DeviceLock("cpu", tmp_path).shared("trials of C"):
            order.append("C trials")

    threads = [threading.Thread(target=f) for f in (early_trials, timing, late_trials)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order == ["A trials end", "B timing", "C trials"]
