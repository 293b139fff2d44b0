"""The thread proposers run on (the protocol itself is `agents.proposal.Proposer`).

A proposer (the tuner, the LLM agents) is async: `propose(task, parents, inspirations, n) -> list[Candidate]`. The run
loop must never wait on one while results are coming in, so proposals run on an event loop of their own in a
background thread (`ProposalThread`); the loop keeps one event loop for its whole life, so async clients bound to a
loop (HTTP connection pools) keep working. The driver receives a `concurrent.futures.Future` per batch.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from agents.proposal import Proposer, Scored
from agents.spend import Spend
from evaluator.candidate import Candidate
from evaluator.task import Task
from opforge.run.population import Member
from opforge.run.strategy import Request

__all__ = ["Proposal", "ProposalThread", "Proposer", "Proposing"]


@dataclass(frozen=True, slots=True)
class Proposing:
    """A run's proposer and how the search drives it: `oversample` asks it for that many times the children wanted
    (it repeats itself); `extra_per_request` lets it add cheap variants to each request's children (the tuner's
    sweep after an LLM child); `spend` is the LLM spend it shares with the search, checked against the budget."""

    proposer: Proposer
    oversample: int = 1
    extra_per_request: int = 0
    spend: Spend | None = None


def scored(member: Member) -> Scored:
    return Scored(member.candidate, member.result)


@dataclass(frozen=True, slots=True)
class Proposal:
    """What one request produced (possibly nothing), or the proposer's error as one sentence."""

    request: Request
    candidates: tuple[Candidate, ...]
    error: str | None = None


class ProposalThread:
    """Runs a proposer's coroutines on a private event loop in a daemon thread."""

    def __init__(self, proposer: Proposer, task: Task, oversample: int = 1, extra_inspirations: Sequence[Scored] = ()
                 ) -> None:
        self.proposer, self.task = proposer, task
        self.oversample = max(1, oversample)  # ask for more than needed where duplicates are likely (the tuner)
        self.extra = tuple(extra_inspirations)  # related tasks' kernels from the archive: one joins each request
        self._next_extra = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="opforge-proposer", daemon=True)
        self._thread.start()

    def submit(self, requests: list[Request]) -> Future[list[Proposal]]:
        """One batch: every request proposed concurrently."""
        return asyncio.run_coroutine_threadsafe(self._batch(requests), self._loop)

    async def _batch(self, requests: list[Request]) -> list[Proposal]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, request: Request) -> Proposal:
        try:
            parents = [] if request.parent is None else [scored(request.parent)]
            inspirations = [scored(m) for m in request.inspirations]
            if self.extra and parents:
                inspirations.append(self.extra[self._next_extra % len(self.extra)])
                self._next_extra += 1
            found = await self.proposer.propose(self.task, parents, inspirations, request.n * self.oversample)
        except Exception as exc:  # noqa: BLE001 - a proposer's failure is reported, never fatal to the loop
            return Proposal(request, (), f"{exc.__class__.__name__}: {exc}")
        return Proposal(request, tuple(found))

    def close(self) -> None:
        """Cancel unfinished proposals and stop the loop."""
        if self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing must not fail
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    async def _cancel_all(self) -> None:
        others = [t for t in asyncio.all_tasks(self._loop) if t is not asyncio.current_task()]
        for t in others:
            t.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        aclose = getattr(self.proposer, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:  # noqa: BLE001 - closing must not fail
                pass
