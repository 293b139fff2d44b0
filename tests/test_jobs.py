"""The job queue: claims by priority, never twice, leases taken over when they expire, heartbeats refused to a worker
that lost its job, cancels; and end to end, `opforge worker` processes racing for jobs, one killed mid-job (every job
still finishes, once, with its full budget), and a cancelled job stopping within seconds.

Store tests run on SQLite and (with $OPFORGE_TEST_PG_URL) PostgreSQL; the end-to-end tests on PostgreSQL when it is
configured, else SQLite.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from store_fixtures import db_url, make_task, pg_base_url, pg_url, sqlite_url, store

from opforge.cli import main as opforge_main
from store import JobState, RunStatus, Store, StoreError, get_store

__all__ = ["db_url", "pg_url", "sqlite_url", "store"]  # fixtures

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"
SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
OPFORGE = [sys.executable, "-m", "opforge"]
LONG_S = 600.0


def _jobs(store: Store, n: int, priorities: list[int] | None = None) -> list[int]:
    """n jobs, each driving its own run of one task."""
    task = store.add_task(make_task())
    ids = []
    for i in range(n):
        run = store.create_run(task.id, {"coder": "tune"}, {"max_candidates": 3})
        ids.append(store.submit_job(run.id, {"n": i}, priority=(priorities or [0] * n)[i]).id)
    return ids


# --- the store's queue: both backends --------------------------------------------------------------------------------
def test_claims_take_the_highest_priority_then_the_oldest(store: Store) -> None:
    ids = _jobs(store, 5, priorities=[0, 5, 0, 5, -1])
    order = [store.claim_job(f"w{i}", LONG_S).id for i in range(5)]
    assert order == [ids[1], ids[3], ids[0], ids[2], ids[4]]
    assert store.claim_job("w9", LONG_S) is None

    job = store.get_job(ids[1])
    assert job.state is JobState.RUNNING and job.worker == "w0" and job.attempts == 1
    assert job.started_at is not None and job.heartbeat_at is not None
    assert timedelta(seconds=LONG_S - 60) < job.lease_expires_at - job.heartbeat_at <= timedelta(seconds=LONG_S)


def test_racing_claimers_never_share_a_job(store: Store, db_url: str) -> None:
    expired = _jobs(store, 8)  # held by a dead worker whose lease has run out: taken over, once each
    assert sorted(store.claim_job("dead", 2.0).id for _ in expired) == expired
    queued = _jobs(store, 24)
    time.sleep(2.2)

    barrier, claimed, errors = threading.Barrier(8), [], []

    def claimer(i: int) -> None:
        s = get_store(db_url)  # each claimer on its own engine: its own connections
        try:
            barrier.wait(timeout=60)
            while (job := s.claim_job(f"w{i}", LONG_S)) is not None:
                claimed.append((job.id, f"w{i}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
        finally:
            s.close()

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    ids = [job_id for job_id, _ in claimed]
    assert sorted(ids) == sorted(queued + expired)  # every job claimed, none twice
    for job_id, worker in claimed:
        job = store.get_job(job_id)
        assert job.worker == worker and job.state is JobState.RUNNING
        assert job.attempts == (2 if job_id in expired else 1)


def test_an_expired_lease_is_taken_over_and_the_old_holder_is_refused(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    assert store.claim_job("old", 0.3).id == job_id
    assert store.claim_job("new", LONG_S) is None  # the lease still holds
    assert store.heartbeat_job(job_id, "old", 0.3).held_by("old")
    time.sleep(0.5)

    taken = store.claim_job("new", LONG_S)
    assert taken.id == job_id and taken.worker == "new" and taken.attempts == 2

    seen = store.heartbeat_job(job_id, "old", LONG_S)  # the old holder learns it lost the job...
    assert not seen.held_by("old") and seen.worker == "new"
    assert store.get_job(job_id).lease_expires_at == taken.lease_expires_at  # ...and renewed nothing
    assert store.finish_job(job_id, "old", JobState.DONE).state is JobState.RUNNING  # nor can it finish it
    assert store.release_job(job_id, "old").worker == "new"

    done = store.finish_job(job_id, "new", JobState.DONE)
    assert done.state is JobState.DONE and done.finished_at is not None and done.lease_expires_at is None
    assert store.claim_job("third", LONG_S) is None


def test_a_heartbeat_extends_the_holders_lease(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    first = store.claim_job("w", 1.0)
    time.sleep(0.05)
    renewed = store.heartbeat_job(job_id, "w", 5.0)
    assert renewed.held_by("w") and renewed.lease_expires_at > first.lease_expires_at
    assert renewed.heartbeat_at > first.heartbeat_at


def test_cancelling_a_queued_job_means_it_never_starts(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    job = store.cancel_job(job_id)
    assert job.state is JobState.CANCELLED and job.finished_at is not None
    assert store.claim_job("w", LONG_S) is None
    assert store.get_run(job.run_id).status is RunStatus.INTERRUPTED  # resumable by hand


def test_a_cancelled_running_job_is_seen_at_the_next_heartbeat(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    store.claim_job("w", 0.3)
    assert store.cancel_job(job_id).state is JobState.CANCELLED
    seen = store.heartbeat_job(job_id, "w", 0.3)
    assert seen.state is JobState.CANCELLED and seen.worker == "w" and not seen.held_by("w")
    assert store.finish_job(job_id, "w", JobState.DONE).state is JobState.CANCELLED  # stays cancelled
    time.sleep(0.5)
    assert store.claim_job("other", LONG_S) is None  # a cancelled job's expired lease is not taken over


def test_a_finished_job_cannot_be_cancelled(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    store.claim_job("w", LONG_S)
    store.finish_job(job_id, "w", JobState.FAILED, "the proposer failed 3 times in a row")
    job = store.cancel_job(job_id)
    assert job.state is JobState.FAILED and job.error == "the proposer failed 3 times in a row"


def test_a_released_job_goes_back_to_the_queue(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    store.claim_job("stopping", LONG_S)
    released = store.release_job(job_id, "stopping")
    assert released.state is JobState.QUEUED and released.worker is None
    again = store.claim_job("next", LONG_S)
    assert again.id == job_id and again.attempts == 2


def test_a_job_whose_workers_keep_dying_is_failed(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    for attempt in (1, 2):
        assert store.claim_job(f"w{attempt}", 0.05, max_attempts=2).attempts == attempt
        time.sleep(0.15)
    assert store.claim_job("w3", LONG_S, max_attempts=2) is None
    job = store.get_job(job_id)
    assert job.state is JobState.FAILED and "2 times" in job.error and "w2" in job.error
    assert f"opforge optimize --resume {job.run_id}" in job.error
    assert store.get_run(job.run_id).status is RunStatus.FAILED


def test_job_misuse_is_one_sentence(store: Store) -> None:
    [job_id] = _jobs(store, 1)
    run_id = store.get_job(job_id).run_id
    with pytest.raises(StoreError, match=f"Run {run_id} .* already belongs to job {job_id}"):
        store.submit_job(run_id)
    with pytest.raises(StoreError, match="no job with id 99"):
        store.get_job(99)
    with pytest.raises(StoreError, match="no job with id 99"):
        store.cancel_job(99)
    with pytest.raises(StoreError, match="done or failed, not cancelled"):
        store.finish_job(job_id, "w", JobState.CANCELLED)
    with pytest.raises(StoreError, match="positive number of seconds"):
        store.claim_job("w", 0)
    assert [j.id for j in store.list_jobs(["queued"])] == [job_id] and store.list_jobs([JobState.DONE]) == []


# --- end to end: `opforge submit`, `opforge worker` processes, `opforge cancel` -------------------------------------
@pytest.fixture
def queue_url(request) -> str:  # noqa: ANN001 - pytest's request
    """PostgreSQL when $OPFORGE_TEST_PG_URL is set (the case that matters: workers on many machines), else SQLite."""
    return request.getfixturevalue("pg_url" if pg_base_url() else "sqlite_url")


def _submit(url: str, task: Path, budget: int, capsys) -> int:  # noqa: ANN001 - pytest's capsys
    code = opforge_main(["submit", str(task), "--seed-kernel", str(SEED), "--budget", str(budget),
                         "--timing-s", "0.2", "--no-archive", "--db", url, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out.strip().splitlines()[-1])["job_id"]


def _worker(url: str, name: str, log: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([*OPFORGE, "worker", "--no-require-sandbox", "--db", url, "--runner", "local", "--workers", "2",
                             "--worker-id", name, "--lease-s", "4", "--heartbeat-s", "0.5", "--poll-s", "0.5", *extra],
                            cwd=log.parent, stdout=subprocess.DEVNULL, stderr=log.open("w"))


def _verdicts(store: Store, run_id: int) -> dict[int, int]:
    """candidate id -> evaluation id of the run's recorded verdicts."""
    return {sc.candidate.id: sc.evaluation.id for sc in store.history(run_id) if sc.evaluation is not None}


