"""The offline tuner: a proposer without an LLM that moves a candidate's tunable parameters to neighbouring values.

`neighbours(source)` lists every source one or two parameter steps away (see `agents.tunables` for what counts as a
tunable and which values neighbour it); `TuneProposer.propose` draws from those of the given parents, seeded.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence, Set as AbstractSet

from agents.proposal import Scored
from agents.tunables import Tunable, find_tunables, rewrite
from evaluator.candidate import Candidate

ORIGIN = "tune"
SINGLE_CHANGE_PREFERENCE = 0.7  # chance that a draw takes a one-parameter neighbour while such remain


def describe_tunables(source: str) -> dict[str, int]:
    """Each tunable's label and current value, in source order; {} where there are none or the source does not parse."""
    return {t.label: t.value for t in find_tunables(source)}


def neighbours(source: str, max_changes: int = 2) -> list[tuple[str, str]]:
    """(new_source, note) for every distinct neighbour: one-parameter changes first, then two-parameter ones."""
    return [(src, note) for src, note, _ in _neighbours(source, max_changes)]


def _note(changes: Sequence[tuple[Tunable, int]]) -> str:
    return ", ".join(f"{t.label} {t.value}->{v}" for t, v in changes)


def _neighbours(source: str, max_changes: int) -> list[tuple[str, str, int]]:
    tunables = find_tunables(source)
    moves = [[(t, v) for v in t.choices] for t in tunables]
    seen = {source}
    out: list[tuple[str, str, int]] = []
    for size in range(1, min(max_changes, len(tunables)) + 1):
        for group in itertools.combinations(range(len(tunables)), size):
            for changes in itertools.product(*(moves[i] for i in group)):
                new = rewrite(source, changes)
                if new not in seen:
                    seen.add(new)
                    out.append((new, _note(changes), size))
    return out


class TuneProposer:
    """Proposes neighbours of the parents (the first parent most often); never a parent, an inspiration or a repeat."""

    def __init__(self, seed: int | None = None, max_changes: int = 2) -> None:
        if max_changes < 1:
            raise ValueError(f"TuneProposer: max_changes must be at least 1, not {max_changes}.")
        self._rng = random.Random(seed)
        self.max_changes = max_changes

    def neighbours(self, source: str) -> list[tuple[str, str]]:
        return neighbours(source, self.max_changes)

    async def propose(
        self, task: object, parents: Sequence[Scored], inspirations: Sequence[Scored], n: int
    ) -> list[Candidate]:
        del task  # the tuner reads only the candidates
        return self.sweep([p.candidate for p in parents], n, {c.digest for c in inspirations})

    def sweep(self, parents: Sequence[Candidate], n: int, avoid: AbstractSet[str] = frozenset()) -> list[Candidate]:
        """Up to n neighbours of the parents (the first parent most often), none of them a parent or in `avoid`."""
        seen = {c.digest for c in parents} | set(avoid)
        pools: list[tuple[Candidate, list[tuple[str, str]], list[tuple[str, str]]]] = []
        for parent in parents:
            found = _neighbours(parent.source, self.max_changes)
            singles = [(src, note) for src, note, size in found if size == 1]
            multis = [(src, note) for src, note, size in found if size > 1]
            self._rng.shuffle(singles)
            self._rng.shuffle(multis)
            pools.append((parent, singles, multis))
        out: list[Candidate] = []
        while len(out) < n:
            live = [i for i, (_, singles, multis) in enumerate(pools) if singles or multis]
            if not live:
                break
            parent, singles, multis = pools[self._rng.choices(live, weights=[0.5**i for i in live])[0]]
            use_single = bool(singles) and (not multis or self._rng.random() < SINGLE_CHANGE_PREFERENCE)
            src, note = (singles if use_single else multis).pop()
            child = Candidate.from_source(src, origin=ORIGIN, parents=(parent.digest,), note=note)
            if child.digest not in seen:
                seen.add(child.digest)
                out.append(child)
        return out
