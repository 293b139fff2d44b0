"""One model behind one role family (the coder, the judge): a call made, its cost counted, its outcome reported.

Every call ends in exactly one `AgentCall` handed to `on_call` (the run records it in the store): the prompt, the
reply, tokens, cost, and an outcome — `ok`, or why nothing usable came back (`empty`, `truncated`, `no_code`,
`no_json`, `error` for a request that failed after its retries). Nothing here raises for a model's behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents.llm_client import Completion, LLMClient, LLMError
from agents.prompting import messages
from agents.spend import Spend

SYSTEM = ("You are an expert GPU kernel engineer. You write correct, fast Triton and CUDA kernels for PyTorch "
          "operators, and you follow the evaluator's rules exactly.")


@dataclass(frozen=True, slots=True)
class AgentCall:
    role: str                       # coder:generate | coder:refine | coder:crossover | judge:repair | ...
    model: str
    prompt: str
    completion: Completion | None   # None when the request failed
    candidate_digest: str | None    # the candidate produced (coder) or judged (judge)
    outcome: str                    # ok | empty | truncated | no_code | no_json | error
    problem: str = ""               # one sentence when outcome is not ok

    @property
    def reply(self) -> str:
        return "" if self.completion is None else self.completion.text


def failed_outcome(completion: Completion, what: str) -> str:
    """Why a reply gave nothing usable: empty, cut off at max_tokens, or without the `what` asked for."""
    if not completion.text.strip():
        return "empty"
    return "truncated" if completion.finish_reason == "length" else what


class Agent:
    def __init__(self, client: LLMClient, model: str, *, temperature: float, max_tokens: int,
                 spend: Spend | None = None, on_call: Callable[[AgentCall], None] | None = None) -> None:
        self.client, self.model = client, model
        self.temperature, self.max_tokens = temperature, max_tokens
        self.spend, self.on_call = spend, on_call
        self.failures_in_a_row = 0            # requests that failed (retries spent) since the last that succeeded
        self.last_failure: str | None = None  # the last one's sentence (it names the model and the endpoint)

    def out_of_budget(self) -> bool:
        return self.spend is not None and self.spend.exhausted() is not None

    async def call(self, role: str, prompt: str) -> Completion | None:
        """The completion, or None (the failure already reported) when the request failed or the budget is spent."""
        if self.out_of_budget():
            return None
        try:
            completion = await self.client.complete(messages(SYSTEM, prompt), temperature=self.temperature,
                                                    max_tokens=self.max_tokens)
        except LLMError as exc:
            self.failures_in_a_row, self.last_failure = self.failures_in_a_row + 1, str(exc)
            self.report(AgentCall(role, self.model, prompt, None, None, "error", str(exc)))
            return None
        self.failures_in_a_row = 0
        if self.spend is not None:
            self.spend.add(completion.cost_usd, completion.tokens_in, completion.tokens_out)
        return completion

    def report(self, call: AgentCall) -> None:
        if self.on_call is not None:
            self.on_call(call)