@pytest.mark.slow
def test_workers_race_for_jobs_and_a_killed_workers_job_still_finishes_once(queue_url, tmp_path, capsys) -> None:
    other = tmp_path / "relu_b.py"  # a second task (another digest): the two runs share no candidate
    shutil.copy(TASK, other)
    other.write_text(other.read_text() + "\n# the second job's task\n")
    budget = 3
    jobs = [_submit(queue_url, TASK, budget, capsys), _submit(queue_url, other, budget, capsys)]
    logs = {name: tmp_path / f"{name}.log" for name in ("worker-a", "worker-b")}
    procs = {name: _worker(queue_url, name, log, "--max-jobs", "2", "--drain") for name, log in logs.items()}
    store = get_store(queue_url)
    victim, before = None, {}
    try:
        deadline = time.monotonic() + 300
        while victim is None and time.monotonic() < deadline:  # a worker with a job half done: kill it
            for job in store.list_jobs([JobState.RUNNING]):
                done = _verdicts(store, job.run_id)
                if 1 <= len(done) < budget and procs[job.worker].poll() is None:
                    victim, killed_job = job.worker, job.id
                    os.kill(procs[victim].pid, signal.SIGKILL)
                    procs[victim].wait(timeout=30)
                    before = _verdicts(store, job.run_id)  # whatever was committed up to the kill
                    break
            time.sleep(0.1)
        assert victim is not None, "no worker was caught mid-job: " + logs["worker-a"].read_text()[-2000:]
        assert store.get_job(killed_job).state is JobState.RUNNING  # nobody ended it: its lease runs out
        survivor = next(name for name in procs if name != victim)
        assert procs[survivor].wait(timeout=300) == 0, logs[survivor].read_text()[-3000:]

        for job_id in jobs:
            job = store.get_job(job_id)
            assert job.state is JobState.DONE and job.worker == survivor, (job, logs[survivor].read_text()[-3000:])
            totals = store.run_totals(job.run_id)
            assert totals.queue == {"done": budget}  # the full budget...
            assert totals.evaluated == sum(totals.by_status.values()) == budget  # ...each candidate measured once
            history = store.history(job.run_id)
            assert len(history) == budget and all(sc.evaluation is not None for sc in history)
            assert store.get_run(job.run_id).status is RunStatus.DONE
        taken_over = store.get_job(killed_job)
        assert taken_over.attempts == 2
        after = _verdicts(store, taken_over.run_id)
        assert all(after[cid] == eid for cid, eid in before.items())  # nothing measured before the kill again
        for job_id in jobs:  # finished exactly once: only the holder's finish counts, and it says so once
            lines = [line for log in logs.values() for line in log.read_text().splitlines()
                     if f": job {job_id}: done" in line]
            assert len(lines) == 1, lines
        assert f"job {killed_job}: claimed (attempt 2, resuming its run)" in logs[survivor].read_text()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        store.close()


