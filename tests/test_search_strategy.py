"""The search policy on plain dataclasses: islands, migration, the MAP-Elites grid, the Pareto front, ask/tell."""

from __future__ import annotations

import math

import pytest

from evaluator.candidate import Candidate
from evaluator.result import Status
from opforge.run.population import EliteGrid, Member, Population, feature_cell, pareto_front
from opforge.run.strategy import EvolutionStrategy, StrategyConfig

KERNEL = "kernel[grid](x, out, n, BLOCK_SIZE={block}, num_warps={warps})\n# {tag}\n"


def member(tag: str, speedup: float | None = 1.0, *, island: int = 0, block: int = 1024, warps: int = 4,
           status: Status | None = Status.OK, memory: int | None = None, energy: float | None = None,
           generation: int = 1) -> Member:
    source = KERNEL.format(block=block, warps=warps, tag=tag)
    return Member(candidate=Candidate.from_source(source, origin="tune"), candidate_id=hash(tag) % 10_000,
                  generation=generation, island=island, status=status,
                  speedup=speedup if status == Status.OK else None, peak_memory_bytes=memory, energy_j=energy)


def test_fitness_is_log_speedup_for_correct_members_only():
    assert member("a", 2.0).fitness == math.log(2.0)
    assert member("b", None, status=Status.INCORRECT).fitness is None
    assert member("c", None, status=None).pending


def test_grid_keeps_the_fittest_member_of_each_cell():
    grid = EliteGrid()
    slow = member("slow", 1.05)
    faster_same_cell = member("fast", 1.2)  # same speed band (half-octave) and same tunables tag
    assert feature_cell(slow) == feature_cell(faster_same_cell)
    assert grid.add(slow)
    assert grid.add(faster_same_cell)
    assert not grid.add(member("slower", 1.01))
    assert list(grid.cells.values()) == [faster_same_cell]
    other_niche = member("other", 1.1, block=2048)  # different tunables: a new cell, not a replacement
    assert grid.add(other_niche)
    assert len(grid) == 2
    assert not grid.add(member("broken", None, status=Status.COMPILE_ERROR))


def test_memory_band_is_the_niche_when_memory_was_measured():
    a = member("a", 1.0, memory=1000)
    b = member("b", 1.0, memory=5000, block=64)
    assert feature_cell(a)[1].startswith("mem") and feature_cell(a) != feature_cell(b)


def test_members_stay_on_their_islands_until_migration():
    pop = Population(n_islands=3)
    best0, best1 = member("best0", 3.0, island=0), member("best1", 2.0, island=1)
    for m in (best0, member("w0", 1.0, island=0), best1, member("w1", 0.5, island=1)):
        pop.add(m)
    assert [len(i.members) for i in pop.islands] == [2, 2, 0]
    moved = pop.migrate()
    assert moved == 2  # island 2 has nothing to send
    assert best0.digest in pop.islands[1].digests and best1.digest in pop.islands[2].digests
    assert pop.islands[2].best() == best1
    assert pop.migrate() == 2  # island 1's best is now best0, which travels on to island 2; best1 reaches island 0
    assert best0.digest in pop.islands[2].digests and best1.digest in pop.islands[0].digests
    assert pop.migrate() == 0  # everyone has everyone's best


def test_strategy_migrates_every_interval_tells():
    strategy = EvolutionStrategy(StrategyConfig(n_islands=2, migration_interval=3))
    strategy.tell(member("a", 2.0, island=0))
    strategy.tell(member("b", 1.0, island=1))
    assert strategy.migrations == 0
    strategy.tell(member("c", 1.5, island=1))
    assert strategy.migrations == 2
    assert strategy.population.islands[1].best().speedup == 2.0


def test_pareto_front_trades_speed_against_energy_and_memory():
    fast_hungry = member("fast", 3.0, energy=5.0, memory=4000)
    slow_frugal = member("frugal", 1.0, energy=1.0, memory=1000)
    dominated = member("dominated", 0.9, energy=6.0, memory=5000)
    broken = member("broken", None, status=Status.RUNTIME_ERROR)
    front = pareto_front([fast_hungry, slow_frugal, dominated, broken])
    assert front == [fast_hungry, slow_frugal]


