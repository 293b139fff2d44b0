"""`opforge worker`: claim queued jobs from the store and run them, one at a time, until told to stop."""

from __future__ import annotations

import argparse
import os
import signal
from types import FrameType

from evaluator.driver.pool import Runner
from evaluator.sandbox.process_tree import set_undumpable
from evaluator.sandbox.bwrap import bwrap_available
from evaluator.sandbox.launch import REQUIRE_ENV, WITHOUT_BWRAP
from opforge.cli.flags import DB_HELP, RAY_ADDRESS_HELP, open_store
from store.engine import ENV_VAR as STORE_ENV
from opforge.errors import UsageError
from opforge.cli.commands.optimize import make_runner
from opforge.run.job_worker import (DEFAULT_HEARTBEAT_S, DEFAULT_LEASE_S, DEFAULT_MAX_ATTEMPTS, DEFAULT_POLL_S, Worker,
                            WorkerSettings, default_worker_id)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("worker", help="run queued jobs (see opforge submit) on this machine",
                       description="Claim jobs from the store's queue (highest priority first), drive each job's "
                                   "search with this machine's evaluators and keep its lease alive by heartbeats. "
                                   "Several workers, on one or many machines, may share a store: a job is never run "
                                   "by two at once, and the job of a worker that died is taken over once its lease "
                                   "expires. SIGTERM stops after the evaluations in flight and puts the job back in "
                                   "the queue; so does Ctrl-C, at once. Progress goes to stderr.")
    p.add_argument("--db", metavar="URL", help=f"{DB_HELP}; a PostgreSQL URL for workers on several machines")
    p.add_argument("--max-jobs", type=int, default=None, metavar="N",
                   help="exit after taking N jobs to an end, whatever their outcome (default: run until stopped)")
    p.add_argument("--drain", action="store_true",
                   help="exit once no job is queued or running anywhere (nothing left to run or take over)")
    p.add_argument("--runner", choices=("ray", "local"), default="ray",
                   help="evaluate on Ray actors (default) or on threads of this process")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="parallel evaluations where there is no GPU (default 2); with GPUs, one per GPU")
    p.add_argument("--ray-address", metavar="ADDR", help=RAY_ADDRESS_HELP)
    p.add_argument("--lease-s", type=float, default=DEFAULT_LEASE_S, metavar="S",
                   help=f"how long a job stays this worker's without a heartbeat; a dead worker's job is taken over "
                        f"this long after its last heartbeat (default {DEFAULT_LEASE_S:g})")
    p.add_argument("--heartbeat-s", type=float, default=DEFAULT_HEARTBEAT_S, metavar="S",
                   help=f"how often the lease is renewed and a cancel noticed (default {DEFAULT_HEARTBEAT_S:g})")
    p.add_argument("--poll-s", type=float, default=DEFAULT_POLL_S, metavar="S",
                   help=f"how often an idle worker looks for a job (default {DEFAULT_POLL_S:g})")
    p.add_argument("--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS, metavar="N",
                   help="a job whose workers died this many times is marked failed instead of taken over again "
                        f"(default {DEFAULT_MAX_ATTEMPTS})")
    p.add_argument("--worker-id", metavar="NAME", help="this worker's name in the store (default HOST:PID)")
    p.add_argument("--require-sandbox", action=argparse.BooleanOptionalAction, default=True,
                   help="refuse to evaluate where bubblewrap cannot run (default): candidates from a shared queue "
                        "then never run in the weaker process sandbox; --no-require-sandbox allows it. Sets "
                        f"${REQUIRE_ENV} for this process and the Ray workers it starts (set it on a remote cluster's "
                        "machines yourself)")
    p.add_argument("--llm-base-url", metavar="URL",
                   help="the OpenAI-compatible endpoint for LLM jobs, instead of the one each run was submitted with "
                        "(the key comes from $OPFORGE_LLM_API_KEY or $OPENAI_API_KEY on this machine)")
    p.set_defaults(run=run, drives_evaluations=True)


def run(args: argparse.Namespace) -> int:
    for flag, value in (("--max-jobs", args.max_jobs), ("--workers", args.workers),
                        ("--max-attempts", args.max_attempts)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be a positive whole number, not {value}.")
    for flag, value in (("--lease-s", args.lease_s), ("--heartbeat-s", args.heartbeat_s), ("--poll-s", args.poll_s)):
        if not value > 0:
            raise UsageError(f"{flag} must be a positive number of seconds, not {value}.")
    try:
        settings = WorkerSettings(worker_id=args.worker_id or default_worker_id(), lease_s=args.lease_s,
                                  heartbeat_s=args.heartbeat_s, poll_s=args.poll_s, max_jobs=args.max_jobs,
                                  drain=args.drain, max_attempts=args.max_attempts, llm_base_url=args.llm_base_url)
    except ValueError as exc:
        raise UsageError(f"{str(exc)[0].upper()}{str(exc)[1:]}: give a --heartbeat-s below --lease-s.") from None
    if args.require_sandbox:
        if not bwrap_available():
            raise UsageError(f"{WITHOUT_BWRAP[0].upper()}{WITHOUT_BWRAP[1:]}; `opforge worker` requires it: install "
                             "it, or pass --no-require-sandbox to accept the process sandbox.")
        os.environ[REQUIRE_ENV] = "1"  # before Ray starts: its workers inherit it
    # The store's credentials stay out of candidates' reach: this process's /proc entries (its environment) unreadable
    # to other processes of the user, and $OPFORGE_DB not inherited by Ray's processes, which are not.
    set_undumpable()
    store = open_store(args.db)
    os.environ.pop(STORE_ENV, None)
    runner: Runner | None = None
    previous = signal.getsignal(signal.SIGTERM)
    try:
        runner = make_runner(args.runner, args.workers, args.ray_address)  # before claiming: no lease spent starting
        worker = Worker(store, runner, settings)

        def on_sigterm(_signum: int, _frame: FrameType | None) -> None:
            if worker.stopping:  # a second SIGTERM: stop now, like Ctrl-C
                raise KeyboardInterrupt
            worker.request_stop("SIGTERM received; the current job goes back to the queue")

        signal.signal(signal.SIGTERM, on_sigterm)
        worker.run()
        return 0
    finally:
        signal.signal(signal.SIGTERM, previous)
        if runner is not None:
            runner.close()
        store.close()
