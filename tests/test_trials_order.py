"""The correctness trials' order of work (`evaluator/verify/trials.py`): the reference runs one trial ahead of the candidate,
the candidate is asked exactly what it was asked before, and a trial is judged before any later one."""

from __future__ import annotations

import math
from collections import deque
from typing import Any, Callable

import torch

from evaluator.wire.commands import Run
from evaluator.config import EvalConfig
from evaluator.verify.trials import plan, run_trials
from evaluator.wire.replies import Ran


def _outputs(cmd: Run) -> list[torch.Tensor]:
    """What the task computes on a run's inputs: non-finite at the first large magnitude (it leaves the domain)."""
    if cmd.distribution == "large" and (cmd.scale or 0) > 1e4:  # drawn around 1e5 (probes.drawn_scale)
        return [torch.full((4,), math.inf)]
    return [torch.full((4,), float(cmd.seed % 1000) + (cmd.scale or 0.0))]


class FakeWorker:
    """A worker connection answering its requests in order; `events` records each request sent and reply read."""

    def __init__(self, role: str, events: list[tuple[str, str, Run]], answer: Callable[[Run], list[torch.Tensor]]):
        self.role, self.events, self.answer = role, events, answer
        self.pending: deque[Run] = deque()

    def ask(self, cmd: Run) -> None:
        self.events.append((self.role, "ask", cmd))
        self.pending.append(cmd)

    def recv(self, timeout_s: float, doing: str) -> tuple[Ran, list[torch.Tensor]]:
        cmd = self.pending.popleft()
        self.events.append((self.role, "recv", cmd))
        reply = Ran(ops=("softmax",)) if self.role == "reference" else Ran(launches=1, kernels={"cpp:k": 1})
        return reply, self.answer(cmd)

    def recv_as(self, kind: type[Any], timeout_s: float, doing: str) -> tuple[Ran, list[torch.Tensor]]:
        assert kind is Ran
        return self.recv(timeout_s, doing)

    def request_as(self, cmd: Run, kind: type[Any], timeout_s: float, doing: str) -> tuple[Ran, list[torch.Tensor]]:
        self.ask(cmd)
        return self.recv_as(kind, timeout_s, doing)


def _run(candidate_answer: Callable[[Run], list[torch.Tensor]] = _outputs, variants: int = 2):
    events: list[tuple[str, str, Run]] = []
    ref, cand = FakeWorker("reference", events, _outputs), FakeWorker("candidate", events, candidate_answer)
    trials = plan(EvalConfig(), variants)
    checked = run_trials(ref, cand, EvalConfig(), trials, None)  # type: ignore[arg-type]
    return checked, trials, events, ref, cand


def test_the_reference_runs_one_trial_ahead_and_the_candidate_is_asked_as_before():
    checked, trials, events, ref, cand = _run()
    assert checked.failure is None and len(checked.trials) == len(trials)
    cand_asked = [cmd for role, what, cmd in events if role == "candidate" and what == "ask"]
    # One command per trial, in the plan's order; the large-magnitude trial at the magnitude that stayed finite.
    assert [(c.variant, c.distribution) for c in cand_asked] == [(t.variant, t.distribution) for t in trials]
    smalls = [c.scale for c in cand_asked if c.distribution == "large"]  # the two large trials', redrawn smaller
    assert len(smalls) == 2 and all(s is not None and 1e3 / 3 <= s <= 3e3 for s in smalls)  # drawn around 1e3
    ref_asked = [cmd for role, what, cmd in events if role == "reference" and what == "ask"]
    large_asked = [c.scale for c in ref_asked if c.distribution == "large"]
    bigs = [s for s in large_asked if s not in smalls]
    assert len(bigs) == 2 and all(s is not None and 1e5 / 3 <= s <= 3e5 for s in bigs)
    first_sent = [c for c in ref_asked if not (c.distribution == "large" and c.scale in smalls)]  # one per trial
    assert len(first_sent) == len(trials)
    for i, asked in enumerate(cand_asked[:-1]):
        # Before the driver reads the candidate's reply to a trial, the reference has the next trial's run.
        assert events.index(("reference", "ask", first_sent[i + 1])) < events.index(("candidate", "recv", asked))
    # Never more than one trial outstanding in the reference: a redraw is asked before the run ahead.
    outstanding = 0
    for role, what, _ in events:
        if role == "reference":
            outstanding += 1 if what == "ask" else -1
            assert outstanding <= 1
    assert not ref.pending and not cand.pending  # nothing left unread after the last trial


