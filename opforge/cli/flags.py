"""Flags several commands share, declared once: `--db` (and opening the store or saying why), the flags that
describe a new run (`optimize`, `submit`) and the LLM agents' flags (`optimize`, `submit`, `bench`). Each command
turns its parsed flags into the typed request below the CLI (`opforge.run.request.RunRequest`); nothing under
`opforge/run/` sees an `argparse.Namespace`."""

from __future__ import annotations

import argparse

from evaluator.task_settings import CLI_HELP as SET_HELP
from opforge.errors import UsageError
from opforge.run.config import BACKEND_CHOICES
from opforge.run.plan import DEFAULT_BUDGET, DEFAULT_TIMING_S
from opforge.run.proposers import (BASE_URL_ENV, DEFAULT_CONCURRENCY, DEFAULT_RETRIES, DEFAULT_TIMEOUT_S, MODEL_ENV,
                                    PRICES_ENV)
from opforge.run.request import LLMRequest, RunRequest
from store import Store, StoreError, get_store

DB_HELP = "the store (default $OPFORGE_DB, else ./opforge.db)"


def add_db_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="URL", help=DB_HELP)


def open_store(url: str | None) -> Store:
    """The store at `url`, or UsageError with the store's one sentence (unreachable, too old, not a database)."""
    try:
        return get_store(url)
    except StoreError as exc:
        raise UsageError(str(exc)) from None


def add_backend_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="auto",
                   help="what the kernels are written in: triton, cuda, or cpp (native C/C++ CPU kernels); auto "
                        "(default) follows the starting kernel, else triton where a CUDA GPU is present and cpp "
                        "where there is none (Triton on a CPU runs interpreted: right answers, meaningless timings)")


def add_set_argument(p: argparse.ArgumentParser) -> None:
    """`--set NAME=VALUE` (repeatable) into `task_settings`; light to import (`opforge eval` adds it before torch)."""
    p.add_argument("--set", dest="task_settings", action="append", default=[], metavar="NAME=VALUE",
                   help=SET_HELP)


def add_run_arguments(p: argparse.ArgumentParser, time_limit_help: str) -> None:
    """--set, --budget, --coder, --backend, --seed-kernel, --db, timing and limits, islands, seed, --no-archive and the LLM
    flags."""
    add_set_argument(p)
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help=f"candidates to evaluate, the seed kernel included (default {DEFAULT_BUDGET})")
    p.add_argument("--coder", choices=("auto", "tune", "llm"), default="auto",
                   help="who proposes kernels: tune (the offline parameter tuner, no LLM), llm (coder and judge "
                        "agents over an OpenAI-compatible model, with the tuner between their calls), or auto "
                        "(default: llm when a model is configured, else tune)")
    add_backend_argument(p)
    p.add_argument("--seed-kernel", metavar="FILE",
                   help="the starting kernel (default: the built-in task's, for the backend)")
    add_db_argument(p)
    p.add_argument("--timing-s", type=float, default=None, metavar="S",
                   help=f"time cap for each side's timed repetitions (default {DEFAULT_TIMING_S:g})")
    p.add_argument("--time-limit-s", type=float, default=None, metavar="S", help=time_limit_help)
    add_timeout_argument(p)
    p.add_argument("--worker-s", "--gpu-s", dest="worker_s", type=float, default=None, metavar="S",
                   help="stop after workers were busy this long in all: seconds from submitting each candidate to "
                        "its verdict (builds included), summed (--gpu-s is the old name)")
    p.add_argument("--islands", type=int, default=2, metavar="N", help="islands of the population (default 2)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the search (default 0)")
    add_confirm_argument(p)
    p.add_argument("--no-archive", action="store_true",
                   help="do not start from earlier runs' kernels of this task nor show the coder those of related "
                        "tasks (by default the store's archive is offered)")
    add_llm_arguments(p)


RAY_ADDRESS_HELP = ("an existing Ray cluster, HOST:PORT (default $RAY_ADDRESS, else a cluster already started on "
                    "this machine, else a local Ray of its own); a cluster made by `ray start` needs "
                    "RAY_AUTH_MODE=token in opforge's environment")


