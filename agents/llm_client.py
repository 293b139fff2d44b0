"""The LLM client: one chat completion in, one `Completion` out, with retries, backoff and bounded concurrency.

`OpenAIClient` speaks the OpenAI chat-completions API (OpenAI itself or any compatible server: vLLM, llama.cpp,
a local proxy). It turns the SDK's own retries off and retries here, so each `Completion` says how many attempts it
took: HTTP 429, 5xx (and 408/409), timeouts, dropped connections and malformed response bodies are retried with exponential backoff and jitter,
honouring the server's Retry-After (capped). Other HTTP errors fail at once. An empty reply or a reply cut off at
`max_tokens` (`finish_reason == "length"`) is a `Completion`, not an exception: the caller records and counts it.
Only running out of attempts, or a non-retryable error, raises `LLMError`.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import openai

from agents.llm_prices import DEFAULT_PRICES_USD_PER_MTOK, Price, cost_usd, price_for

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

NO_KEY_PLACEHOLDER = "not-needed"  # a local server without auth still needs some key for the SDK
RETRYABLE_STATUS = frozenset({408, 409, 429})  # plus every 5xx


@dataclass(frozen=True, slots=True)
class Completion:
    """One answered request. `text` is "" for an empty reply; `finish_reason` is the server's ("stop", "length"...).

    `latency_s` is the wall time of the whole call, backoff included; `attempts` counts HTTP attempts (1 = no retry).
    `cost_usd` is 0.0 where the price table does not know the model (see `OpenAIClient.priced`).
    """

    text: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost_usd: float
    finish_reason: str
    attempts: int


class LLMError(Exception):
    """An LLM call that produced no completion; the message is one readable sentence."""


class LLMClient(Protocol):
    async def complete(
        self, messages: Sequence[Message], *, temperature: float, max_tokens: int
    ) -> Completion: ...


# Patched by tests to observe the planned delays without waiting them out.
_backoff_sleep = asyncio.sleep


class OpenAIClient:
    """An `LLMClient` over `openai.AsyncOpenAI`.

    The key is `api_key`, else $OPFORGE_LLM_API_KEY, else $OPENAI_API_KEY; a `base_url` without any key gets a
    placeholder (local servers need none). `max_retries` is the number of retries after the first attempt.
    `prices` maps model -> (USD per 1M input tokens, USD per 1M output tokens) and replaces the default table.
    Use one client per event loop (the semaphore and the HTTP pool belong to the loop that first uses them).
    """

    def __init__(
        self,
        base_url: str | None,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60,
        max_retries: int = 4,
        max_in_flight: int = 4,
        prices: Mapping[str, Price] | None = None,
        *,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
    ):
        key = api_key or os.environ.get("OPFORGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if not key and not base_url:
            raise LLMError("No LLM configured: set --llm-base-url or OPFORGE_LLM_API_KEY / OPENAI_API_KEY.")
        if max_in_flight < 1 or max_retries < 0:
            raise LLMError(f"max_in_flight must be >= 1 and max_retries >= 0, got {max_in_flight} and {max_retries}.")
        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.prices: Mapping[str, Price] = dict(DEFAULT_PRICES_USD_PER_MTOK if prices is None else prices)
        self._sdk = openai.AsyncOpenAI(
            api_key=key or NO_KEY_PLACEHOLDER, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        self._gate = asyncio.Semaphore(max_in_flight)

    @property
    def priced(self) -> bool:
        """Whether the price table knows this model; if not every `cost_usd` is 0.0."""
        return price_for(self.model, self.prices) is not None

    @property
    def where(self) -> str:
        return self.base_url or "the OpenAI API"

    async def complete(
        self, messages: Sequence[Message], *, temperature: float = 1.0, max_tokens: int = 4096
    ) -> Completion:
        start = time.perf_counter()
        attempts = 0
        while True:
            attempts += 1
            try:
                async with self._gate:
                    response = await self._sdk.chat.completions.create(
                        model=self.model,
                        messages=[dict(m) for m in messages],  # type: ignore[misc] # role/content dicts, as the API takes
                        temperature=temperature,
                        max_tokens=max_tokens,
                    )
                break
            except openai.APIStatusError as e:
                retryable = e.status_code in RETRYABLE_STATUS or e.status_code >= 500
                last = f"HTTP {e.status_code}"
                hinted = _retry_after_s(e.response.headers)
            except openai.APITimeoutError:  # subclass of APIConnectionError: test first
                retryable, last, hinted = True, f"a timeout after {self.timeout_s:g} s", None
            except openai.APIConnectionError as e:
                retryable, last, hinted = True, f"a dropped connection ({_cause(e)})", None
            except (ValueError, openai.APIResponseValidationError) as e:  # a 200 whose body is not a completion
                retryable, last, hinted = True, f"a malformed response ({type(e).__name__})", None
            if not retryable:
                raise LLMError(
                    f"LLM request to {self.model} at {self.where} failed with {last}; check the model name, "
                    "key and base URL."
                ) from None
            if attempts > self.max_retries:
                raise LLMError(
                    f"LLM request to {self.model} at {self.where} failed after {attempts} attempts; "
                    f"the last was {last}."
                ) from None
            await _backoff_sleep(self._delay_s(attempts, hinted))

        return self._completion(response, time.perf_counter() - start, attempts)

    def _delay_s(self, attempt: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.backoff_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        return ceiling * random.uniform(0.5, 1.0)

    def _completion(self, response, latency_s: float, attempts: int) -> Completion:
        choice = response.choices[0] if response.choices else None
        usage = response.usage
        tokens_in = usage.prompt_tokens if usage else 0
        tokens_out = usage.completion_tokens if usage else 0
        model = response.model or self.model
        table_model = self.model if price_for(self.model, self.prices) else model
        return Completion(
            text=(choice.message.content or "") if choice else "",
            model=model,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_s=latency_s,
            cost_usd=cost_usd(table_model, tokens_in, tokens_out, self.prices),
            finish_reason=(choice.finish_reason or "") if choice else "no_choices",
            attempts=attempts,
        )

    async def close(self) -> None:
        await self._sdk.close()


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds from `retry-after-ms` or a numeric `Retry-After`; None when absent or an HTTP date."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                pass
    return None


def _cause(e: BaseException) -> str:
    inner = e.__cause__ or e.__context__
    return type(inner).__name__ if inner else str(e) or type(e).__name__