def test_each_trial_is_judged_before_any_later_one():
    answered: list[Run] = []

    def wrong_at_second(cmd: Run) -> list[torch.Tensor]:
        answered.append(cmd)
        out = _outputs(cmd)
        return [out[0] + 1.0] if len(answered) == 2 else out

    checked, trials, events, ref, cand = _run(wrong_at_second)
    assert checked.failure is not None and checked.failure.startswith("trial 2 ")
    assert [r.get("ok") for r in checked.trials] == [True, False]
    assert len([e for e in events if e[0] == "candidate" and e[1] == "ask"]) == 2  # never asked the third
    # The failure was judged again against the float64 reference (`exact_reference.py`): the third trial's run,
    # asked ahead, was read before that answer, and nothing is left unread
    assert [cmd.exact for role, what, cmd in events if role == "reference" and what == "ask"][-1] is True
    assert not ref.pending


def test_a_first_trial_asked_ahead_is_read_and_not_asked_again():
    # A cold evaluation asks the reference's first trial before the candidate has loaded (`ask_first_trial`).
    from evaluator.verify.trials import ask_first_trial

    events: list[tuple[str, str, Run]] = []
    ref, cand = FakeWorker("reference", events, _outputs), FakeWorker("candidate", events, _outputs)
    trials = plan(EvalConfig(), 1)
    asked = ask_first_trial(ref, trials)  # type: ignore[arg-type]
    assert events == [("reference", "ask", asked.runs[0])] and not cand.pending
    checked = run_trials(ref, cand, EvalConfig(), asked, None)  # type: ignore[arg-type]
    assert checked.failure is None and len(checked.trials) == len(trials)
    ref_asked = [cmd for role, what, cmd in events if role == "reference" and what == "ask"]
    assert ref_asked.count(asked.runs[0]) == 1  # the first run is not asked twice
    cand_asked = [cmd for role, what, cmd in events if role == "candidate" and what == "ask"]
    assert cand_asked[0] == asked.runs[0]  # and the candidate gets the very run the reference computed
    assert not ref.pending and not cand.pending


def test_a_failure_the_exact_answer_overturns_continues_with_the_run_ahead_read_first():
    # The reference's float32 answer is off at the second trial; its float64 answer is the candidate's, so the
    # trial passes and the next one is judged on the reply that was read (and kept) before the float64 one.
    seen: list[Run] = []

    def reference(cmd: Run) -> list[torch.Tensor]:
        out = _outputs(cmd)
        if cmd.exact:
            return [out[0].double()]
        seen.append(cmd)
        return [out[0] + 5.0] if len(seen) == 2 else out

    events: list[tuple[str, str, Run]] = []
    ref, cand = FakeWorker("reference", events, reference), FakeWorker("candidate", events, _outputs)
    trials = plan(EvalConfig(), 2)
    checked = run_trials(ref, cand, EvalConfig(), trials, None)  # type: ignore[arg-type]
    assert checked.failure is None and len(checked.trials) == len(trials)
    assert [r.get("exact") for r in checked.trials][:3] == [None, True, None]
    assert not ref.pending and not cand.pending


def test_a_timed_recheck_the_exact_answer_overturns_goes_on_to_the_later_calls():
    from evaluator.verify.trials import recheck_timed

    def reference(cmd: Run) -> list[torch.Tensor]:
        out = _outputs(cmd)
        if cmd.exact:
            return [out[0].double()]
        return [out[0] + 5.0] if cmd.seed == 11 else out

    events: list[tuple[str, str, Run]] = []
    ref = FakeWorker("reference", events, reference)
    kept = [(seed, _outputs(Run(variant=0, seed=seed))) for seed in (11, 12, 13)]
    assert recheck_timed(ref, kept, EvalConfig(), None) is None  # type: ignore[arg-type]
    assert not ref.pending
    wrong = [(12, [kept[1][1][0] + 5.0]), (13, kept[2][1])]
    found = recheck_timed(ref, kept[:1] + wrong, EvalConfig(), None)  # type: ignore[arg-type]
    assert found is not None and "exact (float64) answer" in found and not ref.pending
