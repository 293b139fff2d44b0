"""A candidate: Python source defining `ModelNew`, with where it came from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evaluator.task import source_digest


class CandidateFileError(Exception):
    """A candidate file that cannot be read at all (missing, not text)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    source: str
    digest: str
    origin: str = "human"              # seed | tune | llm:<model> | human | import
    parents: tuple[str, ...] = ()      # digests of the parents
    note: str = ""                     # the mutation or plan that produced it

    @staticmethod
    def from_source(source: str, origin: str = "human", parents: tuple[str, ...] = (), note: str = "") -> "Candidate":
        return Candidate(source=source, digest=source_digest(source), origin=origin, parents=parents, note=note)


def load_candidate(path: str | Path, origin: str = "human") -> Candidate:
    p = Path(path)
    if not p.is_file():
        raise CandidateFileError(f"{p}: no such candidate file.")
    try:
        return Candidate.from_source(p.read_text(encoding="utf-8"), origin=origin)
    except UnicodeDecodeError:
        raise CandidateFileError(f"{p}: cannot be read as UTF-8 text.") from None
