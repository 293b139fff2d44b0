"""Confirmation: before a run reports its best, its fastest candidates are measured again, beside the reference.

The search keeps the maximum of noisy measurements, so the kernel it ranks first is, more often than not, one that
measured lucky (the winner's curse: a quick start once reported 1.70x for a kernel whose neighbours all measured
0.8-1.23x). Once the search is over, the `top_n` (2) fastest correct candidates by measured speedup are each evaluated
`repeats` (3) more times (fresh evaluations: fresh workers, fresh input seeds, the reference timed in blocks alternating
with the candidate's), and what the run reports for a candidate is the median of those re-measurements alone: its
search figure is left out, since it was picked for being high. A candidate any of whose re-measurements does not come
back correct is not reported as best. The run's best is the candidate with the best confirmed figure.

Ask/tell, as the search strategy: `ask()` names the re-measurements still owed (round robin over the finalists, so
load that comes and goes falls on all of them alike), `tell(record)` takes one back. Each re-measurement is its own
store record (store/confirmations.py), so nothing is lost and a resumed run re-measures only what is missing.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opforge.run.population import Member, member_from_scored
from store import ConfirmationRecord, ConfirmedSpeedup, Store
from store.confirmations import confirmed_speedups


@dataclass(frozen=True, slots=True)
class ConfirmPolicy:
    """How many of the fastest candidates are re-measured, and how many times each (0: no confirmation)."""

    top_n: int = 2
    repeats: int = 3    # odd: the median is one re-measurement, not the mean of two (one outlier cannot move it)

    def __post_init__(self) -> None:
        if self.top_n < 0 or self.repeats < 0:
            raise ValueError(f"a confirmation needs top_n and repeats of 0 or more, not {self.top_n}, {self.repeats}")

    @property
    def enabled(self) -> bool:
        return self.top_n > 0 and self.repeats > 0


NO_CONFIRMATION = ConfirmPolicy(0, 0)
MAX_RESERVE_SHARE = 0.5  # a time limit keeps at most this share of itself for the confirmation


def reserve_s(policy: ConfirmPolicy, capacity: int, walls_s: Sequence[float], time_limit_s: float) -> float:
    """How long before a run's time limit the search stops, so that the confirmation fits inside the limit: the
    re-measurements run `capacity` at a time, each about as long as this invocation's median evaluation so far
    (0 before the first, or without confirmation), and never more than half the limit (a limit shorter than the
    confirmation itself still lets the search take half of it; the confirmation then runs past the limit)."""
    if not policy.enabled or not walls_s:
        return 0.0
    waves = math.ceil(policy.top_n * policy.repeats / max(1, capacity))
    return min(waves * statistics.median(walls_s), MAX_RESERVE_SHARE * time_limit_s)


def finalists(members: Iterable[Member], top_n: int) -> list[Member]:
    """The `top_n` fastest correct, stored members by measured speedup (ties: the earlier candidate first)."""
    correct = [m for m in members if m.fitness is not None and m.candidate_id is not None]
    return sorted(correct, key=lambda m: (-(m.speedup or 0.0), m.candidate_id))[:top_n]


class Confirmation:
    """The re-measurements a finished run owes before it reports its best (see the module's notes)."""

    def __init__(self, members: Iterable[Member], stored: Sequence[ConfirmationRecord],
                 policy: ConfirmPolicy = ConfirmPolicy()) -> None:
        self.policy = policy
        self.finalists = finalists(members, policy.top_n) if policy.enabled else []
        ids = {m.candidate_id for m in self.finalists}
        self.records: list[ConfirmationRecord] = [r for r in stored if r.candidate_id in ids]
        self._asked: Counter[int] = Counter()

    def _owed(self, member: Member) -> int:
        assert member.candidate_id is not None
        have = sum(r.candidate_id == member.candidate_id for r in self.records)
        return max(0, self.policy.repeats - have - self._asked[member.candidate_id])

    def ask(self) -> list[Member]:
        """Every re-measurement still owed and not asked for yet, round robin over the finalists."""
        owed = {m.candidate_id: self._owed(m) for m in self.finalists}
        out: list[Member] = []
        for turn in range(max(owed.values(), default=0)):
            out += [m for m in self.finalists if owed[m.candidate_id] > turn]
        for m in out:
            assert m.candidate_id is not None
            self._asked[m.candidate_id] += 1
        return out

    def tell(self, record: ConfirmationRecord) -> None:
        """One re-measurement came back (recorded in the store)."""
        self.records.append(record)
        if self._asked[record.candidate_id] > 0:
            self._asked[record.candidate_id] -= 1

    def forget_asked(self) -> None:
        """Re-measurements asked for but never told (a stop) are owed again."""
        self._asked.clear()

    @property
    def done(self) -> bool:
        return all(self._owed(m) == 0 and self._asked[m.candidate_id or 0] == 0 for m in self.finalists)

    def confirmed(self) -> dict[int, ConfirmedSpeedup]:
        return confirmed_speedups(self.records)

    def best(self) -> Member | None:
        """The finalist with the best confirmed figure, its speedup replaced by that figure; None when no finalist's
        re-measurements all came back correct."""
        confirmed = self.confirmed()
        scored = [(confirmed[m.candidate_id].speedup, m) for m in self.finalists
                  if m.candidate_id in confirmed and confirmed[m.candidate_id].speedup is not None]
        if not scored:
            return None
        figure, member = max(scored, key=lambda pair: pair[0] or 0.0)
        return dataclasses.replace(member, speedup=figure)


def confirmation_owed(store: Store, run_id: int, policy: ConfirmPolicy) -> bool:
    """Whether a run that reached its budget still owes re-measurements (it was stopped while confirming)."""
    if not policy.enabled:
        return False
    members = [member_from_scored(sc) for sc in store.history(run_id)]
    return not Confirmation(members, store.confirmations(run_id), policy).done
