"""What someone asks for when they start a run: the typed request that the CLI (`optimize`, `submit`, `bench`) and
the web form both build, and the one place where its numbers are checked.

A request names things as the user gave them (a task name or path, `auto` for the coder and the backend, unset
numbers for defaults); `opforge.run.plan.plan_run` resolves it into a `RunPlan`. Error sentences name each field as
the asker knows it: the CLI passes its flags (`--budget`), the web form its fields (`the budget`), so no message is
rewritten afterwards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from evaluator.config import EvalConfig
from opforge.errors import UsageError


@dataclass(frozen=True, slots=True)
class LLMRequest:
    model: str | None = None             # None: $OPFORGE_LLM_MODEL
    judge_model: str | None = None       # None: the coder's model
    base_url: str | None = None          # None: $OPFORGE_LLM_BASE_URL, else the OpenAI API
    max_usd: float | None = None
    max_tokens: int | None = None
    prices: str | None = None            # a JSON price table's path (None: $OPFORGE_LLM_PRICES, else built in)
    concurrency: int | None = None
    timeout_s: float | None = None
    retries: int | None = None           # None: DEFAULT_RETRIES
    judge: bool = True
    review: bool = True
    tune_per_request: int | None = None
    from_scratch: bool = False


@dataclass(frozen=True, slots=True)
class RunRequest:
    task: str                            # a task file, or a built-in task's name
    coder: str = "auto"                  # auto | tune | llm
    backend: str = "auto"                # auto | triton | cuda | cpp
    seed_kernel: str | None = None       # the starting kernel's file (None: the built-in task's)
    budget: int | None = None            # candidates, the seed kernel included (None: the default)
    timing_s: float | None = None
    time_limit_s: float | None = None
    worker_s: float | None = None
    eval_timeout_s: float | None = None  # each evaluation phase's limit (None: the evaluator's defaults)
    islands: int = 2
    seed: int = 0                        # the search's random seed
    use_archive: bool = True
    confirm: int | None = None           # re-measurements of each of the fastest kernels (None: the default, 3)
    llm: LLMRequest = field(default_factory=LLMRequest)
    task_settings: tuple[str, ...] = ()  # NAME=VALUE rewrites of the task's top-level assignments (`--set`)


# What each checked field is called on the command line; other askers pass their own names.
CLI_NAMES: Mapping[str, str] = {
    "budget": "--budget", "islands": "--islands", "timing_s": "--timing-s", "time_limit_s": "--time-limit-s",
    "eval_timeout_s": "--timeout",
    "worker_s": "--worker-s", "seed_kernel": "--seed-kernel FILE", "model": "--model NAME",
    "max_usd": "--max-usd", "max_tokens": "--max-tokens", "concurrency": "--llm-concurrency",
    "timeout_s": "--llm-timeout-s", "retries": "--llm-retries", "tune_per_request": "--tune-per-request", "prices": "--prices FILE",
    "base_url": "--llm-base-url URL", "from_scratch": "--from-scratch", "backend": "--backend",
    "coder": "--coder", "confirm": "--confirm", "task_settings": "--set",
}


def positive_whole(value: int | None, name: str) -> None:
    if value is not None and value < 1:
        raise UsageError(f"{name} must be a positive whole number, not {value}.")


def positive_seconds(value: float | None, name: str) -> None:
    if value is not None and not value > 0:
        raise UsageError(f"{name} must be a positive number of seconds, not {value}.")


def check_request(request: RunRequest, names: Mapping[str, str] = CLI_NAMES) -> None:
    """Every number of the request, checked once (UsageError, one sentence naming the field as `names` call it)."""
    name = {**CLI_NAMES, **names}.__getitem__
    positive_whole(request.budget, name("budget"))
    positive_whole(request.islands, name("islands"))
    for key in ("timing_s", "time_limit_s", "worker_s", "eval_timeout_s"):
        positive_seconds(getattr(request, key), name(key))
    if request.confirm is not None and request.confirm < 0:
        raise UsageError(f"{name('confirm')} must be 0 or more re-measurements, not {request.confirm}.")
    llm = request.llm
    positive_whole(llm.concurrency, name("concurrency"))
    positive_whole(llm.max_tokens, name("max_tokens"))
    if llm.tune_per_request is not None and llm.tune_per_request < 0:
        raise UsageError(f"{name('tune_per_request')} must be 0 or more, not {llm.tune_per_request}.")
    if llm.max_usd is not None and not llm.max_usd > 0:
        raise UsageError(f"{name('max_usd')} must be a positive amount, not {llm.max_usd}.")
    positive_seconds(llm.timeout_s, name("timeout_s"))
    if llm.retries is not None and llm.retries < 0:
        raise UsageError(f"{name('retries')} must be 0 or more retries, not {llm.retries}.")


def eval_config(timing_s: float | None, timeout_s: float | None, default_timing_s: float) -> EvalConfig:
    """What each evaluation of a run gets: its timing cap and, with `timeout_s`, that limit on every phase (the
    build and import, each correctness trial, each timing block) instead of the evaluator's 180 s and 120 s."""
    cfg = EvalConfig(max_timing_s=timing_s or default_timing_s)
    if timeout_s is not None:
        cfg = dataclasses.replace(cfg, compile_timeout_s=timeout_s, run_timeout_s=timeout_s)
    return cfg


__all__ = ["eval_config", "CLI_NAMES", "LLMRequest", "RunRequest", "check_request", "positive_seconds", "positive_whole"]
