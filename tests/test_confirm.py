"""Before a run reports its best, its fastest candidates are re-measured (opforge/run/confirm.py): a kernel that
measured lucky once is not reported as the best, the re-measurements are stored records of their own, and a resumed
run does not take them again. Driven by a scripted runner (a seam): each candidate's measurements are given in order."""

from __future__ import annotations

import io
from collections import Counter
from concurrent.futures import Future
from pathlib import Path

import pytest

from agents.tuner import TuneProposer
from benchmarks import builtin_task, seed_for
from evaluator import Candidate, EvalConfig, EvalResult, Status, Task, load_candidate, load_task
from evaluator.result import DeviceInfo, Timing
from opforge.reports.run_summary import run_report
from opforge.run.config import RunConfig
from opforge.run.launch import search_for_run
from opforge.run.confirm import Confirmation, ConfirmPolicy, confirmation_owed, reserve_s
from opforge.run.population import Member
from opforge.run.progress import ProgressPrinter
from opforge.run.proposals import Proposing
from opforge.run.search import Search, SearchSettings
from opforge.run.start import Budget, start_run
from store import RunStatus, get_store

TASK = Path(__file__).parent / "tasks" / "relu.py"
FAKE_DEVICE = DeviceInfo(kind="cpu", name="fake")
STEADY = 1.2   # every honest candidate's speedup, measured the same each time
LUCKY = 1.7    # what the lucky candidate measured once, in the search
TRUE = 1.0     # what it measures every time after


def verdict(speedup: float, status: Status = Status.OK, reference_ms: float = 1.0) -> EvalResult:
    return EvalResult(status, "scripted", candidate_ms=Timing(reference_ms / speedup, 0.0, 10),
                      reference_ms=Timing(reference_ms, 0.0, 10), device=FAKE_DEVICE)


class ScriptedRunner:
    """Instant verdicts in submission order: the `lucky`-th distinct candidate submitted measures LUCKY the first time
    and TRUE afterwards; every other measures STEADY plus a little per candidate (so the ranking is fixed)."""

    capacity = 2

    def __init__(self, lucky: int = 1, incorrect_on_remeasure: int | None = None) -> None:
        self.lucky, self.incorrect_on_remeasure = lucky, incorrect_on_remeasure
        self.order: list[str] = []
        self.submitted: Counter[str] = Counter()

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        if candidate.digest not in self.order:
            self.order.append(candidate.digest)
        index = self.order.index(candidate.digest)
        again = self.submitted[candidate.digest] > 0
        self.submitted[candidate.digest] += 1
        future: Future[EvalResult] = Future()
        if index == self.lucky:
            future.set_result(verdict(TRUE if again else LUCKY))
        elif again and index == self.incorrect_on_remeasure:
            future.set_result(EvalResult(Status.INCORRECT, "scripted: wrong on a re-run", device=FAKE_DEVICE))
        else:
            future.set_result(verdict(STEADY + 0.01 * index))
        return future

    def close(self) -> None:
        pass


@pytest.fixture
def setup(tmp_path):
    store = get_store(f"sqlite:///{tmp_path / 'runs.db'}")
    task = load_task(TASK)
    seed = load_candidate(seed_for(builtin_task("relu")), origin="seed")
    yield store, task, seed
    store.close()


def _search(store, task, run_id: int, runner, policy: ConfirmPolicy = ConfirmPolicy(top_n=3, repeats=2),
            **kw) -> Search:
    budget = Budget.from_json(store.get_run(run_id).budget)
    return Search(store, run_id, task, Proposing(TuneProposer(seed=1), oversample=4), runner,
                  SearchSettings(EvalConfig(), budget, confirm=policy), **kw)


def test_a_candidate_that_measured_lucky_is_not_reported_as_best(setup):
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(), Budget(5))
    runner = ScriptedRunner(lucky=1)
    stream = io.StringIO()
    outcome = _search(store, task, run.id, runner, on_progress=ProgressPrinter(stream, tty=False)).run()
    assert outcome.status == RunStatus.DONE and outcome.done == 5
    lucky = store.find_candidate(run.task_id, runner.order[1])
    measured = {sc.candidate.id: sc.speedup for sc in store.history(run.id)}
    assert measured[lucky.id] == pytest.approx(LUCKY)  # the search's figure is kept as it was measured
    assert max(measured.values()) == pytest.approx(LUCKY)  # ... and it was the search's best

    assert outcome.confirmed and outcome.best is not None
    assert outcome.best.candidate_id != lucky.id
    expected = STEADY + 0.01 * 4  # the fastest steady candidate (the last of five), re-measured at its own figure
    assert outcome.best.speedup == pytest.approx(expected)
    assert store.run_totals(run.id).best_speedup == pytest.approx(expected)
    report = run_report(store, run.id)
    assert report.winner is not None and report.winner.candidate_id == outcome.best.candidate_id
    assert report.confirmed[lucky.id].speedup == pytest.approx(TRUE)
    assert "median of 2 re-measurements" in report.confirmation_text(report.winner)
    assert "re-measured #" in stream.getvalue()

    records = store.confirmations(run.id)
    assert len(records) == 3 * 2 and len({r.candidate_id for r in records}) == 3
    assert runner.submitted[runner.order[1]] == 3  # once in the search, twice to confirm


