"""Who proposes kernels in a run: the offline tuner, or the LLM agents (coder, judge, reviewer, tuner).

The choice and its settings are part of the run's configuration in the store (never the API key), so `--resume`
rebuilds the same proposer.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from agents.agent import Agent, AgentCall
from agents.cpu_facts import CpuFacts, local_cpu_facts, measured_cpu_roofline
from agents.device_facts import local_device_facts
from agents.prompting import DeviceFacts
from agents.judge import Judge
from agents.llm_client import LLMError, OpenAIClient
from agents.llm_coder import LLMCoder
from agents.llm_prices import DEFAULT_PRICES_USD_PER_MTOK, Price, price_for
from agents.llm_proposer import LLMProposer, LoopSettings
from agents.spend import Spend, SpendLimits
from agents.tuner import TuneProposer
from opforge.errors import UsageError
from opforge.run.config import LLMSettings, RunConfig
from opforge.run.proposals import Proposing
from opforge.run.request import CLI_NAMES, LLMRequest
from opforge.run.translation import translation_sources
from evaluator.task import Task
from evaluator.measure.task_work import TaskWork
from store import RunRecord, Store

TUNER_OVERSAMPLE = 4  # the tuner is free: ask it for extra neighbours, some are known already
MODEL_ENV = "OPFORGE_LLM_MODEL"
BASE_URL_ENV = "OPFORGE_LLM_BASE_URL"
PRICES_ENV = "OPFORGE_LLM_PRICES"
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_RETRIES = 4  # a request's retries after its first attempt (backoff 1, 2, 4, 8 s, each halved at random)
CODER_TEMPERATURE = 0.7
JUDGE_TEMPERATURE = 0.2
CODER_MAX_TOKENS = 8192
JUDGE_MAX_TOKENS = 2048


def resolve_coder(coder: str, model: str | None) -> str:
    """`auto` means the LLM agents when a model is configured (given, or $OPFORGE_LLM_MODEL), else the tuner."""
    if coder != "auto":
        return coder
    return "llm" if (model or os.environ.get(MODEL_ENV)) else "tune"


def llm_settings(request: LLMRequest, names: Mapping[str, str] = CLI_NAMES) -> LLMSettings:
    """The LLM part of a new run's configuration, checked; raises UsageError with one sentence. (The request's
    numbers are checked by `opforge.run.request.check_request`.)"""
    name = {**CLI_NAMES, **names}.__getitem__
    model = request.model or os.environ.get(MODEL_ENV)
    if not model:
        raise UsageError(f"The LLM coder needs a model: give {name('model')} (or set ${MODEL_ENV}).")
    base_url = request.base_url or os.environ.get(BASE_URL_ENV)
    if not base_url and not (os.environ.get("OPFORGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")):
        raise UsageError(f"The LLM coder needs an endpoint: give {name('base_url')} for an OpenAI-compatible server, "
                         "or set OPFORGE_LLM_API_KEY (or OPENAI_API_KEY) to use the OpenAI API.")
    prices = load_prices(request.prices or os.environ.get(PRICES_ENV))
    judge_model = (request.judge_model or model) if request.judge else None
    unpriced = sorted({m for m in (model, judge_model) if m and price_for(m, prices) is None})
    if unpriced and request.max_usd is not None:
        raise UsageError(f"{name('max_usd')} needs the price of {', '.join(unpriced)}, which the price table does "
                         f"not know: give {name('prices')}.")
    for m in unpriced:
        print(f"opforge: note: no price known for model {m}; its calls are counted as $0 (give "
              f"{name('prices')} to count them).", file=sys.stderr)
    return LLMSettings(
        model=model,
        judge_model=judge_model,
        base_url=base_url,
        review=request.review and request.judge,
        tune_per_request=2 if request.tune_per_request is None else request.tune_per_request,
        concurrency=request.concurrency or DEFAULT_CONCURRENCY,
        timeout_s=request.timeout_s or DEFAULT_TIMEOUT_S,
        retries=DEFAULT_RETRIES if request.retries is None else request.retries,
        prices=MappingProxyType(dict(prices)),
        from_scratch=request.from_scratch,
    )


def load_prices(path: str | None) -> dict[str, Price]:
    if not path:
        return dict(DEFAULT_PRICES_USD_PER_MTOK)
    p = Path(path).expanduser()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{p}: cannot read the price table ({exc.strerror or exc}).") from None
    except ValueError as exc:
        raise UsageError(f"{p}: the price table is not valid JSON ({exc}).") from None
    table: dict[str, Price] = {}
    if not isinstance(data, dict):
        raise UsageError(f'{p}: the price table must be a JSON object such as {{"my-model": [0.5, 1.5]}}.')
    for model, price in data.items():
        ok = (isinstance(price, list) and len(price) == 2
              and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in price))
        if not ok:
            raise UsageError(f"{p}: the price of {model!r} must be [USD per 1M input tokens, USD per 1M output "
                             f"tokens], not {json.dumps(price)}.")
        table[model] = (float(price[0]), float(price[1]))
    return table


def make_proposer(store: Store, run: RunRecord, config: RunConfig, llm_base_url: str | None = None,
                  on_call: Callable[[AgentCall], None] | None = None) -> Proposing:
    """The proposer a run's configuration asks for; LLM calls are recorded in the store as they finish."""
    seed = hash((config.seed, run.id, run.evaluated)) & 0xFFFFFFFF
    if config.coder != "llm" or config.llm is None:
        return Proposing(TuneProposer(seed=seed), oversample=TUNER_OVERSAMPLE)
    llm = config.llm
    budget = run.budget
    spend = Spend(SpendLimits(budget.get("usd"), budget.get("tokens")), run.cost_usd, run.tokens_in, run.tokens_out)
    prices = dict(llm.prices)
    base_url = llm_base_url or llm.base_url
    concurrency = llm.concurrency

    def record(call: AgentCall) -> None:
        c = call.completion
        store.record_llm_call(run.id, call.role, call.model, call.prompt, call.reply,
                              tokens_in=c.tokens_in if c else 0, tokens_out=c.tokens_out if c else 0,
                              latency_s=c.latency_s if c else 0.0, cost_usd=c.cost_usd if c else 0.0,
                              candidate_digest=call.candidate_digest, outcome=call.outcome, problem=call.problem,
                              attempts=c.attempts if c else 0)
        if on_call is not None:
            on_call(call)

    try:
        def agent(model: str, temperature: float, max_tokens: int) -> Agent:
            client = OpenAIClient(base_url, model, timeout_s=llm.timeout_s, max_retries=llm.retries,
                                  max_in_flight=concurrency, prices=prices)
            return Agent(client, model, temperature=temperature, max_tokens=max_tokens, spend=spend, on_call=record)

        device = agent_device_facts(store, config.backend, config.eval.device)
        coder = LLMCoder(agent(llm.model, CODER_TEMPERATURE, CODER_MAX_TOKENS), device, config.backend)
        judge = None
        if llm.judge_model:
            judge = Judge(agent(llm.judge_model, JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS), device, config.backend,
                          roofline_ms=task_roofline(store, run.task_id, device))
    except LLMError as exc:
        raise UsageError(str(exc)) from None
    settings = LoopSettings(review=llm.review, tune_per_request=llm.tune_per_request)
    translations = translation_sources(store, run.task_id, config.backend, config.archive, run_id=run.id)
    proposer = LLMProposer(coder, judge, spend, settings, seed=seed, translations=translations)
    return Proposing(proposer, oversample=1, extra_per_request=settings.tune_per_request, spend=spend)


def agent_device_facts(store: Store, backend: str, device: str) -> DeviceFacts | CpuFacts:
    """What the agents are told about the machine: the CPU's facts for native kernels, else the GPU's."""
    if backend == "cpp":
        from evaluator.device.info import device_info
        return local_cpu_facts(measured_cpu_roofline(store, device_info("cpu").name))
    return local_device_facts(device)


def task_roofline(store: Store, task_id: int, device: DeviceFacts | CpuFacts) -> Callable[[Task], float | None]:
    """The least time one call of the run's task can take on this device (None where the task's work or the device's
    peaks are unknown): the judge shows a kernel's fraction of it."""
    if isinstance(device, CpuFacts):
        bandwidth, peak_tflops = device.copy_bandwidth_gbps, device.peak_gflops and device.peak_gflops / 1e3
    else:
        bandwidth, peak_tflops = device.memory_bandwidth_gbps, device.peak_tflops

    def roofline_ms(_task: Task) -> float | None:
        if not (bandwidth or peak_tflops):
            return None
        record = store.get_task(task_id)
        if record.flops is None or record.min_bytes is None:
            return None
        return TaskWork(record.flops, record.min_bytes).roofline_ms(bandwidth, peak_tflops)

    return roofline_ms
