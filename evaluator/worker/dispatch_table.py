"""PyTorch's dispatch table as text, operator by operator: the snapshot a candidate's worker compares after its
calls (`guards.Guards.dispatcher_changed`), taken once in the zygote before it forks workers."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable

import torch

_DISPATCH_KEYS_IGNORED = ("Meta",)  # PyTorch registers meta (shape-only) kernels lazily: no data flows through them



@dataclass(frozen=True, slots=True)
class TableText:
    """A snapshot's texts laid end to end in one string, with where each operator's ends: a forked worker compares
    a dump with its span (`same`) without touching the snapshot's own strings, whose reference counts would copy
    their pages from the zygote (about 9 ms in its first whole comparison)."""

    names: tuple[str, ...]
    text: str
    ends: array  # of int64: operator i's text is text[ends[i - 1]:ends[i]]

    @staticmethod
    def of(table: dict[str, str]) -> TableText:
        ends = array("q")
        end = 0
        for part in table.values():
            end += len(part)
            ends.append(end)
        return TableText(tuple(table), "".join(table.values()), ends)


_primed_dispatch: list[tuple[dict[str, str], TableText]] = []
_primed_namespaces: list[frozenset[str]] = []


def prime_dispatch_snapshot() -> None:
    """Take the dispatch table's snapshot once in the zygote, before it forks workers: each worker then takes it
    over (and drops this module's reference) instead of spending ~50 ms on its own; so too the operators'
    namespaces that the dispatcher guard protects (~5 ms a worker)."""
    table = dispatch_table()
    _primed_dispatch[:] = [(table, TableText.of(table))]
    _primed_namespaces[:] = [namespaces(table)]


def take_primed_dispatch() -> tuple[dict[str, str], TableText] | None:
    return _primed_dispatch.pop() if _primed_dispatch else None


def existing_namespaces() -> frozenset[str]:
    """The namespaces of every operator registered: the zygote's (`prime_dispatch_snapshot`, taken over once), else
    the dispatcher's now."""
    if _primed_namespaces:
        return _primed_namespaces.pop()
    return namespaces(torch._C._dispatch_get_all_op_names())


def namespaces(op_names: Iterable[str]) -> frozenset[str]:
    return frozenset(name.split("::")[0] for name in op_names)


def dispatch_table() -> dict[str, str]:
    """Every operator's registered kernels, as PyTorch's dispatcher describes them, by operator name. The text itself
    is kept (about 4 MB, shared by the forked workers), not a digest: comparing it costs one string comparison an
    operator, where hashing it cost more than reading it (105 ms a pass against 45 ms)."""
    dump = torch._C._dispatch_dump
    return {name: dump(name) for name in torch._C._dispatch_get_all_op_names()}


dispatch_dump: Callable[[str], str] = torch._C._dispatch_dump


def without_meta(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(_DISPATCH_KEYS_IGNORED)]
