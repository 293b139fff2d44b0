"""What every proposer (the tuner, the LLM agents) is given and must return.

A proposer is async: `propose(task, parents, inspirations, n) -> list[Candidate]`. Parents and inspirations are
`Scored`: a candidate with its evaluator verdict (None while it waits to be measured), so an agent can diagnose a
failure or read a profile. An empty `parents` asks for a first kernel from the reference alone; a proposer that
cannot write one from scratch (the tuner) returns []. A proposer may return fewer candidates than asked for, never
raises for a bad reply (that is recorded), and may return extra cheap variants after the `n` it was asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from evaluator.candidate import Candidate
from evaluator.result import EvalResult, Status
from evaluator.task import Task


@dataclass(frozen=True, slots=True)
class Scored:
    candidate: Candidate
    result: EvalResult | None = None  # None: not measured yet
    task_name: str | None = None      # set when the kernel was written for another (related) task: the archive

    @property
    def digest(self) -> str:
        return self.candidate.digest

    @property
    def source(self) -> str:
        return self.candidate.source

    @property
    def correct(self) -> bool:
        return self.result is not None and self.result.status == Status.OK

    @property
    def speedup(self) -> float | None:
        return None if self.result is None else self.result.speedup


class Proposer(Protocol):
    async def propose(self, task: Task, parents: Sequence[Scored], inspirations: Sequence[Scored],
                      n: int) -> list[Candidate]: ...
