"""The LLM coder end to end: the real openai client over HTTP to a scripted server, then the real evaluator."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents.llm_client import OpenAIClient
from agents.llm_coder import CoderCall, LLMCoder
from agents.prompting import DeviceFacts
from evaluator import EvalConfig, Status, evaluate, load_candidate, load_task
from fake_llm_server import FakeLLMServer, fault, reply

TINY = Path(__file__).resolve().parent.parent / "benchmarks" / "tiny"


def _coder(server: FakeLLMServer, calls: list[CoderCall]) -> LLMCoder:
    client = OpenAIClient(base_url=server.base_url, model="fake-coder", max_retries=2, timeout_s=10)
    return LLMCoder(client, "fake-coder", DeviceFacts(name="CPU (Triton interpreter)"), on_call=calls.append)


def test_generated_kernel_goes_from_model_reply_to_an_ok_verdict():
    task = load_task(TINY / "relu.py")
    kernel = (TINY / "relu.seed.py").read_text()
    calls: list[CoderCall] = []
    with FakeLLMServer([fault(503), reply(f"Here is the kernel:\n```python\n{kernel}```\nDone.")]) as server:
        found = asyncio.run(_coder(server, calls).propose(task, [], [], 1))
        sent = server.requests[-1]
    assert len(found) == 1 and found[0].origin == "llm:fake-coder"
    assert sent["model"] == "fake-coder" and "torch.relu" in sent["messages"][-1]["content"]
    assert calls[0].completion is not None and calls[0].completion.attempts == 2 and calls[0].problem == ""
    result = evaluate(task, found[0], EvalConfig(device="cpu", max_timing_s=0.3, profile=False))
    assert result.status == Status.OK, result.reason


def test_reply_without_code_is_reported_not_raised_and_duplicates_of_the_parent_are_dropped():
    task = load_task(TINY / "relu.py")
    parent = load_candidate(TINY / "relu.seed.py")
    calls: list[CoderCall] = []
    script = [reply("I cannot help with that."), reply(f"```python\n{parent.source}```")]
    with FakeLLMServer(script) as server:
        found = asyncio.run(_coder(server, calls).propose(task, [parent], [], 2))
    assert found == []
    assert sorted(c.problem for c in calls)[-1] == "the reply holds no code block"
