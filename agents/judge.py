"""The judge: diagnoses a parent before the coder rewrites it, and screens a new candidate before it is evaluated.

- `diagnose(task, parent)`: a failed parent gets judge-repair (the single most critical problem and its fix), a
  correct one judge-optimise (exactly one bottleneck, one method, one plan, from its timings and profiler metrics).
  The answer is a `Plan` for the coder's refine prompt; None when the parent is not measured yet or the reply held
  no usable JSON (the coder then chooses for itself).
- `review(task, candidate)`: judge-review's verdict on fallbacks, caching and timing tricks. It is advice, logged with
  the candidate; the evaluator alone decides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.agent import Agent, AgentCall, failed_outcome
from agents.cpu_facts import CpuFacts
from agents.prompting import DeviceFacts, render, template_for
from agents.proposal import Scored
from agents.replies import extract_json
from evaluator.candidate import Candidate
from evaluator.task import Task

LOG_TAIL_LINES = 40
HEADLINE_CHARS = 60


@dataclass(frozen=True, slots=True)
class Plan:
    kind: str                   # repair | optimise
    fields: Mapping[str, str]   # repair: problem, fix; optimise: bottleneck, method, plan

    @property
    def text(self) -> str:
        """The plan as the coder's refine prompt shows it."""
        return "\n".join(f"{name.capitalize()}: {value}" for name, value in self.fields.items())

    @property
    def headline(self) -> str:
        key = "fix" if self.kind == "repair" else "method"
        words = " ".join(str(self.fields.get(key, "")).split())
        return words if len(words) <= HEADLINE_CHARS else words[: HEADLINE_CHARS - 3].rstrip() + "..."


@dataclass(frozen=True, slots=True)
class Review:
    verdict: str                # clean | suspicious
    concerns: tuple[str, ...]

    @property
    def summary(self) -> str:
        if self.verdict == "clean":
            return "review: clean"
        return f"review: suspicious ({'; '.join(self.concerns) or 'no reason given'})"


_PLAN_FIELDS = {"repair": ("problem", "fix"), "optimise": ("bottleneck", "method", "plan")}


def _fields(data: Mapping[str, Any] | None, names: tuple[str, ...]) -> dict[str, str] | None:
    if data is None or not all(isinstance(data.get(n), str) and data[n].strip() for n in names):
        return None
    return {n: data[n].strip() for n in names}


RooflineMs = Callable[[Task], "float | None"]


class Judge:
    """Judges kernels of one backend (the run's): `cpp` gets the native prompts, which show the CPU's facts, the
    torch.compile time, the fraction of the roofline bound (`roofline_ms(task)`, where known) and `perf` counters."""

    def __init__(self, agent: Agent, device: DeviceFacts | CpuFacts, backend: str = "triton",
                 roofline_ms: RooflineMs | None = None) -> None:
        self.agent, self.device, self.backend = agent, device, backend
        self.roofline_ms = roofline_ms

    @property
    def model(self) -> str:
        return self.agent.model

    async def diagnose(self, task: Task, parent: Scored) -> Plan | None:
        result = parent.result
        if result is None:
            return None
        if parent.correct:
            kind = "optimise"
            native = {}
            if self.backend == "cpp":
                native = {"compiled_ms": result.compiled_reference_ms,
                          "roofline_fraction": self._roofline_fraction(task, result.candidate_ms)}
            prompt = render(template_for("judge_optimise", self.backend), task_source=task.source,
                            candidate_source=parent.source, device=self.device, candidate_ms=result.candidate_ms,
                            reference_ms=result.reference_ms, speedup=result.speedup,
                            profile=dict(result.profile or {}), **native)
        else:
            kind = "repair"
            log_tail = "\n".join(result.log.splitlines()[-LOG_TAIL_LINES:])
            prompt = render(template_for("judge_repair", self.backend), task_source=task.source,
                            candidate_source=parent.source,
                            status=result.status.value, reason=result.reason, max_abs_error=result.max_abs_error,
                            log_tail=log_tail)
        role = f"judge:{kind}"
        completion = await self.agent.call(role, prompt)
        if completion is None:
            return None
        fields = _fields(extract_json(completion.text), _PLAN_FIELDS[kind])
        if fields is None:
            names = ", ".join(_PLAN_FIELDS[kind])
            self.agent.report(AgentCall(role, self.model, prompt, completion, parent.digest,
                                        failed_outcome(completion, "no_json"),
                                        f"the reply holds no JSON object with {names}"))
            return None
        self.agent.report(AgentCall(role, self.model, prompt, completion, parent.digest, "ok"))
        return Plan(kind, fields)

    def _roofline_fraction(self, task: Task, candidate_ms: Any) -> float | None:
        """The roofline bound's share of the candidate's time, in percent; None where the bound is unknown."""
        if self.roofline_ms is None or candidate_ms is None or candidate_ms.median_ms <= 0:
            return None
        bound_ms = self.roofline_ms(task)
        return None if bound_ms is None else 100.0 * bound_ms / candidate_ms.median_ms

    async def review(self, task: Task, candidate: Candidate) -> Review | None:
        prompt = render(template_for("judge_review", self.backend), task_source=task.source,
                        candidate_source=candidate.source)
        completion = await self.agent.call("judge:review", prompt)
        if completion is None:
            return None
        data = extract_json(completion.text)
        verdict = data.get("verdict") if data else None
        concerns = data.get("concerns", []) if data else []
        if verdict not in ("clean", "suspicious") or not isinstance(concerns, list):
            self.agent.report(AgentCall("judge:review", self.model, prompt, completion, candidate.digest,
                                        failed_outcome(completion, "no_json"),
                                        'the reply holds no JSON verdict "clean" or "suspicious"'))
            return None
        self.agent.report(AgentCall("judge:review", self.model, prompt, completion, candidate.digest, "ok"))
        return Review(verdict, tuple(str(c) for c in concerns))
