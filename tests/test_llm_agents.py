"""The judge and the LLM proposer over the real openai client and a scripted local server (no evaluator here):
which prompts go out for which parent, what comes back, and that every call is reported with its outcome."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Rule, empty, fault, malformed, reply, truncated

from agents.agent import Agent, AgentCall
from agents.judge import Judge
from agents.llm_client import OpenAIClient
from agents.llm_coder import LLMCoder
from agents.llm_proposer import LLMProposer, LoopSettings
from agents.prompting import DeviceFacts
from agents.proposal import Scored
from agents.spend import Spend, SpendLimits
from evaluator import EvalResult, Status, Timing, load_candidate, load_task

TINY = Path(__file__).resolve().parent.parent / "benchmarks" / "tiny"
TASK = load_task(TINY / "relu.py")
SEED = load_candidate(TINY / "relu.seed.py", origin="seed")
LAUNCH = "relu_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)"
CHILD = SEED.source.replace(LAUNCH, LAUNCH.replace("1024", "256"))
OTHER = SEED.source.replace(LAUNCH, LAUNCH.replace("num_warps=4", "num_warps=2"))
DEVICE = DeviceFacts(name="NVIDIA H100 80GB HBM3", sm_count=132, memory_bandwidth_gbps=3350, peak_tflops=989)

REVIEW = "You are screening a new GPU kernel"
OPTIMISE = "You are a GPU performance engineer"
REPAIR = "failed evaluation"
REFINE = "You are improving a GPU kernel"
CROSS = "You are combining"
GENERATE = "You are writing a fast GPU kernel"

PASSED = EvalResult(Status.OK, "correct on every trial", candidate_ms=Timing(0.5, 0.01, 50),
                    reference_ms=Timing(1.0, 0.02, 50), profile={"dram__throughput.avg.pct_of_peak": 91.5})
FAILED = EvalResult(Status.INCORRECT, "output 0 differs from the reference", max_abs_error=0.75,
                    log="Traceback ...\nmismatch at index 17")


def code(source: str) -> str:
    return f"```python\n{source}```"


def as_json(**fields: object) -> str:
    return json.dumps(fields)


def proposer(server: FakeLLMServer, calls: list[AgentCall], spend: Spend | None = None, judge: bool = True,
             **settings: object) -> LLMProposer:
    spend = spend or Spend()

    def agent(model: str) -> Agent:
        client = OpenAIClient(base_url=server.base_url, model=model, max_retries=2, timeout_s=10,
                              prices={"coder": (1.0, 2.0), "judge": (0.5, 0.5)}, backoff_base_s=0.01)
        return Agent(client, model, temperature=0.5, max_tokens=2048, spend=spend, on_call=calls.append)

    return LLMProposer(LLMCoder(agent("coder"), DEVICE), Judge(agent("judge"), DEVICE) if judge else None, spend,
                       LoopSettings(**settings), seed=1)


def run(p: LLMProposer, parents: list[Scored], inspirations: list[Scored] = (), n: int = 1):
    async def go():
        try:
            return await p.propose(TASK, parents, list(inspirations), n)
        finally:
            await p.aclose()
    return asyncio.run(go())


def prompts(server: FakeLLMServer, pattern: str) -> list[str]:
    return [r["messages"][-1]["content"] for r in server.requests if pattern in r["messages"][-1]["content"]]


def test_failed_parent_is_repaired_along_the_judge_plan_and_the_child_reviewed():
    rules = [Rule(REVIEW, [reply(as_json(verdict="clean", concerns=[]))]),
             Rule(REPAIR, [reply(as_json(problem="clamps at 1.0", fix="clamp at 0.0 instead"))]),
             Rule(REFINE, [reply(code(CHILD))])]
    calls: list[AgentCall] = []
    with FakeLLMServer(rules=rules) as server:
        [child] = run(proposer(server, calls, tune_per_request=3), [Scored(SEED, FAILED)])
        [repair], [refine] = prompts(server, REPAIR), prompts(server, REFINE)
    assert "incorrect" in repair and "mismatch at index 17" in repair and "0.75" in repair
    assert "Fix: clamp at 0.0 instead" in refine and "Problem: clamps at 1.0" in refine
    assert child.source == CHILD and child.parents == (SEED.digest,) and child.origin == "llm:coder"
    assert child.note == "refine (repair: clamp at 0.0 instead); review: clean"
    assert [(c.role, c.outcome) for c in calls] == [("judge:repair", "ok"), ("coder:refine", "ok"),
                                                   ("judge:review", "ok")]
    assert calls[0].candidate_digest == SEED.digest and calls[2].candidate_digest == child.digest
    # A failed parent gets no tuner sweep: its parameters are not worth an evaluation.
    assert all(c.origin != "tune" for c in [child])


def test_correct_parent_is_optimised_from_its_profile_and_swept_by_the_tuner():
    rules = [Rule(REVIEW, [reply(as_json(verdict="suspicious", concerns=["caches the output"]))]),
             Rule(OPTIMISE, [reply(as_json(bottleneck="DRAM at 91% of peak", method="fuse", plan="fewer passes"))]),
             Rule(REFINE, [reply(code(CHILD))])]
    calls: list[AgentCall] = []
    with FakeLLMServer(rules=rules) as server:
        out = run(proposer(server, calls, tune_per_request=2), [Scored(SEED, PASSED)])
        [optimise] = prompts(server, OPTIMISE)
    assert "dram__throughput.avg.pct_of_peak" in optimise and "91.5" in optimise and "2.00x" in optimise
    assert "3350 GB/s" in optimise and "NVIDIA H100" in optimise
    llm, tuned = out[0], out[1:]
    assert llm.note == "refine (optimise: fuse); review: suspicious (caches the output)"
    assert len(tuned) == 2 and all(c.origin == "tune" and c.parents == (SEED.digest,) for c in tuned)
    assert SEED.digest not in {c.digest for c in out}


def test_pending_parent_gets_no_call_and_no_parent_asks_for_first_kernels():
    calls: list[AgentCall] = []
    with FakeLLMServer(rules=[Rule(GENERATE, [reply(code(CHILD)), reply(code(OTHER))])]) as server:
        assert run(proposer(server, calls), [Scored(SEED, None)]) == []
        assert server.requests == []
        first = run(proposer(server, calls, review=False), [], n=2)
    assert {c.source for c in first} == {CHILD, OTHER} and all(c.note == "generate" for c in first)
    assert [c.role for c in calls] == ["coder:generate", "coder:generate"]


def test_crossover_uses_the_inspirations_and_skips_the_judge():
    calls: list[AgentCall] = []
    with FakeLLMServer(rules=[Rule(CROSS, [reply(code(CHILD))])]) as server:
        [child] = run(proposer(server, calls, crossover_rate=1.0, review=False, tune_per_request=0),
                      [Scored(SEED, PASSED)], [Scored(load_candidate(TINY / "gelu_tanh.seed.py"), PASSED)])
        [cross] = prompts(server, CROSS)
    assert "Inspiration 1 of 1 (speedup 2.00x)" in cross and "gelu" in cross.lower()
    assert len(child.parents) == 2 and [c.role for c in calls] == ["coder:crossover"]


@pytest.mark.parametrize("step, outcome", [(empty(), "empty"), (truncated(), "truncated"),
                                           (reply("Sorry, no kernel today."), "no_code")])
def test_a_reply_without_usable_code_is_recorded_with_its_outcome(step, outcome):
    calls: list[AgentCall] = []
    with FakeLLMServer(rules=[Rule(GENERATE, [step])]) as server:
        assert run(proposer(server, calls), []) == []
    [call] = calls
    assert (call.role, call.outcome, call.candidate_digest) == ("coder:generate", outcome, None)
    assert call.completion is not None and call.problem


def test_faults_are_retried_and_a_request_that_keeps_failing_is_recorded_as_an_error():
    calls: list[AgentCall] = []
    rules = [Rule(REPAIR, [fault(429, retry_after="0.01"), malformed(), reply(as_json(problem="p", fix="f"))]),
             Rule(REFINE, [fault(500)])]
    with FakeLLMServer(rules=rules) as server:
        assert run(proposer(server, calls, review=False), [Scored(SEED, FAILED)]) == []
    judge, coder = calls
    assert (judge.role, judge.outcome, judge.completion.attempts) == ("judge:repair", "ok", 3)
    assert (coder.role, coder.outcome, coder.completion) == ("coder:refine", "error", None)
    assert "HTTP 500" in coder.problem and "3 attempts" in coder.problem


def test_judge_reply_without_json_leaves_the_coder_to_choose():
    calls: list[AgentCall] = []
    rules = [Rule(REPAIR, [reply("It is broken, sorry.")]), Rule(REFINE, [reply(code(CHILD))])]
    with FakeLLMServer(rules=rules) as server:
        [child] = run(proposer(server, calls, review=False), [Scored(SEED, FAILED)])
        [refine] = prompts(server, REFINE)
    assert "(none; choose the most promising change yourself)" in refine and child.note == "refine"
    assert (calls[0].outcome, calls[0].problem) == ("no_json", "the reply holds no JSON object with problem, fix")


def test_spend_is_counted_per_call_and_a_spent_budget_stops_all_calls():
    spend = Spend(SpendLimits(max_usd=0.0025))
    calls: list[AgentCall] = []
    rules = [Rule(GENERATE, [reply(code(CHILD), prompt_tokens=1000, completion_tokens=500)])]
    with FakeLLMServer(rules=rules) as server:
        run(proposer(server, calls, spend=spend, review=False), [], n=1)
        assert spend.usd == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6) and spend.tokens == 1500
        assert spend.exhausted() is None
        run(proposer(server, calls, spend=spend, review=False), [], n=1)
        assert spend.exhausted() is not None and "$0.0025" in spend.exhausted()
        sent = len(server.requests)
        assert run(proposer(server, calls, spend=spend), [Scored(SEED, FAILED)]) == []
        assert len(server.requests) == sent == 2


def test_a_diagnosis_serves_plan_reuse_requests_before_the_judge_is_asked_again():
    calls: list[AgentCall] = []
    rules = [Rule(REPAIR, [reply(as_json(problem="p", fix="f"))]),
             Rule(REFINE, [reply(code(CHILD)), reply(code(OTHER)), reply(code(CHILD.replace("256", "128")))])]
    with FakeLLMServer(rules=rules) as server:
        p = proposer(server, calls, review=False, tune_per_request=0, plan_reuse=2)

        async def three():
            try:
                return [await p.propose(TASK, [Scored(SEED, FAILED)], [], 1) for _ in range(3)]
            finally:
                await p.aclose()
        asyncio.run(three())
    assert [c.role for c in calls].count("judge:repair") == 2
