"""Energy on a CPU from RAPL's counters under /sys/class/powercap, metered like the GPU's (`energy.meter_loop`).

Each RAPL zone (`intel-rapl:N`, its subzones `intel-rapl:N:M`; AMD's processors use the same driver and names) has
`name`, `energy_uj` (a cumulative counter in microjoules) and `max_energy_range_uj` (where the counter wraps to 0). The
meter sums the package zones (`package-N`: cores, caches and uncore of each socket) and the DRAM zones (`dram`), and
leaves out the rest (`core` and `uncore` are parts of a package; `psys` is the whole platform and would count the
package twice). A counter read lower than before has wrapped: the delta is taken modulo its range, so a loop that runs
over a wrap still reads its energy (a package counter of 2^32 uJ wraps every ~70 minutes at 1 kW, the range is
reported per zone).

Since 2020 (the PLATYPUS side channel) `energy_uj` is readable by root only on most distributions; a driver that is not
root, or a machine without RAPL (most VMs, these included), has no meter, and `absence()` says why in one sentence.
`root` is injectable: the tests drive the meter through a fake tree of those files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaluator.measure.energy import EnergyMeter

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True, slots=True)
class RaplZone:
    path: Path
    name: str
    range_uj: int


def rapl_zones(root: Path = POWERCAP) -> list[RaplZone]:
    """The package and DRAM zones under `root` whose counters can be read, in name order."""
    zones = []
    for entry in sorted(root.glob("*-rapl:*")) if root.is_dir() else []:
        try:
            name = (entry / "name").read_text().strip()
            if not (name.startswith("package") or name == "dram"):
                continue
            int((entry / "energy_uj").read_text())
            zones.append(RaplZone(entry, name, int((entry / "max_energy_range_uj").read_text())))
        except (OSError, ValueError):
            continue
    return zones


def absence(root: Path = POWERCAP) -> str | None:
    """Why there is no CPU energy meter on this machine, in one sentence; None where there is one."""
    if rapl_zones(root):
        return None
    if not root.is_dir() or not any(root.glob("*-rapl:*")):
        return f"this machine exposes no RAPL energy counters ({root} has no intel-rapl zone; most VMs have none)"
    return (f"RAPL's counters under {root} cannot be read by this user (energy_uj is readable by root only on most "
            "systems)")


class RaplMeter(EnergyMeter):
    """The summed energy of a CPU's package and DRAM zones in joules, each counter's wraps unrolled; every reading is
    None without a readable zone."""

    def __init__(self, root: Path = POWERCAP) -> None:
        super().__init__(None, None)
        self.zones = rapl_zones(root)
        self._last_uj: dict[Path, int] = {}
        self._total_uj = 0

    @property
    def available(self) -> bool:
        return bool(self.zones)

    def read_j(self) -> float | None:
        if not self.zones:
            return None
        try:
            raw = {z.path: int((z.path / "energy_uj").read_text()) for z in self.zones}
        except (OSError, ValueError):
            return None
        for zone in self.zones:
            last = self._last_uj.get(zone.path)
            if last is not None:
                delta = raw[zone.path] - last
                self._total_uj += delta if delta >= 0 else delta + zone.range_uj
        self._last_uj = raw
        return self._total_uj / 1e6
