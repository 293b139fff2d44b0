"""The LLM client through the real `openai` SDK over real HTTP against a local fake server: replies, faults, retries."""

from __future__ import annotations

import asyncio

import pytest
from fake_llm_server import FakeLLMServer, Rule, drop, empty, fault, hang, malformed, reply, truncated

import agents.llm_client as llm_client
from agents.llm_client import Completion, LLMError, OpenAIClient

MESSAGES = [{"role": "system", "content": "You write Triton kernels."}, {"role": "user", "content": "softmax"}]


@pytest.fixture
def delays(monkeypatch) -> list[float]:
    """The backoff delays the client planned; it does not actually wait them out."""
    planned: list[float] = []
    real_sleep = asyncio.sleep

    async def record(seconds: float) -> None:
        planned.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(llm_client, "_backoff_sleep", record)
    return planned


def ask(server: FakeLLMServer, n: int = 1, **client_kw) -> list[Completion]:
    async def go() -> list[Completion]:
        client = OpenAIClient(server.base_url, client_kw.pop("model", "gpt-4o-mini"), **client_kw)
        try:
            return list(await asyncio.gather(*(
                client.complete(MESSAGES, temperature=0.3, max_tokens=256) for _ in range(n)
            )))
        finally:
            await client.close()

    return asyncio.run(go())


def test_normal_reply_has_text_tokens_cost_and_sends_the_request(delays):
    with FakeLLMServer([reply("def kernel(): pass", prompt_tokens=1000, completion_tokens=500)]) as server:
        [c] = ask(server)
    assert c.text == "def kernel(): pass"
    assert (c.tokens_in, c.tokens_out, c.finish_reason, c.attempts) == (1000, 500, "stop", 1)
    assert c.model == "gpt-4o-mini"
    assert c.cost_usd == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    assert c.latency_s > 0
    [body] = server.requests
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == MESSAGES
    assert body["temperature"] == 0.3 and body["max_tokens"] == 256
    assert delays == []


def test_unknown_model_costs_nothing_and_prices_are_overridable(delays):
    with FakeLLMServer() as server:
        [unknown] = ask(server, model="my-local-model")
        [custom] = ask(server, model="my-local-model", prices={"my-local-model": (1.0, 2.0)})
    assert unknown.cost_usd == 0.0
    assert not OpenAIClient("http://127.0.0.1:1/v1", "my-local-model").priced
    assert custom.cost_usd == pytest.approx((11 * 1.0 + 7 * 2.0) / 1e6)


def test_rate_limit_is_retried_honouring_retry_after(delays):
    with FakeLLMServer([fault(429, retry_after="0.05"), reply("ok")]) as server:
        [c] = ask(server)
    assert (c.text, c.attempts) == ("ok", 2)
    assert delays == [pytest.approx(0.05)]
    assert len(server.requests) == 2


def test_retry_after_is_capped(delays):
    with FakeLLMServer([fault(429, retry_after="3600"), reply()]) as server:
        [c] = ask(server, backoff_max_s=2.0)
    assert c.attempts == 2 and delays == [2.0]


def test_service_unavailable_twice_then_success(delays):
    with FakeLLMServer([fault(503), fault(500), reply("third time")]) as server:
        [c] = ask(server, backoff_base_s=0.01)
    assert (c.text, c.attempts) == ("third time", 3)
    assert len(delays) == 2 and all(0 < d <= 0.02 for d in delays)  # jittered exponential backoff


def test_timeout_then_success(delays):
    with FakeLLMServer([hang(5.0), reply("late but fine")]) as server:
        [c] = ask(server, timeout_s=0.3)
    assert (c.text, c.attempts) == ("late but fine", 2)


def test_dropped_connection_then_success(delays):
    with FakeLLMServer([drop(), reply("reconnected")]) as server:
        [c] = ask(server)
    assert (c.text, c.attempts) == ("reconnected", 2)


def test_malformed_body_is_retried(delays):
    with FakeLLMServer([malformed(), reply("whole")]) as server:
        [c] = ask(server)
    assert (c.text, c.attempts) == ("whole", 2)


def test_malformed_bodies_until_the_retries_run_out_raise_one_sentence(delays):
    with FakeLLMServer(default=malformed()) as server, pytest.raises(LLMError, match="malformed response"):
        ask(server, max_retries=1)


def test_rules_answer_by_prompt_pattern_and_repeat_their_last_step(delays):
    rules = [Rule("softmax", [reply("first"), reply("again")])]
    with FakeLLMServer([reply("from the script")], rules=rules) as server:
        texts = [c.text for c in ask(server, n=1)] + [c.text for c in ask(server, n=2)]
    assert texts == ["first", "again", "again"] and rules[0].hits == 3


def test_exhausted_retries_raise_one_sentence_naming_the_status(delays):
    with FakeLLMServer(default=fault(503)) as server:
        with pytest.raises(LLMError, match=r"after 3 attempts; the last was HTTP 503\.$"):
            ask(server, max_retries=2)
    assert len(server.requests) == 3


def test_non_retryable_status_fails_at_once(delays):
    with FakeLLMServer([fault(401)]) as server:
        with pytest.raises(LLMError, match="HTTP 401"):
            ask(server)
    assert len(server.requests) == 1 and delays == []


def test_empty_reply_is_a_completion(delays):
    with FakeLLMServer([empty()]) as server:
        [c] = ask(server)
    assert (c.text, c.finish_reason, c.attempts) == ("", "stop", 1)


def test_truncated_reply_is_a_completion(delays):
    with FakeLLMServer([truncated("def kernel(x):")]) as server:
        [c] = ask(server)
    assert (c.text, c.finish_reason, c.tokens_out) == ("def kernel(x):", "length", 64)


def test_concurrency_is_bounded_by_max_in_flight(delays):
    with FakeLLMServer(default=reply(delay_s=0.1)) as server:
        out = ask(server, n=10, max_in_flight=3)
    assert len(out) == 10 and all(c.attempts == 1 for c in out)
    assert len(server.requests) == 10
    assert 1 <= server.max_concurrent <= 3


def test_no_key_and_no_base_url_is_a_readable_error(monkeypatch):
    monkeypatch.delenv("OPFORGE_LLM_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(LLMError) as info:
        OpenAIClient(None, "gpt-4o")
    assert str(info.value) == "No LLM configured: set --llm-base-url or OPFORGE_LLM_API_KEY / OPENAI_API_KEY."


def test_key_comes_from_argument_then_opforge_env_then_openai_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-openai")
    assert OpenAIClient(None, "gpt-4o")._sdk.api_key == "from-openai"
    monkeypatch.setenv("OPFORGE_LLM_API_KEY", "from-opforge")
    assert OpenAIClient(None, "gpt-4o")._sdk.api_key == "from-opforge"
    assert OpenAIClient(None, "gpt-4o", api_key="explicit")._sdk.api_key == "explicit"
