"""The LLM coder as a proposer: prompts from `prompts/`, a reply parsed into a candidate, every call reported.

`propose(task, parents, inspirations, n)` asks the model for n kernels: a first kernel from the reference when there
is no parent, a crossover of the parent with inspirations from other elites otherwise. A reply that holds no usable
code is reported (through `on_call`) and skipped, never an exception. The judge's loop (repair, optimise, review)
plugs into the same seam next; see issue 4.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable

from agents.llm_client import Completion, LLMClient, LLMError
from agents.prompting import DeviceFacts, messages, render
from agents.replies import extract_code
from evaluator.candidate import Candidate
from evaluator.task import Task

SYSTEM = ("You are an expert GPU kernel engineer. You write correct, fast Triton and CUDA kernels for PyTorch "
          "operators, and you follow the evaluator's rules exactly.")


@dataclass(frozen=True, slots=True)
class CoderCall:
    """One model call and what came of it, for the store's record of LLM calls."""

    role: str
    prompt: str
    completion: Completion | None
    candidate: Candidate | None
    problem: str  # empty when a candidate came back


class LLMCoder:
    def __init__(self, client: LLMClient, model: str, device: DeviceFacts, backend: str = "triton",
                 temperature: float = 0.7, max_tokens: int = 8192,
                 on_call: Callable[[CoderCall], None] | None = None):
        self.client, self.model, self.device, self.backend = client, model, device, backend
        self.temperature, self.max_tokens, self.on_call = temperature, max_tokens, on_call

    async def propose(self, task: Task, parents: list[Candidate], inspirations: list[Candidate],
                      n: int) -> list[Candidate]:
        results = await asyncio.gather(*(self._one(task, parents, inspirations) for _ in range(n)))
        seen: set[str] = {p.digest for p in parents}
        out = []
        for cand in results:
            if cand is not None and cand.digest not in seen:
                seen.add(cand.digest)
                out.append(cand)
        return out

    def _prompt(self, task: Task, parents: list[Candidate], inspirations: list[Candidate]) -> str:
        common: dict[str, Any] = {"task_name": task.name, "task_source": task.source, "backend": self.backend,
                                  "device": self.device}
        if parents and inspirations:
            return render("coder_crossover", **common, parent_source=parents[0].source, parent_speedup=None,
                          inspirations=[{"source": c.source, "speedup": None} for c in inspirations])
        return render("coder_generate", **common)

    async def _one(self, task: Task, parents: list[Candidate], inspirations: list[Candidate]) -> Candidate | None:
        prompt = self._prompt(task, parents, inspirations)
        try:
            completion = await self.client.complete(messages(SYSTEM, prompt), temperature=self.temperature,
                                                    max_tokens=self.max_tokens)
        except LLMError as exc:
            self._report(CoderCall("coder", prompt, None, None, str(exc)))
            return None
        reply = extract_code(completion.text, parents[0].source if parents else None)
        if reply.source is None:
            problem = reply.problem if completion.finish_reason != "length" else f"{reply.problem} (reply truncated)"
            self._report(CoderCall("coder", prompt, completion, None, problem))
            return None
        candidate = Candidate.from_source(reply.source, origin=f"llm:{self.model}",
                                          parents=tuple(p.digest for p in parents[:1] + inspirations),
                                          note="crossover" if parents and inspirations else "generate")
        self._report(CoderCall("coder", prompt, completion, candidate, ""))
        return candidate

    def _report(self, call: CoderCall) -> None:
        if self.on_call is not None:
            self.on_call(call)
