"""The coder: writes a first kernel from the reference, refines a parent along the judge's plan, or crosses a parent
with inspirations from other elites. Each method returns a `Candidate`, or None when the reply held no usable code
(the call is reported either way, see `agents.agent`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.agent import Agent, AgentCall, failed_outcome
from agents.judge import Plan
from agents.prompting import DeviceFacts, render
from agents.proposal import Scored
from agents.replies import extract_code
from evaluator.candidate import Candidate
from evaluator.task import Task

UNMEASURED: dict[str, Any] = {"status": "not measured yet", "reason": "the evaluator has not finished with it", "speedup": None,
              "candidate_ms": None, "reference_ms": None, "max_abs_error": None, "profile": {}}


class LLMCoder:
    def __init__(self, agent: Agent, device: DeviceFacts, backend: str = "triton") -> None:
        self.agent, self.device, self.backend = agent, device, backend

    @property
    def model(self) -> str:
        return self.agent.model

    def _common(self, task: Task) -> dict[str, Any]:
        return {"task_name": task.name, "task_source": task.source, "backend": self.backend, "device": self.device}

    async def generate(self, task: Task) -> Candidate | None:
        prompt = render("coder_generate", **self._common(task))
        return await self._write("coder:generate", prompt, None, (), "generate")

    async def refine(self, task: Task, parent: Scored, plan: Plan | None) -> Candidate | None:
        prompt = render("coder_refine", **self._common(task), parent_source=parent.source,
                        evaluation=parent.result if parent.result is not None else UNMEASURED,
                        plan=plan.text if plan else "")
        note = f"refine ({plan.kind}: {plan.headline})" if plan else "refine"
        return await self._write("coder:refine", prompt, parent.source, (parent.digest,), note)

    async def crossover(self, task: Task, parent: Scored, inspirations: Sequence[Scored]) -> Candidate | None:
        prompt = render("coder_crossover", **self._common(task), parent_source=parent.source,
                        parent_speedup=parent.speedup,
                        inspirations=[{"source": s.source, "speedup": s.speedup, "task": s.task_name}
                                      for s in inspirations])
        parents = (parent.digest, *(s.digest for s in inspirations))
        return await self._write("coder:crossover", prompt, parent.source, parents,
                                 f"crossover with {len(inspirations)}")

    async def _write(self, role: str, prompt: str, parent_source: str | None, parents: tuple[str, ...],
                     note: str) -> Candidate | None:
        completion = await self.agent.call(role, prompt)
        if completion is None:
            return None
        reply = extract_code(completion.text, parent_source)
        if reply.source is None:
            self.agent.report(AgentCall(role, self.model, prompt, completion, None,
                                        failed_outcome(completion, "no_code"), reply.problem))
            return None
        candidate = Candidate.from_source(reply.source, origin=f"llm:{self.model}", parents=parents, note=note)
        self.agent.report(AgentCall(role, self.model, prompt, completion, candidate.digest, "ok"))
        return candidate
