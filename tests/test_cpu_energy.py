"""CPU energy from RAPL (`evaluator/measure/cpu_energy.py`) through a fake /sys/class/powercap tree whose counters the test
advances: the package and DRAM zones summed (core, uncore and psys left out), a counter's wrap unrolled, idle power
taken off by `energy.meter_loop`, and one sentence where there is no meter."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator.measure.cpu_energy import RaplMeter, absence, rapl_zones
from evaluator.measure.energy import meter_loop

RANGE_UJ = 262_143_328_850  # a real package zone's max_energy_range_uj
DRAM_RANGE_UJ = 65_712_999_613


class FakePowercap:
    """Socket 0's package and DRAM, its core subzone and a platform zone, on a clock the test moves: each zone draws a
    constant power, the package more while `busy`."""

    def __init__(self, root: Path, package_start_uj: int = 0) -> None:
        self.root, self.now_s, self.busy = root, 0.0, False
        self.uj = {"intel-rapl:0": package_start_uj, "intel-rapl:0:0": 0, "intel-rapl:0:2": 0, "intel-rapl:1": 0}
        names = {"intel-rapl:0": "package-0", "intel-rapl:0:0": "core", "intel-rapl:0:2": "dram",
                 "intel-rapl:1": "psys"}
        for zone, name in names.items():
            (root / zone).mkdir(parents=True)
            (root / zone / "name").write_text(name + "\n")
            (root / zone / "max_energy_range_uj").write_text(f"{DRAM_RANGE_UJ if name == 'dram' else RANGE_UJ}\n")
        self._write()

    def watts(self, zone: str) -> float:
        return {"intel-rapl:0": 30.0 + (50.0 if self.busy else 0.0), "intel-rapl:0:0": 20.0, "intel-rapl:0:2": 5.0,
                "intel-rapl:1": 100.0}[zone]

    def advance(self, seconds: float) -> None:
        for zone in self.uj:
            limit = DRAM_RANGE_UJ if zone == "intel-rapl:0:2" else RANGE_UJ
            self.uj[zone] = int(self.uj[zone] + self.watts(zone) * seconds * 1e6) % limit
        self.now_s += seconds
        self._write()

    def _write(self) -> None:
        for zone, value in self.uj.items():
            (self.root / zone / "energy_uj").write_text(f"{value}\n")


def _metered(tree: FakePowercap, meter: RaplMeter, loop_s: float = 1.0):
    def run_loop(seconds: float) -> int:
        tree.busy = True
        tree.advance(seconds)
        tree.busy = False
        return 1000

    return meter_loop(meter, run_loop, loop_s=loop_s, idle_s=0.5, sleep=tree.advance, clock=lambda: tree.now_s)


def test_package_and_dram_are_metered_over_a_loop_minus_idle(tmp_path):
    tree = FakePowercap(tmp_path)
    meter = RaplMeter(tmp_path)
    assert [z.name for z in meter.zones] == ["package-0", "dram"]  # core is in the package; psys is the platform
    figure = _metered(tree, meter)
    assert figure is not None
    assert figure.idle_w == pytest.approx(35.0, rel=1e-3)  # package 30 W + DRAM 5 W
    assert figure.power_w == pytest.approx(85.0, rel=1e-3)
    assert figure.energy_j == pytest.approx(50.0 / 1000, rel=1e-3)  # 50 J above idle over 1000 calls


def test_a_counter_that_wraps_during_the_loop_still_reads_its_energy(tmp_path):
    tree = FakePowercap(tmp_path, package_start_uj=RANGE_UJ - 40_000_000)  # wraps 40 J on: during the loop
    meter = RaplMeter(tmp_path)
    figure = _metered(tree, meter)
    assert figure is not None and tree.uj["intel-rapl:0"] < 100_000_000  # it did wrap
    assert figure.power_w == pytest.approx(85.0, rel=1e-3)
    assert figure.energy_j == pytest.approx(50.0 / 1000, rel=1e-3)


def test_no_rapl_is_one_sentence_and_no_figure(tmp_path):
    assert not RaplMeter(tmp_path).available
    assert _metered(FakePowercap(tmp_path / "other"), RaplMeter(tmp_path)) is None
    sentence = absence(tmp_path / "missing")
    assert sentence is not None and "no RAPL energy counters" in sentence and sentence.count(".") <= 1
    assert absence(tmp_path / "other") is None


def test_counters_that_cannot_be_read_are_no_meter_and_say_so(tmp_path):
    FakePowercap(tmp_path)
    for zone in tmp_path.iterdir():
        (zone / "energy_uj").unlink()
        (zone / "energy_uj").mkdir()  # unreadable as a file, whoever runs the test (root reads a 0400 file)
    assert rapl_zones(tmp_path) == [] and not RaplMeter(tmp_path).available
    sentence = absence(tmp_path)
    assert sentence is not None and "cannot be read" in sentence
