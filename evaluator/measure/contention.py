"""Timing rounds and the machine's other work during them (CPU): which rounds a side's figure may come from.

A round is one block of each side, run back to back (measure.py). Where other work on the machine kept
CONTENDED_CORES or more busy during a round (`other_work.py`, the kernel's accounting read by the driver), that round
is contended: a kernel that hands out rows dynamically and one that splits them statically slow down by different
factors when another process takes a core, so the speedup itself moves, and an evaluation in which such work came and
went mixed both regimes (docs/EVALUATOR.md, "When other work shares the cores"). Both sides keep the same rounds: a
round's two blocks ran side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTENDED_CORES = 0.25  # a quarter of a core kept busy by other work, on average over the round


@dataclass(frozen=True)
class Round:
    """The block each side ran in one round (None: that side was exhausted), and how many cores other work kept busy
    meanwhile (None: not known, as on a GPU)."""

    reference_block: int | None
    candidate_block: int | None
    other_cores: float | None

    @property
    def contended(self) -> bool:
        return self.other_cores is not None and self.other_cores >= CONTENDED_CORES

    @property
    def quiet(self) -> bool:
        return (self.other_cores is not None and not self.contended and self.reference_block is not None
                and self.candidate_block is not None)


@dataclass(frozen=True)
class Contention:
    """Other work during timing, as the verdict reports it: rounds timed, rounds contended, whether the figures come
    from the quiet rounds alone, and the most cores other work kept busy in any round."""

    rounds: int
    contended: int
    quiet_only: bool
    most_cores: float

    def note(self) -> str:
        if not self.contended:
            return ""
        which = "left out of the figures" if self.quiet_only else "kept in the figures (too few quiet rounds)"
        return (f"other work on the machine kept up to {self.most_cores:.1f} cores busy during {self.contended} of "
                f"{self.rounds} timing rounds, {which}")


def wants_more_rounds(rounds: list[Round], min_rounds: int) -> bool:
    """Whether another round could replace a contended one: some rounds were contended, some were quiet but fewer
    than `min_rounds`. A machine busy throughout has no quiet round to offer, and its evaluations should not pay for
    rounds that cannot help."""
    quiet = sum(r.quiet for r in rounds)
    return 0 < quiet < min_rounds and any(r.contended for r in rounds)


@dataclass(frozen=True)
class Choice:
    """The blocks each side's figure comes from (None: every call) and what the verdict says about other work."""

    reference_blocks: list[int] | None
    candidate_blocks: list[int] | None
    contention: Contention | None


def choose(rounds: list[Round], reference_calls: list[int], candidate_calls: list[int], min_rounds: int,
           min_calls: int) -> Choice:
    """The quiet rounds alone where some rounds were contended and `min_rounds` quiet ones give each side `min_calls`
    calls; every call otherwise. `*_calls`: the calls of each of a side's blocks, by block index."""
    known = [r for r in rounds if r.other_cores is not None]
    if not known:
        return Choice(None, None, None)
    contended = sum(r.contended for r in known)
    quiet = [r for r in rounds if r.quiet]
    ref_blocks = [r.reference_block for r in quiet if r.reference_block is not None]
    cand_blocks = [r.candidate_block for r in quiet if r.candidate_block is not None]
    quiet_only = contended > 0 and len(quiet) >= min_rounds \
        and sum(reference_calls[b] for b in ref_blocks) >= min_calls \
        and sum(candidate_calls[b] for b in cand_blocks) >= min_calls
    contention = Contention(rounds=len(rounds), contended=contended, quiet_only=quiet_only,
                            most_cores=max(r.other_cores or 0.0 for r in known))
    return Choice(ref_blocks, cand_blocks, contention) if quiet_only else Choice(None, None, contention)
