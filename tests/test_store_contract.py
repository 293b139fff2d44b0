"""The Store contract, run against every backend (SQLite file; PostgreSQL when $OPFORGE_TEST_PG_URL is set)."""

from __future__ import annotations

import pytest
from store_fixtures import (
    CPU,
    H100,
    db_url,
    failed_result,
    full_result,
    make_task,
    ok_result,
    pg_url,
    sqlite_url,
    store,
)

from evaluator.candidate import Candidate
from evaluator.result import EvalResult, Status
from store import QueueState, RunStatus, Store, StoreError, get_store

__all__ = ["db_url", "pg_url", "sqlite_url", "store"]  # fixtures


def _setup(store: Store, n: int = 0) -> tuple[int, int, list[int]]:
    task = store.add_task(make_task())
    run = store.create_run(task.id, config={"strategy": "islands", "islands": 2}, budget={"max_evals": 100})
    ids = [store.add_candidate(run.id, task.id, Candidate.from_source(f"x = {i}"))[0].id for i in range(n)]
    return task.id, run.id, ids


def test_add_task_is_idempotent_by_digest(store: Store) -> None:
    first = store.add_task(make_task())
    again = store.add_task(make_task(name="renamed"))
    other = store.add_task(make_task(body="# another\n"))
    assert again == first and again.name == "softmax"
    assert other.id != first.id
    assert store.get_task(first.id).task == make_task()


def test_add_candidate_dedupes_by_task_and_digest(store: Store) -> None:
    task_id, run_id, _ = _setup(store)
    other_task = store.add_task(make_task(body="# b\n")).id
    second_run = store.create_run(task_id, {}, {}).id
    cand = Candidate.from_source("y = 1", origin="llm:gpt-x", parents=("abc", "def"), note="fuse the loops")

    first, new = store.add_candidate(run_id, task_id, cand, generation=3, island=1)
    again, new_again = store.add_candidate(second_run, task_id, Candidate.from_source("y = 1", origin="tune"))
    elsewhere, new_elsewhere = store.add_candidate(run_id, other_task, cand)

    assert (new, new_again, new_elsewhere) == (True, False, True)
    assert again == first and again.run_id == run_id and again.origin == "llm:gpt-x"
    assert elsewhere.id != first.id
    assert first.candidate == cand
    assert (first.generation, first.island, first.parents) == (3, 1, ("abc", "def"))
    assert store.find_candidate(task_id, cand.digest) == first
    assert store.find_candidate(task_id, "0" * 64) is None


def test_add_candidates_batch_marks_repeats_as_not_new(store: Store) -> None:
    task_id, run_id, _ = _setup(store)
    store.add_candidate(run_id, task_id, Candidate.from_source("a = 0"))
    batch = [Candidate.from_source(s) for s in ("a = 0", "b = 0", "c = 0", "b = 0")]
    out = store.add_candidates(run_id, task_id, batch, generation=1)
    assert [new for _, new in out] == [False, True, True, False]
    assert out[1][0] == out[3][0]
    assert [rec.digest for rec, _ in out] == [c.digest for c in batch]


def test_result_round_trips_every_field(store: Store) -> None:
    task_id, run_id, [cid, cid2] = _setup(store, 2)
    original = full_result()
    recorded = store.add_result(cid, run_id, original)
    minimal = EvalResult(status=Status.COMPILE_ERROR, reason="ptxas: too many registers")
    store.add_result(cid2, run_id, minimal)

    [read_back, read_minimal] = [sc.result for sc in store.history(run_id)]
    for got in (recorded.result, read_back):
        assert got == original
        assert got.to_json() == original.to_json()
        assert got.speedup == original.speedup
    assert read_minimal == minimal and read_minimal.to_json() == minimal.to_json()


def test_add_result_is_idempotent_per_candidate_and_device(store: Store) -> None:
    task_id, run_id, [cid] = _setup(store, 1)
    first = store.add_result(cid, run_id, ok_result(2.0), worker_s=1.5)
    repeat = store.add_result(cid, run_id, ok_result(9.0), worker_s=1.5)
    on_cpu = store.add_result(cid, run_id, ok_result(0.5, device=CPU), worker_s=1.5)

    assert repeat == first and repeat.speedup == pytest.approx(2.0)
    assert on_cpu.id != first.id and on_cpu.result.device == CPU
    run = store.get_run(run_id)
    # One candidate, finished once in this run however many verdicts; every call's worker time is counted.
    assert run.evaluated == 1 and run.worker_s == pytest.approx(4.5)
    [scored] = store.history(run_id, device=CPU.name)
    assert scored.evaluation == on_cpu


