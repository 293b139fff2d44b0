"""Two writer processes racing on one database: the same 200 sources added (one by one, then in batches in
opposite orders), queued and claimed concurrently.

The PostgreSQL case is the one that matters (many workers, one server); SQLite's is there because its writers must
also take turns without 'database is locked' errors.
"""

from __future__ import annotations

import multiprocessing as mp

from store_fixtures import db_url, make_task, pg_url, sqlite_url

from evaluator.candidate import Candidate
from store import get_store

__all__ = ["db_url", "pg_url", "sqlite_url"]  # fixtures

N_SOURCES = 200
CLAIM_BATCH = 3
BATCH = 20


def _source(i: int) -> Candidate:
    return Candidate.from_source(f"def kernel():\n    return {i}\n")


def _writer(url: str, task_id: int, run_id: int, reverse: bool, barrier, results) -> None:  # noqa: ANN001
    store = get_store(url)
    try:
        barrier.wait(timeout=60)
        by_index: dict[int, tuple[int, bool]] = {}
        for i in range(N_SOURCES // 2):  # one at a time, in the same order: the tightest race on each key
            record, new = store.add_candidate(run_id, task_id, _source(i))
            store.enqueue(run_id, record.id)
            by_index[i] = (record.id, new)
        barrier.wait(timeout=120)
        for start in range(N_SOURCES // 2, N_SOURCES, BATCH):  # the same batches, one writer's backwards
            batch = list(range(start, min(start + BATCH, N_SOURCES)))
            batch = batch[::-1] if reverse else batch
            out = store.add_candidates(run_id, task_id, [_source(i) for i in batch])
            store.enqueue(run_id, [record.id for record, _ in out])
            by_index.update(zip(batch, ((record.id, new) for record, new in out)))
        added = [by_index[i] for i in range(N_SOURCES)]
        barrier.wait(timeout=120)  # both queues filled: now claim side by side
        claimed: list[int] = []
        while got := store.claim_pending(run_id, CLAIM_BATCH):
            claimed.extend(c.id for c in got)
        results.put((added, claimed))
    except BaseException as exc:  # report, so the parent fails with the reason instead of waiting
        results.put(repr(exc))
    finally:
        store.close()


def test_two_processes_add_and_claim_without_duplicates(db_url: str) -> None:
    with get_store(db_url) as store:  # created (migrated) once, before the race
        task_id = store.add_task(make_task()).id
        run_id = store.create_run(task_id, {}, {}).id

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(db_url, task_id, run_id, reverse, barrier, results))
             for reverse in (False, True)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(isinstance(o, tuple) for o in outcomes), outcomes

    (added_a, claimed_a), (added_b, claimed_b) = outcomes
    ids_a, ids_b = [cid for cid, _ in added_a], [cid for cid, _ in added_b]
    assert ids_a == ids_b and len(set(ids_a)) == N_SOURCES  # both saw the same record for each source
    assert [new_a + new_b for (_, new_a), (_, new_b) in zip(added_a, added_b)] == [1] * N_SOURCES  # one creator each
    claimed = claimed_a + claimed_b
    assert len(claimed) == len(set(claimed)) == N_SOURCES  # every item claimed, none twice
    assert set(claimed) == set(ids_a)

    with get_store(db_url) as store:
        assert len(store.history(run_id)) == N_SOURCES
        assert store.run_totals(run_id).queue == {"running": N_SOURCES}
