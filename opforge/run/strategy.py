"""The evolutionary search policy, Optuna-style: `ask(n)` says what to propose next, `tell(member)` reports a verdict.

Each request names an island, one parent and a few inspirations. Parents are drawn per island:

- exploit (most often): a tournament among the island's best correct members;
- explore: a random elite of the MAP-Elites grid (any island, any feature cell);
- otherwise a uniformly random correct member of the island.

While nothing is correct yet, parents are the most recent measured or pending members (a broken seed can still be
repaired); while there is no member at all (no seed kernel), requests have no parent and ask for first kernels. Inspirations are elites of other cells and the bests of other islands. Every `migration_interval` tells,
each island's best joins the next island (ring migration). The strategy holds no store: the driver rebuilds it from
the run's history with `from_members`, replaying the tells in order.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from opforge.run.population import Member, Population


@dataclass(frozen=True, slots=True)
class StrategyConfig:
    n_islands: int = 2
    migration_interval: int = 8       # tells between migrations
    exploit_ratio: float = 0.7
    explore_ratio: float = 0.2        # the rest: a random correct member of the island
    tournament_size: int = 3
    n_inspirations: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_islands < 1:
            raise ValueError(f"n_islands must be at least 1, not {self.n_islands}")
        if not 0 <= self.exploit_ratio + self.explore_ratio <= 1:
            raise ValueError("exploit_ratio + explore_ratio must lie between 0 and 1")


@dataclass(frozen=True, slots=True)
class Request:
    """Propose `n` children of `parent` on `island`, optionally inspired by `inspirations`; with no parent, `n`
    first kernels written from the reference alone."""

    island: int
    parent: Member | None
    inspirations: tuple[Member, ...]
    n: int
    how: str                          # exploit | explore | random | bootstrap | generate

    @property
    def generation(self) -> int:
        return 0 if self.parent is None else self.parent.generation + 1


class EvolutionStrategy:
    def __init__(self, config: StrategyConfig = StrategyConfig(), population: Population | None = None) -> None:
        self.config = config
        self.population = population or Population(config.n_islands)
        self._rng = random.Random(config.seed)
        self._next_island = 0
        self.tells = 0
        self.migrations = 0

    @classmethod
    def from_members(cls, members: Iterable[Member], config: StrategyConfig = StrategyConfig()
                     ) -> "EvolutionStrategy":
        """Rebuild from a history: pending members are added, measured ones told in order."""
        strategy = cls(config)
        for m in members:
            if m.pending:
                strategy.population.add(m)
            else:
                strategy.tell(m)
        return strategy

    # -- ask / tell -------------------------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Request]:
        """Up to `n` children in all, spread over the islands in turn; first kernels while the population is empty."""
        if n <= 0:
            return []
        if not self.population.members:
            counts = [n // len(self.population.islands) + (i < n % len(self.population.islands))
                      for i in range(len(self.population.islands))]
            return [Request(i, None, (), k, "generate") for i, k in enumerate(counts) if k > 0]
        grouped: dict[tuple[int, str], list] = {}
        for _ in range(n):
            island = self._next_island
            self._next_island = (self._next_island + 1) % len(self.population.islands)
            parent, how = self._select_parent(island)
            key = (island, parent.digest)
            if key in grouped:
                grouped[key][2] += 1
            else:
                grouped[key] = [parent, how, 1]
        return [Request(island, parent, self._inspirations(island, parent), count, how)
                for (island, _), (parent, how, count) in grouped.items()]

    def tell(self, member: Member) -> None:
        """Record a measured member (its island is where it was asked for)."""
        self.population.add(member)
        self.tells += 1
        if self.config.migration_interval > 0 and self.tells % self.config.migration_interval == 0:
            self.migrations += self.population.migrate()

    def note_pending(self, member: Member) -> None:
        """A proposal on its way to evaluation: known (never proposed again) but without a verdict."""
        self.population.add(member)

    # -- selection --------------------------------------------------------------------------------------------------
    def _select_parent(self, island: int) -> tuple[Member, str]:
        pop = self.population
        local = pop.islands[island].correct()
        everywhere = pop.correct()
        if not everywhere:
            return self._bootstrap_parent(island), "bootstrap"
        if not local:  # an empty island starts from the global best
            return pop.best() or everywhere[0], "exploit"
        roll = self._rng.random()
        if roll < self.config.exploit_ratio:
            size = min(self.config.tournament_size, len(local))
            return max(self._rng.sample(local, size), key=lambda m: m.fitness or 0.0), "exploit"
        if roll < self.config.exploit_ratio + self.config.explore_ratio and len(pop.grid):
            return self._rng.choice(list(pop.grid.cells.values())), "explore"
        return self._rng.choice(local), "random"

    def _bootstrap_parent(self, island: int) -> Member:
        local = self.population.islands[island].members
        pool = local or list(self.population.members.values())
        measured = [m for m in pool if not m.pending]
        return (measured or pool)[-1]

    def _inspirations(self, island: int, parent: Member) -> tuple[Member, ...]:
        k = self.config.n_inspirations
        if k <= 0:
            return ()
        others = [isl.best() for i, isl in enumerate(self.population.islands) if i != island]
        picks = [m for m in others if m is not None and m.digest != parent.digest]
        elites = [m for m in self.population.grid.elites() if m.digest != parent.digest]
        self._rng.shuffle(elites)
        chosen: dict[str, Member] = {}
        for m in picks + elites:
            if len(chosen) >= k:
                break
            chosen.setdefault(m.digest, m)
        return tuple(chosen.values())
