"""The LLM coder end to end: the real openai client over HTTP to a scripted server, then the real evaluator."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fake_llm_server import FakeLLMServer, fault, reply

from agents.agent import Agent, AgentCall
from agents.llm_client import OpenAIClient
from agents.llm_coder import LLMCoder
from agents.prompting import DeviceFacts
from agents.proposal import Scored
from evaluator import EvalConfig, Status, load_candidate, load_task
from evaluator import evaluate

TINY = Path(__file__).resolve().parent.parent / "benchmarks" / "tiny"


def _coder(server: FakeLLMServer, calls: list[AgentCall]) -> LLMCoder:
    client = OpenAIClient(base_url=server.base_url, model="fake-coder", max_retries=2, timeout_s=10)
    agent = Agent(client, "fake-coder", temperature=0.7, max_tokens=4096, on_call=calls.append)
    return LLMCoder(agent, DeviceFacts(name="CPU (Triton interpreter)"))


def test_generated_kernel_goes_from_model_reply_to_an_ok_verdict():
    task = load_task(TINY / "relu.py")
    kernel = (TINY / "relu.seed.py").read_text()
    calls: list[AgentCall] = []
    with FakeLLMServer([fault(503), reply(f"Here is the kernel:\n```python\n{kernel}```\nDone.")]) as server:
        found = asyncio.run(_coder(server, calls).generate(task))
        sent = server.requests[-1]
    assert found is not None and found.origin == "llm:fake-coder" and found.note == "generate"
    assert sent["model"] == "fake-coder" and "torch.relu" in sent["messages"][-1]["content"]
    [call] = calls
    assert call.completion is not None and call.completion.attempts == 2
    assert (call.role, call.outcome, call.candidate_digest) == ("coder:generate", "ok", found.digest)
    result = evaluate(task, found, EvalConfig(device="cpu", max_timing_s=0.3, profile=False))
    assert result.status == Status.OK, result.reason


def test_reply_without_code_is_reported_not_raised():
    task = load_task(TINY / "relu.py")
    parent = Scored(load_candidate(TINY / "relu.seed.py"))
    calls: list[AgentCall] = []
    with FakeLLMServer([reply("I cannot help with that.")]) as server:
        found = asyncio.run(_coder(server, calls).refine(task, parent, None))
    assert found is None
    [call] = calls
    assert (call.role, call.outcome, call.problem) == ("coder:refine", "no_code", "the reply holds no code block")
    assert call.reply == "I cannot help with that." and call.candidate_digest is None


def test_edit_of_the_parent_becomes_the_child_with_the_parent_as_its_lineage():
    task = load_task(TINY / "relu.py")
    parent = Scored(load_candidate(TINY / "relu.seed.py"))
    line = "        relu_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)"
    assert parent.source.count(line) == 1
    edit = f"```python\n<<<<<<< SEARCH\n{line}\n=======\n{line.replace('1024', '256')}\n>>>>>>> REPLACE\n```"
    calls: list[AgentCall] = []
    with FakeLLMServer([reply(edit)]) as server:
        child = asyncio.run(_coder(server, calls).refine(task, parent, None))
    assert child is not None and child.parents == (parent.digest,)
    assert child.source == parent.source.replace("BLOCK_SIZE=1024", "BLOCK_SIZE=256")
