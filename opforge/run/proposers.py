"""Who proposes kernels in a run: the offline tuner, or the LLM agents (coder, judge, reviewer, tuner).

The choice and its settings are part of the run's configuration in the store (never the API key), so `--resume`
rebuilds the same proposer; `add_llm_arguments` gives `optimize` and `bench` the same flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.agent import Agent, AgentCall
from agents.cpu_facts import CpuFacts, local_cpu_facts, measured_cpu_roofline
from agents.device_facts import local_device_facts
from agents.prompting import DeviceFacts
from agents.judge import Judge
from agents.llm_client import LLMError, OpenAIClient
from agents.llm_coder import LLMCoder
from agents.llm_prices import DEFAULT_PRICES_USD_PER_MTOK, Price, price_for
from agents.llm_proposer import LLMProposer, LoopSettings
from agents.proposal import Proposer
from agents.spend import Spend, SpendLimits
from agents.tuner import TuneProposer
from opforge.errors import UsageError
from opforge.run.translation import translation_sources
from evaluator.task import Task
from evaluator.task_work import TaskWork
from store import RunRecord, Store

TUNER_OVERSAMPLE = 4  # the tuner is free: ask it for extra neighbours, some are known already
MODEL_ENV = "OPFORGE_LLM_MODEL"
BASE_URL_ENV = "OPFORGE_LLM_BASE_URL"
PRICES_ENV = "OPFORGE_LLM_PRICES"
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT_S = 180.0
CODER_TEMPERATURE = 0.7
JUDGE_TEMPERATURE = 0.2
CODER_MAX_TOKENS = 8192
JUDGE_MAX_TOKENS = 2048


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM agents (--coder llm)")
    g.add_argument("--model", metavar="M", help=f"the coder's model (default ${MODEL_ENV})")
    g.add_argument("--judge-model", metavar="M", help="the judge's model (default: the coder's)")
    g.add_argument("--llm-base-url", metavar="URL",
                   help=f"an OpenAI-compatible endpoint: vLLM, SGLang, Ollama, llama.cpp... (default ${BASE_URL_ENV}, "
                        "else the OpenAI API); the key comes from $OPFORGE_LLM_API_KEY or $OPENAI_API_KEY")
    g.add_argument("--backend", choices=("triton", "cuda", "cpp"), default=None,
                   help="the kernels to write: triton, cuda, or cpp (native C/C++ CPU kernels) (default triton)")
    g.add_argument("--max-usd", type=float, metavar="USD", help="stop when the run's LLM calls have cost this much")
    g.add_argument("--max-tokens", type=int, metavar="N", help="stop when the run's LLM calls have used this many tokens")
    g.add_argument("--prices", metavar="FILE",
                   help=f'a JSON price table {{"model": [USD per 1M input tokens, USD per 1M output tokens]}} '
                        f"(default ${PRICES_ENV}, else a built-in table of well-known models)")
    g.add_argument("--llm-concurrency", type=int, default=None, metavar="N",
                   help=f"requests in flight at once per model (default {DEFAULT_CONCURRENCY})")
    g.add_argument("--llm-timeout-s", type=float, default=None, metavar="S",
                   help=f"give up on one request after this long; it is retried (default {DEFAULT_TIMEOUT_S:g})")
    g.add_argument("--no-judge", action="store_true", help="no judge: the coder refines without a diagnosis")
    g.add_argument("--no-review", action="store_true", help="skip the judge's screening of each new candidate")
    g.add_argument("--tune-per-request", type=int, default=None, metavar="K",
                   help="tuner neighbours of a correct parent added to each LLM request (default 2; 0: none)")
    g.add_argument("--from-scratch", action="store_true",
                   help="ignore the task's seed kernel: the first kernels are written by the coder")


def resolve_coder(args: argparse.Namespace) -> str:
    """`auto` means the LLM agents when a model is configured, else the tuner."""
    if args.coder != "auto":
        return args.coder
    return "llm" if (args.model or os.environ.get(MODEL_ENV)) else "tune"


def llm_config(args: argparse.Namespace) -> dict[str, Any]:
    """The LLM part of a new run's configuration, checked; raises UsageError with one sentence."""
    model = args.model or os.environ.get(MODEL_ENV)
    if not model:
        raise UsageError(f"--coder llm needs a model: give --model NAME (or set ${MODEL_ENV}).")
    for flag, value in (("--llm-concurrency", args.llm_concurrency), ("--max-tokens", args.max_tokens),
                        ("--tune-per-request", None if args.tune_per_request is None else args.tune_per_request + 1)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be a positive whole number, not {value}.")
    if args.max_usd is not None and not args.max_usd > 0:
        raise UsageError(f"--max-usd must be a positive amount, not {args.max_usd}.")
    if args.llm_timeout_s is not None and not args.llm_timeout_s > 0:
        raise UsageError(f"--llm-timeout-s must be a positive number of seconds, not {args.llm_timeout_s}.")
    base_url = args.llm_base_url or os.environ.get(BASE_URL_ENV)
    if not base_url and not (os.environ.get("OPFORGE_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")):
        raise UsageError("--coder llm needs an endpoint: give --llm-base-url URL for an OpenAI-compatible server, or "
                         "set OPFORGE_LLM_API_KEY (or OPENAI_API_KEY) to use the OpenAI API.")
    prices = load_prices(args.prices or os.environ.get(PRICES_ENV))
    judge_model = None if args.no_judge else (args.judge_model or model)
    unpriced = sorted({m for m in (model, judge_model) if m and price_for(m, prices) is None})
    if unpriced and args.max_usd is not None:
        raise UsageError(f"--max-usd needs the price of {', '.join(unpriced)}, which the price table does not "
                         "know: give --prices FILE.")
    for m in unpriced:
        print(f"opforge: note: no price known for model {m}; its calls are counted as $0 (give --prices FILE to "
              "count them).", file=sys.stderr)
    return {
        "model": model,
        "judge_model": judge_model,
        "base_url": base_url,
        "backend": args.backend or "triton",
        "review": not args.no_review and not args.no_judge,
        "tune_per_request": 2 if args.tune_per_request is None else args.tune_per_request,
        "concurrency": args.llm_concurrency or DEFAULT_CONCURRENCY,
        "timeout_s": args.llm_timeout_s or DEFAULT_TIMEOUT_S,
        "prices": {k: list(v) for k, v in prices.items()},
        "from_scratch": bool(args.from_scratch),
    }


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


@dataclass(frozen=True, slots=True)
class Proposing:
    """A run's proposer and how the search should drive it."""

    proposer: Proposer
    oversample: int = 1
    extra_per_request: int = 0
    spend: Spend | None = None


def make_proposer(store: Store, run: RunRecord, llm_base_url: str | None = None,
                  on_call: Callable[[AgentCall], None] | None = None) -> Proposing:
    """The proposer a run's configuration asks for; LLM calls are recorded in the store as they finish."""
    config: Mapping[str, Any] = run.config
    seed = hash((int(config.get("seed", 0)), run.id, run.evaluated)) & 0xFFFFFFFF
    if config.get("coder", "tune") != "llm":
        return Proposing(TuneProposer(seed=seed), oversample=TUNER_OVERSAMPLE)
    llm: Mapping[str, Any] = config["llm"]
    budget = run.budget
    spend = Spend(SpendLimits(budget.get("usd"), budget.get("tokens")), run.cost_usd, run.tokens_in, run.tokens_out)
    prices = {k: (float(v[0]), float(v[1])) for k, v in llm.get("prices", {}).items()}
    base_url = llm_base_url or llm.get("base_url")
    concurrency = int(llm.get("concurrency", DEFAULT_CONCURRENCY))

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
            client = OpenAIClient(base_url, model, timeout_s=float(llm.get("timeout_s", DEFAULT_TIMEOUT_S)),
                                  max_in_flight=concurrency, prices=prices)
            return Agent(client, model, temperature=temperature, max_tokens=max_tokens, spend=spend, on_call=record)

        backend = str(config.get("backend") or llm.get("backend") or "triton")
        device = agent_device_facts(store, backend, str(config.get("eval", {}).get("device", "auto")))
        coder = LLMCoder(agent(llm["model"], CODER_TEMPERATURE, CODER_MAX_TOKENS), device, backend)
        judge = None
        if llm.get("judge_model"):
            judge = Judge(agent(llm["judge_model"], JUDGE_TEMPERATURE, JUDGE_MAX_TOKENS), device, backend,
                          roofline_ms=task_roofline(store, run.task_id, device))
    except LLMError as exc:
        raise UsageError(str(exc)) from None
    settings = LoopSettings(review=bool(llm.get("review", True)), tune_per_request=int(llm.get("tune_per_request", 2)))
    translations = translation_sources(store, run.task_id, backend, config.get("archive"))
    proposer = LLMProposer(coder, judge, spend, settings, seed=seed, translations=translations)
    return Proposing(proposer, oversample=1, extra_per_request=settings.tune_per_request, spend=spend)


def agent_device_facts(store: Store, backend: str, device: str) -> DeviceFacts | CpuFacts:
    """What the agents are told about the machine: the CPU's facts for native kernels, else the GPU's."""
    if backend == "cpp":
        return local_cpu_facts(measured_cpu_roofline(store))
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