def test_evaluated_counts_a_re_measure_of_a_stored_kernel(store: Store) -> None:
    """The run's record, its totals and its queue agree: a run that re-measures a kernel another run already
    measured on the same device evaluated it (the store keeps the first verdict). Before store revision 0006 the
    run's record counted new verdict rows only, and said 0 here while its queue said 1."""
    task_id, first_run, [cid] = _setup(store, 1)
    store.add_result(cid, first_run, ok_result(2.0), worker_s=1.0)
    second_run = store.create_run(task_id, {}, {"max_candidates": 1}).id
    store.enqueue(second_run, [cid])
    [claimed] = store.claim_pending(second_run, 1)
    again = store.add_result(claimed.id, second_run, ok_result(5.0), worker_s=2.0)

    assert again.run_id == first_run and again.speedup == pytest.approx(2.0)  # the first verdict is kept
    run, totals = store.get_run(second_run), store.run_totals(second_run)
    assert run.evaluated == totals.evaluated == totals.queue[QueueState.DONE.value] == 1
    assert run.worker_s == pytest.approx(2.0)
    assert store.get_run(first_run).evaluated == 1


def test_top_k_orders_correct_results_by_speedup(store: Store) -> None:
    task_id, run_id, ids = _setup(store, 7)
    speedups = [1.5, 3.0, 0.8, 3.0, 2.2]
    for cid, s in zip(ids, speedups):
        store.add_result(cid, run_id, ok_result(s))
    store.add_result(ids[5], run_id, failed_result(Status.INCORRECT))
    store.add_result(ids[6], run_id, ok_result(50.0, device=CPU))  # fastest, but on another device
    store.add_result(ids[2], run_id, ok_result(40.0, device=CPU))  # a second device for one candidate

    top = store.top_k(task_id, 4, device=H100.name)
    assert [sc.candidate.id for sc in top] == [ids[3], ids[1], ids[4], ids[0]]  # ties: latest evaluated first
    assert [sc.speedup for sc in top] == pytest.approx([3.0, 3.0, 2.2, 1.5])
    assert all(sc.evaluation.result.device == H100 for sc in top)

    every = store.top_k(task_id, 100)
    assert [sc.candidate.id for sc in every] == [ids[6], ids[2], ids[3], ids[1], ids[4], ids[0]]  # each once
    assert store.top_k(task_id, 0) == []
    assert store.top_k(store.add_task(make_task(body="# empty\n")).id, 5) == []


def test_history_is_in_creation_order_with_pending_candidates(store: Store) -> None:
    task_id, run_id, ids = _setup(store, 4)
    store.add_result(ids[2], run_id, ok_result(1.2))
    store.add_result(ids[0], run_id, failed_result(Status.TIMEOUT))
    second = store.create_run(task_id, {}, {}).id
    [(rediscovered, new)] = store.add_candidates(second, task_id, [Candidate.from_source("x = 1")])
    store.enqueue(second, rediscovered.id)

    hist = store.history(run_id)
    assert [sc.candidate.id for sc in hist] == ids
    assert [None if sc.result is None else sc.result.status for sc in hist] == [Status.TIMEOUT, None, Status.OK, None]
    assert not new and [sc.candidate.id for sc in store.history(second)] == [ids[1]]


def test_claim_hands_out_each_queued_item_once_in_order(store: Store) -> None:
    _, run_id, ids = _setup(store, 5)
    assert store.enqueue(run_id, ids) == 5
    assert store.enqueue(run_id, ids[0]) == 0
    first = store.claim_pending(run_id, 2)
    rest = store.claim_pending(run_id, 10)
    assert [c.id for c in first] == ids[:2] and [c.id for c in rest] == ids[2:]
    assert store.claim_pending(run_id, 10) == []
    assert store.run_totals(run_id).queue == {QueueState.RUNNING.value: 5}


