"""The LLM agents as one proposer: judge, coder, reviewer and tuner around each request of the search.

For a request with a parent (the search chose it and its inspirations):
1. the judge diagnoses the parent: repair when it failed, optimise when it passed (`Judge.diagnose`); a diagnosis
   serves `plan_reuse` requests on the same parent before the judge is asked again;
2. the coder writes each child: a refine along that plan, or now and then a crossover with the inspirations;
3. the judge reviews each child (advice written into the child's note and the call log; the evaluator decides);
4. the tuner adds a few neighbours of the parent when the parent is correct: a cheap sweep of its parameters between
   LLM calls. Children are only swept once they are proven correct (as parents), so no evaluation is spent on the
   parameters of a kernel that does not compile.
With no parent (a run without a seed kernel) the coder writes first kernels from the reference (coder-generate). When
the run was given translation sources (correct kernels of the same task for the other side, GPU or CPU: see
`opforge.run.translation`), each is translated once, as one child of one of the first requests (coder-translate), its
lineage naming the source kernel as parent. A parent still waiting for its verdict gets nothing: rewriting a kernel blind wastes a call, so the search asks again
once results come in.
When the spend reaches its limits no further call is made and the proposer returns what it has.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Sequence

from agents.judge import Judge, Plan
from agents.llm_client import LLMError
from agents.llm_coder import LLMCoder, Translation
from agents.proposal import Scored
from agents.spend import Spend
from agents.tuner import TuneProposer
from evaluator.candidate import Candidate
from evaluator.task import Task


@dataclasses.dataclass(frozen=True, slots=True)
class LoopSettings:
    crossover_rate: float = 0.25    # share of children written as a crossover when inspirations are given
    review: bool = True             # judge-review every new child before it is evaluated
    tune_per_request: int = 2       # tuner neighbours of a correct parent added to each request
    plan_reuse: int = 2             # requests on one parent that share the judge's diagnosis before it is asked again


ENDPOINT_FAILURES = 3  # the coder's requests failing in a row (each after its retries) before a round is an error


class LLMProposer:
    generates = True  # can write first kernels with no seed

    def __init__(self, coder: LLMCoder, judge: Judge | None, spend: Spend, settings: LoopSettings = LoopSettings(),
                 tuner: TuneProposer | None = None, seed: int | None = None,
                 translations: Sequence[Translation] = ()) -> None:
        self.coder, self.judge, self.spend, self.settings = coder, judge, spend, settings
        self._translations = [t for t in translations if coder.can_translate(t)]  # each used once, in this order
        self.tuner = tuner if tuner is not None else TuneProposer(seed=seed)
        self._rng = random.Random(seed)
        self._plans: dict[str, tuple[Plan | None, int]] = {}  # parent digest -> (diagnosis, requests that used it)

    async def propose(self, task: Task, parents: Sequence[Scored], inspirations: Sequence[Scored],
                      n: int) -> list[Candidate]:
        if n <= 0 or self.spend.exhausted():
            return []
        if parents and parents[0].result is None:
            return []  # nothing to diagnose before the evaluator's verdict: the search asks again after it
        tuned: list[Candidate] = []
        translating = None  # one translation per request until each source has had its turn, beside the others
        if self._translations:
            translating = asyncio.ensure_future(self.coder.translate(task, self._translations.pop(0)))
            n -= 1
        if not parents:
            children = await asyncio.gather(*(self.coder.generate(task) for _ in range(n)))
        elif n <= 0:
            children = []
        else:
            parent = parents[0]
            crossover = [bool(inspirations) and self._rng.random() < self.settings.crossover_rate for _ in range(n)]
            plan = None
            if self.judge is not None and not all(crossover):
                plan = await self._diagnosis(task, parent)
            children = await asyncio.gather(*(
                self.coder.crossover(task, parent, inspirations) if cross else self.coder.refine(task, parent, plan)
                for cross in crossover))
            if parent.correct and self.settings.tune_per_request > 0:
                tuned = self.tuner.sweep([parent.candidate], self.settings.tune_per_request,
                                         {s.digest for s in inspirations})
        translated = [await translating] if translating is not None else []
        if (failing := self.unreachable()) is not None and not any(c is not None for c in [*translated, *children]):
            raise LLMError(failing)  # the search counts failed rounds and stops the run, naming the endpoint
        seen = {p.digest for p in parents}
        fresh: list[Candidate] = []
        for child in [*translated, *children]:
            if child is not None and child.digest not in seen:
                seen.add(child.digest)
                fresh.append(child)
        if self.judge is not None and self.settings.review:
            fresh = list(await asyncio.gather(*(self._reviewed(task, c) for c in fresh)))
        return fresh + [c for c in tuned if c.digest not in seen]

    def unreachable(self) -> str | None:
        """The coder's last failure once `ENDPOINT_FAILURES` of its requests in a row failed after their retries
        (an endpoint that does not answer, a wrong model name or key), else None."""
        agent = self.coder.agent
        return agent.last_failure if agent.failures_in_a_row >= ENDPOINT_FAILURES else None

    async def _diagnosis(self, task: Task, parent: Scored) -> Plan | None:
        """The judge's plan for this parent, asked again after `plan_reuse` requests (or when it gave none)."""
        assert self.judge is not None
        plan, uses = self._plans.get(parent.digest, (None, 0))
        if plan is None or uses >= self.settings.plan_reuse:
            plan, uses = await self.judge.diagnose(task, parent), 0
        self._plans[parent.digest] = (plan, uses + 1)
        return plan

    async def aclose(self) -> None:
        """Close the HTTP clients (each once: coder and judge may share one)."""
        clients = {id(a.client): a.client for a in (self.coder.agent, self.judge.agent if self.judge else None) if a}
        for client in clients.values():
            close = getattr(client, "close", None)
            if close is not None:
                await close()

    async def _reviewed(self, task: Task, child: Candidate) -> Candidate:
        assert self.judge is not None
        review = await self.judge.review(task, child)
        if review is None:
            return child
        return dataclasses.replace(child, note=f"{child.note}; {review.summary}" if child.note else review.summary)