def test_pareto_front_handles_unmeasured_objectives():
    # On CPU nobody has energy or memory: the front is just the fastest.
    assert pareto_front([member("a", 1.0), member("b", 2.0)]) == [member("b", 2.0)]
    # Where some have a value, a missing one counts as the worst.
    known = member("known", 1.0, energy=1.0)
    unknown = member("unknown", 1.0)
    assert pareto_front([known, unknown]) == [known]


def test_ask_spreads_requests_over_islands_and_bootstraps_from_a_pending_seed():
    strategy = EvolutionStrategy(StrategyConfig(n_islands=2))
    first = strategy.ask(3)  # nothing known yet: first kernels from the reference, spread over the islands
    assert [(r.island, r.parent, r.n, r.how, r.generation) for r in first] == [(0, None, 2, "generate", 0),
                                                                               (1, None, 1, "generate", 0)]
    seed = member("seed", None, status=None, generation=0)
    strategy.note_pending(seed)
    requests = strategy.ask(3)
    assert sum(r.n for r in requests) == 3
    assert {r.island for r in requests} == {0, 1}
    assert all(r.parent == seed and r.how == "bootstrap" and r.generation == 1 for r in requests)


def test_parents_mix_exploitation_and_exploration():
    strategy = EvolutionStrategy(StrategyConfig(n_islands=1, seed=7, exploit_ratio=0.5, explore_ratio=0.3))
    best = member("best", 4.0)
    strategy.tell(best)
    for i in range(6):
        strategy.tell(member(f"m{i}", 1.0 + i * 0.1, block=2 ** (4 + i)))
    hows = [r.how for r in strategy.ask(60)]
    assert {"exploit", "explore", "random"} <= set(hows)
    exploit = [r for r in strategy.ask(40) if r.how == "exploit"]
    assert any(r.parent == best for r in exploit)
    assert all(best.digest != i.digest for r in exploit if r.parent == best for i in r.inspirations)


def test_rebuilding_from_history_replays_tells():
    history = [member("seed", 1.0, generation=0), member("a", 2.0, island=1), member("b", None, status=None)]
    strategy = EvolutionStrategy.from_members(history, StrategyConfig(n_islands=2, migration_interval=2))
    assert strategy.tells == 2 and strategy.migrations >= 1
    assert strategy.population.knows(history[2].digest)
    assert strategy.population.best().speedup == 2.0


def timed_member(cid: int, speedup: float, se_fraction: float | None) -> Member:
    """A correct member whose verdict's two medians each carry `se_fraction` of themselves as standard error."""
    from evaluator.result import EvalResult, Timing
    ref_ms = 2.0
    se = None if se_fraction is None else se_fraction
    result = EvalResult(Status.OK, "", candidate_ms=Timing(ref_ms / speedup, 0.0, 30,
                                                          None if se is None else se * ref_ms / speedup),
                        reference_ms=Timing(ref_ms, 0.0, 30, None if se is None else se * ref_ms))
    return Member(candidate=Candidate.from_source(f"# kernel {cid}\n", origin="tune"), candidate_id=cid,
                  status=Status.OK, speedup=speedup, result=result)


def test_a_new_best_within_the_timings_noise_is_not_taken_for_better():
    """Each side's median known to 2%: the log speedup to 2.8% each, 4% between two members, so a best is replaced
    only by a member 8% or more faster (NOISE_Z = 2)."""
    first, close, far = timed_member(1, 1.40, 0.02), timed_member(2, 1.48, 0.02), timed_member(3, 1.70, 0.02)
    assert close.fitness_se == pytest.approx(math.sqrt(2) * 0.02)
    assert Population.from_members([first, close]).best() is first
    assert Population.from_members([first, close, far]).best() is far
    assert Population.from_members([close, first]).best() is first  # the earlier candidate, whatever the order seen
    exact = [timed_member(1, 1.40, None), timed_member(2, 1.41, None)]  # no error recorded: the figure alone
    assert Population.from_members(exact).best() is exact[1]
    precise = [timed_member(1, 1.40, 0.001), timed_member(2, 1.48, 0.001)]  # 0.14% of error: 6% is a difference
    assert Population.from_members(precise).best() is precise[1]
