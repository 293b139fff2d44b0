"""The coder: writes a first kernel from the reference, refines a parent along the judge's plan, or crosses a parent
with inspirations from other elites. Each method returns a `Candidate`, or None when the reply held no usable code
(the call is reported either way, see `agents.agent`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.agent import Agent, AgentCall, failed_outcome
from agents.judge import Plan
from agents.cpu_facts import CpuFacts
from agents.prompting import DeviceFacts, render, template_for
from agents.proposal import Scored
from agents.replies import extract_code
from evaluator.candidate import Candidate
from evaluator.task import Task

UNMEASURED: dict[str, Any] = {"status": "not measured yet", "reason": "the evaluator has not finished with it", "speedup": None,
              "candidate_ms": None, "reference_ms": None, "max_abs_error": None, "profile": {}}


GPU_BACKENDS = ("triton", "cuda")
TRANSLATE_ROLE = "coder:translate"  # the role of translation requests in the store's LLM calls


@dataclass(frozen=True, slots=True)
class Translation:
    """A correct kernel of the same task written for another backend (a GPU kernel for a CPU run, or the reverse),
    which the coder may start from instead of writing from scratch."""

    source: str
    digest: str
    backend: str                 # the backend it was written for: triton | cuda | cpp
    speedup: float | None = None
    device: str | None = None    # the device it was measured on
    candidate_id: int | None = None


class LLMCoder:
    """Writes kernels for one backend: `triton` and `cuda` with the GPU prompts and `DeviceFacts`, `cpp` (native CPU
    kernels through `load_c`) with the native prompts and `CpuFacts`."""

    def __init__(self, agent: Agent, device: DeviceFacts | CpuFacts, backend: str = "triton") -> None:
        self.agent, self.device, self.backend = agent, device, backend

    @property
    def model(self) -> str:
        return self.agent.model

    def _common(self, task: Task) -> dict[str, Any]:
        return {"task_name": task.name, "task_source": task.source, "backend": self.backend, "device": self.device}

    async def generate(self, task: Task) -> Candidate | None:
        prompt = render(template_for("coder_generate", self.backend), **self._common(task))
        return await self._write("coder:generate", prompt, None, (), "generate")

    def can_translate(self, source: Translation) -> bool:
        """GPU kernels translate to native CPU ones and the reverse; Triton and CUDA are not translated here."""
        return (source.backend in GPU_BACKENDS) == (self.backend == "cpp")

    async def translate(self, task: Task, source: Translation) -> Candidate | None:
        """A first kernel for this backend, translated from a correct kernel of another backend. The lineage records
        it: the source kernel is the child's parent and the note says from which backend and candidate."""
        if not self.can_translate(source):
            raise ValueError(f"cannot translate a {source.backend} kernel into a {self.backend} kernel")
        prompt = render(template_for("coder_translate", self.backend), **self._common(task),
                        source_kernel=source.source, source_backend=source.backend, source_speedup=source.speedup,
                        source_device=source.device)
        where = f" (candidate #{source.candidate_id})" if source.candidate_id is not None else ""
        return await self._write(TRANSLATE_ROLE, prompt, None, (source.digest,),
                                 f"translate {source.backend} -> {self.backend}{where}")

    async def refine(self, task: Task, parent: Scored, plan: Plan | None) -> Candidate | None:
        prompt = render(template_for("coder_refine", self.backend), **self._common(task),
                        parent_source=parent.source,
                        evaluation=parent.result if parent.result is not None else UNMEASURED,
                        plan=plan.text if plan else "")
        note = f"refine ({plan.kind}: {plan.headline})" if plan else "refine"
        return await self._write("coder:refine", prompt, parent.source, (parent.digest,), note)

    async def crossover(self, task: Task, parent: Scored, inspirations: Sequence[Scored]) -> Candidate | None:
        prompt = render(template_for("coder_crossover", self.backend), **self._common(task),
                        parent_source=parent.source,
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
