"""`opforge cancel JOB_ID`: a queued job never starts; a running one stops at its worker's next heartbeat."""

from __future__ import annotations

import argparse
import sys

from opforge.cli.flags import add_db_argument, open_store
from opforge.errors import UsageError
from store import JobState, StoreError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cancel", help="cancel a queued or running job",
                       description="Cancel a job. A queued job is cancelled at once; a running job's worker notices "
                                   "within a few seconds (at its next heartbeat), lets the evaluations in flight "
                                   "finish and stops. The job's run is kept (marked interrupted): `opforge optimize "
                                   "--resume RUN_ID` continues it.")
    p.add_argument("job_id", type=int, metavar="JOB_ID")
    add_db_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args.db)
    try:
        before = store.get_job(args.job_id)
        job = store.cancel_job(args.job_id)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if before.state is JobState.CANCELLED:
        print(f"job {job.id} was already cancelled", file=sys.stderr)
        return 0
    if job.state is not JobState.CANCELLED:
        raise UsageError(f"Job {job.id} has already finished ({job.state.value}); there is nothing to cancel.")
    if before.state is JobState.RUNNING:
        print(f"job {job.id} cancelled; its worker {job.worker} stops at its next heartbeat (run {job.run_id} is kept: "
              f"opforge optimize --resume {job.run_id} continues it)", file=sys.stderr)
    else:
        print(f"job {job.id} cancelled before it started (run {job.run_id})", file=sys.stderr)
    return 0