def test_a_resumed_run_does_not_remeasure_what_the_store_holds(setup):
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(), Budget(4))
    first = ScriptedRunner(lucky=1)
    _search(store, task, run.id, first, policy=ConfirmPolicy(0, 0)).run()  # stopped before confirming
    assert confirmation_owed(store, run.id, ConfirmPolicy(3, 2))  # `optimize --resume` starts workers for it
    history = {sc.candidate.digest: sc.candidate.id for sc in store.history(run.id)}
    # one re-measurement was recorded before the stop
    store.add_confirmation(run.id, history[first.order[1]], verdict(TRUE))

    again = ScriptedRunner(lucky=1)
    again.order = list(first.order)
    again.submitted = Counter({d: 1 for d in first.order})
    outcome = _search(store, task, run.id, again).run()
    remeasured = again.submitted - Counter({d: 1 for d in first.order})
    assert sum(remeasured.values()) == 3 * 2 - 1  # the stored one is not taken again
    assert remeasured[first.order[1]] == 1
    assert outcome.best is not None and outcome.best.candidate_id != history[first.order[1]]

    third = ScriptedRunner()
    third.order = list(first.order)
    third.submitted = Counter({d: 1 for d in first.order})
    _search(store, task, run.id, third).run()
    assert third.submitted == Counter({d: 1 for d in first.order})  # nothing owed: nothing evaluated
    assert not confirmation_owed(store, run.id, ConfirmPolicy(3, 2))
    assert len(store.confirmations(run.id)) == 6


def test_a_kernel_wrong_on_a_re_run_is_not_reported_as_best(setup):
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(), Budget(4))
    runner = ScriptedRunner(lucky=-1, incorrect_on_remeasure=3)  # the fastest by measurement turns incorrect
    outcome = _search(store, task, run.id, runner).run()
    flaky = store.find_candidate(run.task_id, runner.order[3])
    assert outcome.best is not None and outcome.best.candidate_id != flaky.id
    assert outcome.best.speedup == pytest.approx(STEADY + 0.01 * 2)
    report = run_report(store, run.id)
    assert report.best[-1].candidate_id == flaky.id and "not confirmed" in report.confirmation_text(report.best[-1])


def _member(cid: int, speedup: float) -> Member:
    cand = Candidate.from_source(f"# kernel {cid}\n", origin="test")
    return Member(candidate=cand, candidate_id=cid, status=Status.OK, speedup=speedup)


def test_confirmation_asks_round_robin_and_only_for_the_top_n():
    members = [_member(1, 1.1), _member(2, 1.5), _member(3, 1.3), _member(4, 0.9)]
    confirmation = Confirmation(members, [], ConfirmPolicy(top_n=2, repeats=3))
    asked = [m.candidate_id for m in confirmation.ask()]
    assert asked == [2, 3, 2, 3, 2, 3]
    assert confirmation.ask() == [] and not confirmation.done
    confirmation.forget_asked()
    assert len(confirmation.ask()) == 6


def test_re_measurements_that_disagree_are_called_out(setup):
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(), Budget(2))
    _search(store, task, run.id, ScriptedRunner(lucky=-1), policy=ConfirmPolicy(0, 0)).run()
    steady, noisy = (sc.candidate.id for sc in store.history(run.id))
    for figure in (1.2, 1.21, 1.19):
        store.add_confirmation(run.id, steady, verdict(figure))
    for figure in (1.2, 1.7, 1.25):
        store.add_confirmation(run.id, noisy, verdict(figure))
    report = run_report(store, run.id)
    by_id = {m.candidate_id: m for m in report.best}
    assert by_id[noisy].speedup == pytest.approx(1.25) and "differ by 42%" in report.confirmation_text(by_id[noisy])
    assert "the machine did not move, the kernel's own time did" in report.confirmation_text(by_id[noisy])
    assert "differ" not in report.confirmation_text(by_id[steady])
    assert report.winner is not None and report.winner.candidate_id == noisy


