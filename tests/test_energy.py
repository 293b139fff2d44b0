"""The energy meter through its NVML seam (issue 15, finding 3): the device found by UUID whatever CUDA_VISIBLE_DEVICES
holds, and energy metered over a loop of its own, idle power taken off. The fake NVML integrates a power trace in
millijoules on a clock the test moves, as NVML's counter does (without its 20-100 ms update steps)."""

from __future__ import annotations

import pytest

from evaluator.measure.energy import EnergyMeter, meter_loop, visible_uuid


class FakeNvml:
    """Two GPUs in PCI order; GPU 1 is the busy one while `busy` is set."""

    UUIDS = ("GPU-aaaa-0000", "GPU-bbbb-1111")

    def __init__(self) -> None:
        self.now_s = 0.0
        self.busy_device: int | None = None
        self.energy_mj = [0.0, 0.0]

    def advance(self, seconds: float) -> None:
        for i in range(2):
            watts = 60.0 + (240.0 if self.busy_device == i else 0.0)
            self.energy_mj[i] += watts * seconds * 1000.0
        self.now_s += seconds

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802 - NVML's names
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:  # noqa: N802
        return i

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:  # noqa: N802
        return self.UUIDS[handle].encode()

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:  # noqa: N802
        return self.UUIDS.index(uuid)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:  # noqa: N802
        return int(self.energy_mj[handle])


def test_the_device_is_found_by_uuid_whatever_cuda_visible_devices_holds():
    nvml = FakeNvml()
    assert visible_uuid(nvml, {}, torch_uuid="bbbb-1111") == "GPU-bbbb-1111"  # torch's own word first
    assert visible_uuid(nvml, {"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}) == "GPU-bbbb-1111"  # a unique prefix
    assert visible_uuid(nvml, {"CUDA_VISIBLE_DEVICES": "GPU-"}) is None  # ambiguous
    assert visible_uuid(nvml, {"CUDA_VISIBLE_DEVICES": "1,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == "GPU-bbbb-1111"
    assert visible_uuid(nvml, {"CUDA_VISIBLE_DEVICES": "1"}) is None  # CUDA's order is not NVML's: no guess
    assert visible_uuid(nvml, {}) is None  # nor without it, on a machine of two GPUs
    assert visible_uuid(nvml, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == "GPU-aaaa-0000"


def test_energy_is_metered_over_a_loop_of_its_own_minus_idle():
    nvml = FakeNvml()
    meter = EnergyMeter(nvml, "GPU-bbbb-1111")
    assert meter.available

    def run_loop(seconds: float) -> int:
        nvml.busy_device = 1
        nvml.advance(seconds)
        nvml.busy_device = None
        return 1000  # calls

    figure = meter_loop(meter, run_loop, loop_s=1.0, idle_s=0.5, sleep=nvml.advance, clock=lambda: nvml.now_s)
    assert figure is not None
    assert figure.idle_w == pytest.approx(60.0, rel=0.01)
    assert figure.energy_j == pytest.approx(240.0 / 1000, rel=0.01)  # the work's own energy: 0.24 J per call
    assert figure.power_w == pytest.approx(300.0, rel=0.01)
    assert figure.loop_s == pytest.approx(1.0)


def test_the_other_gpus_load_is_not_metered():
    nvml = FakeNvml()
    meter = EnergyMeter(nvml, "GPU-aaaa-0000")  # this process's GPU; GPU 1 is busy with someone else's work

    def run_loop(seconds: float) -> int:
        nvml.busy_device = 1
        nvml.advance(seconds)
        return 10

    figure = meter_loop(meter, run_loop, sleep=nvml.advance, clock=lambda: nvml.now_s)
    assert figure is not None and figure.energy_j == pytest.approx(0.0, abs=1e-6)


def test_no_nvml_means_no_figure():
    assert meter_loop(EnergyMeter(None, None), lambda s: 1) is None
    assert EnergyMeter.for_device("cpu").read_j() is None


def test_the_idle_power_is_measured_once_a_minute_per_meter():
    nvml = FakeNvml()
    meter = EnergyMeter(nvml, "GPU-bbbb-1111")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        nvml.advance(seconds)

    def run_loop(seconds: float) -> int:
        nvml.busy_device = 1
        nvml.advance(seconds)
        nvml.busy_device = None
        return 100

    for _ in range(3):
        figure = meter_loop(meter, run_loop, sleep=sleep, clock=lambda: nvml.now_s)
        assert figure is not None and figure.energy_j == pytest.approx(2.4, rel=0.01)
    assert slept == [0.5]
    nvml.advance(61.0)
    meter_loop(meter, run_loop, sleep=sleep, clock=lambda: nvml.now_s)
    assert slept == [0.5, 0.5]