def test_resume_requeues_in_flight_evaluations(store: Store, db_url: str) -> None:
    task_id, run_id, ids = _setup(store, 5)
    store.enqueue(run_id, ids)
    claimed = [c.id for c in store.claim_pending(run_id, 3)]
    store.add_result(claimed[0], run_id, ok_result(1.1))  # finished before the crash
    store.close()  # the driver dies with claimed[1:] in flight

    with get_store(db_url) as resumed:
        assert resumed.requeue_in_flight(run_id) == 2
        assert resumed.requeue_in_flight(run_id) == 0
        again = [c.id for c in resumed.claim_pending(run_id, 10)]
        assert again == [ids[1], ids[2], ids[3], ids[4]]
        assert resumed.run_totals(run_id).queue == {"done": 1, "running": 4}
        assert [sc.evaluation is not None for sc in resumed.history(run_id)] == [True, False, False, False, False]


def test_add_result_closes_the_queue_item(store: Store) -> None:
    _, run_id, ids = _setup(store, 2)
    store.enqueue(run_id, ids)
    [claimed] = store.claim_pending(run_id, 1)
    store.add_result(claimed.id, run_id, failed_result(Status.CRASHED))
    assert store.run_totals(run_id).queue == {"done": 1, "queued": 1}
    assert store.requeue_in_flight(run_id) == 0


def test_run_totals_count_statuses_and_best_speedup(store: Store) -> None:
    _, run_id, ids = _setup(store, 5)
    results = [ok_result(1.5), ok_result(2.5), failed_result(), failed_result(), failed_result(Status.TIMEOUT)]
    for cid, res in zip(ids, results):
        store.add_result(cid, run_id, res, worker_s=0.25)
    store.record_llm_call(run_id, "coder", "gpt-x", "prompt", "reply", tokens_in=100, tokens_out=20, cost_usd=0.01)
    totals = store.run_totals(run_id)
    assert totals.evaluated == 5
    assert dict(totals.by_status) == {"ok": 2, "incorrect": 2, "timeout": 1}
    assert totals.best_speedup == pytest.approx(2.5)
    assert totals.worker_s == pytest.approx(1.25) and totals.cost_usd == pytest.approx(0.01)


def test_runs_are_listed_and_change_status(store: Store) -> None:
    task_id, run_id, _ = _setup(store)
    other = store.create_run(task_id, {"k": [1, 2]}, {"max_usd": 5.0})
    assert [r.id for r in store.list_runs()] == [run_id, other.id]
    assert [r.id for r in store.list_runs(task_id=task_id + 100)] == []
    assert store.get_run(other.id).config == {"k": [1, 2]} and other.budget == {"max_usd": 5.0}
    before = store.get_run(run_id)
    after = store.set_run_status(run_id, "interrupted")
    assert before.status == RunStatus.RUNNING and after.status == RunStatus.INTERRUPTED
    assert after.updated_at >= before.updated_at and store.get_run(run_id) == after
    with pytest.raises(StoreError, match="not a run status"):
        store.set_run_status(run_id, "paused")


def test_unknown_ids_raise_store_errors(store: Store) -> None:
    task_id, run_id, _ = _setup(store)
    with pytest.raises(StoreError, match="no run with id 999"):
        store.get_run(999)
    with pytest.raises(StoreError, match="no task with id 999"):
        store.create_run(999, {}, {})
    with pytest.raises(StoreError, match="no candidate with id 999"):
        store.add_result(999, run_id, ok_result(1.0))
    with pytest.raises(StoreError, match="refused a write"):
        store.add_candidate(run_id, 999, Candidate.from_source("z = 0"))


def test_llm_calls_are_recorded_and_charged_to_the_run(store: Store) -> None:
    task_id, run_id, [cid] = _setup(store, 1)
    call = store.record_llm_call(run_id, "judge", "model-a", "Is it right?", "Yes.", tokens_in=12, tokens_out=3,
                                 latency_s=0.75, cost_usd=0.002, candidate_id=cid)
    store.record_llm_call(None, "coder", "model-b", "p", "r", cost_usd=1.0)  # outside any run
    assert (call.role, call.model, call.prompt, call.reply) == ("judge", "model-a", "Is it right?", "Yes.")
    assert (call.tokens_in, call.tokens_out, call.latency_s, call.candidate_id) == (12, 3, 0.75, cid)
    assert store.get_run(run_id).cost_usd == pytest.approx(0.002)