def test_re_measurements_that_disagree_say_whether_the_reference_beside_them_moved(setup):
    """The issue's case: the same kernel at 1.44x, 2.05x, 1.45x while the reference held at 2.0 ms is the kernel's
    own time moving; the same spread with the reference moving alike is the machine."""
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(), Budget(2))
    _search(store, task, run.id, ScriptedRunner(lucky=-1), policy=ConfirmPolicy(0, 0)).run()
    kernel_moved, machine_moved = (sc.candidate.id for sc in store.history(run.id))
    for figure, ref_ms in ((1.44, 2.01), (2.05, 1.97), (1.45, 2.04)):
        store.add_confirmation(run.id, kernel_moved, verdict(figure, reference_ms=ref_ms))
    for figure, ref_ms in ((1.44, 2.0), (2.05, 2.9), (1.45, 2.0)):
        store.add_confirmation(run.id, machine_moved, verdict(figure, reference_ms=ref_ms))
    report = run_report(store, run.id)
    by_id = {m.candidate_id: m for m in report.best}
    kernel_text, machine_text = (report.confirmation_text(by_id[c]) for c in (kernel_moved, machine_moved))
    assert "held within 4%: the machine did not move" in kernel_text and "speed moved" not in kernel_text
    assert "moved by 45% too: this machine's speed moved" in machine_text and "did not move" not in machine_text


class FakeClock:
    """Seconds that pass only when a verdict is read: each evaluation takes `eval_s`, one at a time."""

    def __init__(self, eval_s: float) -> None:
        self.now_s, self.eval_s = 0.0, eval_s

    def __call__(self) -> float:
        return self.now_s


class SlowVerdicts(ScriptedRunner):
    """ScriptedRunner's verdicts, each costing the fake clock `eval_s` when it is read; one evaluation at a time."""

    capacity = 1

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(lucky=-1)
        self.clock = clock

    def submit(self, task: Task, candidate: Candidate, cfg: EvalConfig) -> Future[EvalResult]:
        done = super().submit(task, candidate, cfg)
        clock = self.clock

        class Timed(Future):  # type: ignore[type-arg]
            def result(self, timeout: float | None = None) -> EvalResult:
                clock.now_s += clock.eval_s
                return done.result()

        future = Timed()
        future.set_result(done.result())
        return future


def test_a_time_limit_leaves_room_for_the_confirmation(setup):
    """10 s evaluations, one at a time, a 200 s limit, 2 kernels x 3 re-measurements: the search stops 60 s early
    so that the confirmation ends near the limit; before, the search took the whole limit and the confirmation
    came on top (280 s)."""
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(), Budget(100, time_limit_s=200.0))
    clock = FakeClock(eval_s=10.0)
    outcome = _search(store, task, run.id, SlowVerdicts(clock), policy=ConfirmPolicy(2, 3), clock=clock).run()
    assert outcome.status == RunStatus.DONE and outcome.confirmed
    assert "keeping 60 s of it to confirm the best" in outcome.stop_reason
    assert len(store.confirmations(run.id)) == 6
    assert 190.0 <= clock.now_s <= 220.0  # the search's last evaluations in flight may end past its stop


def test_the_reserve_is_the_confirmations_waves_at_most_half_the_limit():
    policy = ConfirmPolicy(top_n=2, repeats=3)
    assert reserve_s(policy, capacity=2, walls_s=[4.0, 5.0, 100.0], time_limit_s=600.0) == 15.0  # 3 waves x median
    assert reserve_s(policy, capacity=2, walls_s=[], time_limit_s=600.0) == 0.0  # nothing measured yet
    assert reserve_s(ConfirmPolicy(0, 0), capacity=2, walls_s=[5.0], time_limit_s=600.0) == 0.0
    assert reserve_s(policy, capacity=1, walls_s=[50.0], time_limit_s=100.0) == 50.0  # 300 s wanted, half the limit


def test_confirm_zero_reports_the_searchs_own_figures(setup):
    store, task, seed = setup
    run = start_run(store, task, seed, RunConfig(confirm_repeats=0), Budget(3))
    outcome = search_for_run(store, store.get_run(run.id), task, ScriptedRunner(lucky=1)).run()
    assert outcome.status == RunStatus.DONE and not outcome.confirmed
    assert store.confirmations(run.id) == []
    assert outcome.best is not None and outcome.best.speedup == pytest.approx(LUCKY)  # the lucky figure, unconfirmed