@pytest.mark.slow
def test_cancelling_a_running_job_stops_its_worker_within_seconds(queue_url, tmp_path, capsys) -> None:
    budget = 60
    job_id = _submit(queue_url, TASK, budget, capsys)
    log = tmp_path / "worker.log"
    proc = _worker(queue_url, "worker-c", log, "--max-jobs", "1")
    store = get_store(queue_url)
    try:
        deadline = time.monotonic() + 300
        run_id = store.get_job(job_id).run_id
        while time.monotonic() < deadline and not _verdicts(store, run_id):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        assert opforge_main(["cancel", str(job_id), "--db", queue_url]) == 0
        cancelled_at = time.monotonic()
        assert store.get_job(job_id).state is JobState.CANCELLED
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        stopped_s = time.monotonic() - cancelled_at
        # A heartbeat every 0.5 s, then the evaluations in flight (0.2 s timing each) finish; generous for slow CI.
        assert stopped_s < 30, f"the worker took {stopped_s:.1f} s to stop"

        job = store.get_job(job_id)
        assert job.state is JobState.CANCELLED and job.worker == "worker-c"
        assert store.get_run(run_id).status is RunStatus.INTERRUPTED
        assert store.run_totals(run_id).queue.get("done", 0) < budget
        assert f"job {job_id}: cancelled" in log.read_text()
        assert opforge_main(["cancel", str(job_id), "--db", queue_url]) == 0  # again: nothing to do
        assert opforge_main(["jobs", "--db", queue_url, "--json"]) == 0
        listed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["jobs"]
        assert [(j["job_id"], j["state"], j["task"]) for j in listed] == [(job_id, "cancelled", "relu")]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        store.close()


@pytest.mark.slow
def test_a_worker_stopped_by_sigterm_gives_its_job_back(queue_url, tmp_path, capsys) -> None:
    job_id = _submit(queue_url, TASK, 60, capsys)
    log = tmp_path / "worker.log"
    proc = _worker(queue_url, "worker-t", log)
    store = get_store(queue_url)
    try:
        deadline = time.monotonic() + 300
        run_id = store.get_job(job_id).run_id
        while time.monotonic() < deadline and not _verdicts(store, run_id):
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        job = store.get_job(job_id)
        assert job.state is JobState.QUEUED and job.worker is None and job.attempts == 1
        assert store.get_run(run_id).status is RunStatus.INTERRUPTED
        assert f"job {job_id}: back in the queue" in log.read_text()
        assert store.claim_job("next", LONG_S).id == job_id  # the next worker resumes it
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        store.close()