def test_llm_calls_are_linked_by_digest_once_their_candidate_is_stored(store: Store) -> None:
    task_id, run_id, [seed_id] = _setup(store, 1)
    child = Candidate.from_source("y = 2", origin="llm:m")
    wrote = store.record_llm_call(run_id, "coder:refine", "m", "p", "r", tokens_in=100, tokens_out=40,
                                  cost_usd=0.003, candidate_digest=child.digest, attempts=2)
    judged = store.record_llm_call(run_id, "judge:repair", "j", "p", "r", tokens_in=50, tokens_out=5,
                                   cost_usd=0.001, candidate_digest=store.get_candidate(seed_id).digest)
    failed = store.record_llm_call(run_id, "coder:refine", "m", "p", "", outcome="error",
                                   problem="failed after 3 attempts", attempts=3)
    assert wrote.candidate_id is None and judged.candidate_id == seed_id  # the seed is stored already
    [(record, new)] = store.add_candidates(run_id, task_id, [child], generation=1, island=0)
    assert new
    calls = store.llm_calls(run_id)
    assert [c.id for c in calls] == [wrote.id, judged.id, failed.id]
    assert calls[0].candidate_id == record.id and calls[0].attempts == 2
    assert (calls[2].outcome, calls[2].problem, calls[2].candidate_id) == ("error", "failed after 3 attempts", None)
    assert [c.id for c in store.llm_calls(run_id, record.id)] == [wrote.id]
    run = store.get_run(run_id)
    assert (run.tokens_in, run.tokens_out) == (150, 45) and run.cost_usd == pytest.approx(0.004)
    usage = {u.role: u for u in store.llm_usage(run_id)}
    assert usage["coder:refine"].calls == 2 and dict(usage["coder:refine"].by_outcome) == {"error": 1, "ok": 1}
    assert usage["judge:repair"].cost_usd == pytest.approx(0.001) and usage["judge:repair"].tokens_in == 50


def test_wall_time_adds_up_over_invocations(store: Store) -> None:
    _, run_id, _ = _setup(store, 1)
    store.add_wall_time(run_id, 1.5)
    store.add_wall_time(run_id, 2.0)
    store.add_wall_time(run_id, -5.0)  # a clock that went backwards adds nothing
    assert store.get_run(run_id).wall_s == pytest.approx(3.5)


def test_confirmations_are_kept_apart_and_decide_the_run_best(store: Store) -> None:
    _, run_id, ids = _setup(store, 2)
    store.add_result(ids[0], run_id, ok_result(3.0))  # measured lucky
    store.add_result(ids[1], run_id, ok_result(1.5))
    assert store.run_totals(run_id).best_speedup == pytest.approx(3.0)  # before confirmation: as measured
    for cid, res in [(ids[0], ok_result(1.1)), (ids[1], ok_result(1.4)), (ids[0], ok_result(1.2)),
                     (ids[1], failed_result()), (ids[0], ok_result(1.0))]:
        store.add_confirmation(run_id, cid, res, worker_s=0.5)
    records = store.confirmations(run_id)
    assert [r.candidate_id for r in records] == [ids[0], ids[1], ids[0], ids[1], ids[0]]
    assert records[3].status == Status.INCORRECT and records[3].speedup is None
    confirmed = store.confirmed(run_id)
    assert confirmed[ids[0]].speedup == pytest.approx(1.1)   # the median of its re-measurements alone
    assert confirmed[ids[1]].speedup is None                 # one re-measurement came back incorrect
    assert store.history(run_id)[0].speedup == pytest.approx(3.0)  # the verdict is kept as measured
    totals = store.run_totals(run_id)
    assert totals.best_speedup == pytest.approx(1.1) and totals.worker_s == pytest.approx(2.5)
    with pytest.raises(StoreError):
        store.add_confirmation(run_id + 99, ids[0], ok_result(1.0))
