"""The population of a run: members on islands, a MAP-Elites grid of elites by feature cell, and the Pareto front.
("Archive" means earlier runs' kernels, opforge.run.archive; the grid is the run's own.)

Everything here is rebuilt from the store's history when a run starts (so resuming needs no checkpoint). A member is
a plain frozen dataclass; a member that has not been measured yet is *pending* (`status is None`).

- fitness: log(speedup) of a correct candidate, None otherwise;
- feature cell: (speed band, niche), the speed band in half-octaves of speedup and the niche the peak-memory band in
  octaves where memory was measured, else a tag made from the kernel's tunable values (block sizes, warps);
- Pareto front over (speedup up, energy down, peak memory down) among correct members.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from agents.tuner import describe_tunables
from evaluator.measure import speedup_noise
from evaluator.candidate import Candidate
from evaluator.result import EvalResult, Status
from evaluator.measure.speedup_noise import log_speedup_se
from store.records import ScoredCandidate

Cell = tuple[int, str]
SPEED_BANDS_PER_OCTAVE = 2
MAX_TAG_TUNABLES = 3


@dataclass(frozen=True, slots=True)
class Member:
    candidate: Candidate
    candidate_id: int | None = None
    generation: int = 0
    island: int = 0
    status: Status | None = None          # None: not measured yet
    speedup: float | None = None
    candidate_ms: float | None = None
    peak_memory_bytes: int | None = None
    energy_j: float | None = None
    result: EvalResult | None = field(default=None, repr=False, compare=False)  # the whole verdict, for the agents

    @property
    def digest(self) -> str:
        return self.candidate.digest

    @property
    def pending(self) -> bool:
        return self.status is None

    @property
    def correct(self) -> bool:
        return self.status == Status.OK and self.speedup is not None and self.speedup > 0

    @property
    def fitness(self) -> float | None:
        return math.log(self.speedup) if self.correct and self.speedup else None

    @property
    def fitness_se(self) -> float:
        """The standard error of `fitness` (log speedup) from the verdict's two medians' standard errors (`Timing.se_ms`,
        relative errors adding in quadrature); 0 where the verdict does not say."""
        return log_speedup_se(self.result)


def best_within_noise(members: Iterable[Member]) -> Member | None:
    """The best correct member by a figure whose error is known: among the members whose fitness is within noise
    (`evaluator.measure.speedup_noise.NOISE_Z` combined standard errors) of the highest, the one measured first. A later
    candidate that measured higher by less than the noise is not taken for better: what the search reports as its best
    changes only on a difference it could tell from the timing's own error. The archive offers later runs a task's
    kernel by the same rule."""
    correct = [(i, m) for i, m in enumerate(members) if m.fitness is not None]
    best = speedup_noise.best_within_noise(
        correct, lambda pair: pair[1].speedup, lambda pair: pair[1].result,
        lambda pair: (pair[1].candidate_id if pair[1].candidate_id is not None else math.inf, pair[0]))
    return None if best is None else best[1]


def member_from_scored(scored: ScoredCandidate) -> Member:
    rec, result = scored.candidate, scored.result
    base = Member(candidate=rec.candidate, candidate_id=rec.id, generation=rec.generation, island=rec.island)
    if result is None:
        return base
    return Member(candidate=base.candidate, candidate_id=rec.id, generation=rec.generation, island=rec.island,
                  status=result.status, speedup=result.speedup,
                  candidate_ms=None if result.candidate_ms is None else result.candidate_ms.median_ms,
                  peak_memory_bytes=result.peak_memory_bytes, energy_j=result.energy_j, result=result)


def member_from_result(candidate: Candidate, candidate_id: int | None, generation: int, island: int,
                       result: EvalResult) -> Member:
    return Member(candidate=candidate, candidate_id=candidate_id, generation=generation, island=island,
                  status=result.status, speedup=result.speedup,
                  candidate_ms=None if result.candidate_ms is None else result.candidate_ms.median_ms,
                  peak_memory_bytes=result.peak_memory_bytes, energy_j=result.energy_j, result=result)


@lru_cache(maxsize=4096)
def _tunables_tag(source: str) -> str:
    values = list(describe_tunables(source).items())[:MAX_TAG_TUNABLES]
    return ",".join(f"{name}={value}" for name, value in values) or "-"


def feature_cell(member: Member) -> Cell:
    """The MAP-Elites cell of a correct member (see the module's notes)."""
    speedup = member.speedup if member.speedup and member.speedup > 0 else 1e-12
    band = math.floor(math.log2(speedup) * SPEED_BANDS_PER_OCTAVE)
    if member.peak_memory_bytes:
        niche = f"mem2^{math.floor(math.log2(member.peak_memory_bytes))}"
    else:
        niche = _tunables_tag(member.candidate.source)
    return band, niche


class EliteGrid:
    """MAP-Elites: the fittest correct member of each feature cell."""

    def __init__(self) -> None:
        self.cells: dict[Cell, Member] = {}

    def add(self, member: Member) -> bool:
        """Place a correct member; True when it fills an empty cell or beats the cell's elite (ties keep the elite)."""
        if member.fitness is None:
            return False
        cell = feature_cell(member)
        incumbent = self.cells.get(cell)
        if incumbent is not None and (incumbent.fitness or -math.inf) >= member.fitness:
            return False
        self.cells[cell] = member
        return True

    def elites(self) -> list[Member]:
        return sorted(self.cells.values(), key=lambda m: -(m.fitness or -math.inf))

    def __len__(self) -> int:
        return len(self.cells)


@dataclass
class Island:
    members: list[Member] = field(default_factory=list)
    digests: set[str] = field(default_factory=set)

    def add(self, member: Member) -> bool:
        if member.digest in self.digests:
            return False
        self.members.append(member)
        self.digests.add(member.digest)
        return True

    def replace(self, member: Member) -> None:
        """Swap in the measured version of a pending member (or add it)."""
        for i, m in enumerate(self.members):
            if m.digest == member.digest:
                self.members[i] = member
                return
        self.add(member)

    def correct(self) -> list[Member]:
        return [m for m in self.members if m.fitness is not None]

    def best(self) -> Member | None:
        return best_within_noise(self.correct())


class Population:
    """All members of a run by digest, split over `n_islands` islands, with the MAP-Elites grid."""

    def __init__(self, n_islands: int = 2) -> None:
        if n_islands < 1:
            raise ValueError(f"a population needs at least one island, not {n_islands}")
        self.islands = [Island() for _ in range(n_islands)]
        self.grid = EliteGrid()
        self.members: dict[str, Member] = {}

    @classmethod
    def from_members(cls, members: Iterable[Member], n_islands: int = 2) -> "Population":
        pop = cls(n_islands)
        for m in members:
            pop.add(m)
        return pop

    def knows(self, digest: str) -> bool:
        return digest in self.members

    def add(self, member: Member) -> None:
        """Add a pending or measured member; a measured one replaces its pending entry."""
        island = self.islands[member.island % len(self.islands)]
        self.members[member.digest] = member
        for isl in self.islands:  # a migrant's copies are updated too
            if member.digest in isl.digests:
                isl.replace(member)
        island.replace(member)
        self.grid.add(member)

    def measured(self) -> list[Member]:
        return [m for m in self.members.values() if not m.pending]

    def correct(self) -> list[Member]:
        return [m for m in self.members.values() if m.fitness is not None]

    def best(self) -> Member | None:
        return best_within_noise(self.correct())

    def migrate(self) -> int:
        """Ring migration: each island's best correct member joins the next island; returns how many moved."""
        if len(self.islands) < 2:
            return 0
        bests = [isl.best() for isl in self.islands]
        moved = 0
        for i, best in enumerate(bests):
            if best is not None and self.islands[(i + 1) % len(self.islands)].add(best):
                moved += 1
        return moved

    def pareto_front(self) -> list[Member]:
        return pareto_front(self.correct())


def _objectives(members: Sequence[Member]) -> list[tuple[float, ...]]:
    """Objectives to minimise: -speedup, energy, memory. An objective nobody measured is left out; a missing value
    of one that others measured counts as the worst."""
    columns = [[-(m.speedup or 0.0) for m in members],
               [m.energy_j for m in members],
               [m.peak_memory_bytes for m in members]]
    kept = [col for col in columns if any(v is not None for v in col)]
    return [tuple(math.inf if col[i] is None else float(col[i]) for col in kept) for i in range(len(members))]


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def pareto_front(members: Sequence[Member]) -> list[Member]:
    """The correct members no other correct member dominates, fastest first (one of each set of equal points)."""
    correct = [m for m in members if m.fitness is not None]
    points = _objectives(correct)
    front: list[Member] = []
    seen: set[tuple[float, ...]] = set()
    for i, m in enumerate(correct):
        if points[i] in seen or any(_dominates(points[j], points[i]) for j in range(len(correct)) if j != i):
            continue
        seen.add(points[i])
        front.append(m)
    return sorted(front, key=lambda m: -(m.speedup or 0.0))