def add_timeout_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", dest="eval_timeout_s", type=float, default=None, metavar="S",
                   help="limit each evaluation's phases (build and import, each correctness trial, each timing "
                        "block) to S seconds: a candidate that hangs is recorded `timeout` after that long (default "
                        "180 s to build and import, 120 s for each later phase)")


def add_confirm_argument(p: argparse.ArgumentParser, what: str = "the search", time_limit: bool = True) -> None:
    p.add_argument("--confirm", type=int, default=None, metavar="N",
                   help=f"once {what} is over, evaluate its two fastest correct kernels N more times each and "
                        "report the median of those (default 3; 0: report the search's own figure, which favours "
                        "a kernel that measured lucky once)" + ("; a --time-limit-s leaves room for them" if time_limit
                                                                else ""))


def add_llm_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM agents (--coder llm)")
    g.add_argument("--model", metavar="M", help=f"the coder's model (default ${MODEL_ENV})")
    g.add_argument("--judge-model", metavar="M", help="the judge's model (default: the coder's)")
    g.add_argument("--llm-base-url", metavar="URL",
                   help=f"an OpenAI-compatible endpoint: vLLM, SGLang, Ollama, llama.cpp... (default ${BASE_URL_ENV}, "
                        "else the OpenAI API); the key comes from $OPFORGE_LLM_API_KEY or $OPENAI_API_KEY")
    g.add_argument("--max-usd", type=float, metavar="USD", help="stop when the run's LLM calls have cost this much")
    g.add_argument("--max-tokens", type=int, metavar="N", help="stop when the run's LLM calls have used this many tokens")
    g.add_argument("--prices", metavar="FILE",
                   help=f'a JSON price table {{"model": [USD per 1M input tokens, USD per 1M output tokens]}} '
                        f"(default ${PRICES_ENV}, else a built-in table of well-known models)")
    g.add_argument("--llm-concurrency", type=int, default=None, metavar="N",
                   help=f"requests in flight at once per model (default {DEFAULT_CONCURRENCY})")
    g.add_argument("--llm-timeout-s", type=float, default=None, metavar="S",
                   help=f"give up on one request after this long; it is retried (default {DEFAULT_TIMEOUT_S:g})")
    g.add_argument("--llm-retries", type=int, default=None, metavar="N",
                   help=f"retry a request that timed out, dropped or got HTTP 429/5xx N times, with backoff, before the "
                        f"run fails naming the endpoint (default {DEFAULT_RETRIES}; 0 fails on the first error)")
    g.add_argument("--no-judge", action="store_true", help="no judge: the coder refines without a diagnosis")
    g.add_argument("--no-review", action="store_true", help="skip the judge's screening of each new candidate")
    g.add_argument("--tune-per-request", type=int, default=None, metavar="K",
                   help="tuner neighbours of a correct parent added to each LLM request (default 2; 0: none)")
    g.add_argument("--from-scratch", action="store_true",
                   help="ignore the task's seed kernel: the first kernels are written by the coder")


def llm_request(args: argparse.Namespace) -> LLMRequest:
    return LLMRequest(model=args.model, judge_model=args.judge_model, base_url=args.llm_base_url,
                      max_usd=args.max_usd, max_tokens=args.max_tokens, prices=args.prices,
                      concurrency=args.llm_concurrency, timeout_s=args.llm_timeout_s, retries=args.llm_retries,
                      judge=not args.no_judge,
                      review=not args.no_review, tune_per_request=args.tune_per_request,
                      from_scratch=args.from_scratch)


def run_request(args: argparse.Namespace) -> RunRequest:
    """The typed request that `add_run_arguments`' flags describe."""
    return RunRequest(task=args.task, coder=args.coder, backend=args.backend, seed_kernel=args.seed_kernel,
                      budget=args.budget, timing_s=args.timing_s, time_limit_s=args.time_limit_s,
                      worker_s=args.worker_s, eval_timeout_s=args.eval_timeout_s, islands=args.islands, seed=args.seed, use_archive=not args.no_archive,
                      confirm=args.confirm, llm=llm_request(args), task_settings=tuple(args.task_settings))
