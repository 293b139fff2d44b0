"""How a worker's reply header is read (`replies.parse`): each field once, by type, within its bound, and nothing
left unread; the bounds themselves. A header comes from the candidate's process, so nothing here trusts a value."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_REASON_CHARS = 20_000
MAX_LOG_CHARS = 1_000_000
MAX_NAME_CHARS = 10_000  # an op's, a kernel's (a C++ template's can run long), a metric's name, a note, a value
MAX_ITEMS = 100_000  # entries of a list or mapping (ops, kernels, layouts, metrics)
MAX_COUNT = 2**62  # launches, calls, bytes, threads
_ENVELOPE = frozenset({"status", "nonce"})  # the channel's own fields (wire.py) and the kind


class MalformedReply(ValueError):
    """A reply that is not one of the declared kinds, or a field that does not fit its kind: one sentence."""


def shown(value: object) -> str:
    return repr(value)[:40]


class Fields:
    """The fields of one header, each read once by type; `done` refuses any left unread."""

    def __init__(self, status: str, header: Mapping[str, Any]):
        self.status, self.header = status, header
        self.unread = set(header) - _ENVELOPE

    def _take(self, name: str) -> Any:
        self.unread.discard(name)
        return self.header.get(name)

    def _bad(self, name: str, what: str) -> MalformedReply:
        return MalformedReply(f"a {self.status!r} reply whose {name!r} is {what}")

    def done(self) -> None:
        if self.unread:
            raise MalformedReply(f"a {self.status!r} reply with unknown field {shown(sorted(self.unread)[0])}")

    def count(self, name: str, default: int | None = None, required: bool = False) -> int | None:
        if name not in self.header and required:
            raise self._bad(name, "missing")
        value = self._take(name)
        if value is None and not required:
            return default
        return self._int(name, value)

    def required_count(self, name: str) -> int:
        value = self.count(name, required=True)
        assert value is not None
        return value

    def _int(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise self._bad(name, f"not a count ({shown(value)})")
        return value

    def ms(self, name: str, default: float | None = None) -> float:
        if name not in self.header and default is None:
            raise self._bad(name, "missing")
        value = self._take(name)
        if value is None and default is not None:
            return default
        return self._finite(name, value)

    def _finite(self, name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self._bad(name, f"not a finite number ({shown(value)})")
        return float(value)

    def flag(self, name: str) -> bool:
        value = self._take(name)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise self._bad(name, f"not true or false ({shown(value)})")
        return value

    def text(self, name: str, limit: int) -> str:
        value = self._take(name)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._bad(name, f"not a string ({shown(value)})")
        if len(value) > limit:
            raise self._bad(name, f"longer than {limit} characters ({len(value)})")
        return value

    def _list(self, name: str, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise self._bad(name, f"not a list ({shown(value)})")
        if len(value) > MAX_ITEMS:
            raise self._bad(name, f"a list of more than {MAX_ITEMS} entries")
        return value

    def _name(self, name: str, value: Any) -> str:
        if not isinstance(value, str) or len(value) > MAX_NAME_CHARS:
            raise self._bad(name, f"not a list of names of at most {MAX_NAME_CHARS} characters ({shown(value)})")
        return value

    def names(self, name: str) -> tuple[str, ...] | None:
        value = self._take(name)
        return None if value is None else tuple(self._name(name, v) for v in self._list(name, value))

    def records(self, name: str) -> tuple[Mapping[str, Any], ...] | None:
        """A list of JSON objects (layouts, descriptions), each judged by its own reader."""
        value = self._take(name)
        if value is None:
            return None
        items = self._list(name, value)
        if not all(isinstance(v, dict) for v in items):
            raise self._bad(name, "not a list of objects")
        return tuple(items)

    def _mapping(self, name: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self._bad(name, f"not an object ({shown(value)})")
        if len(value) > MAX_ITEMS:
            raise self._bad(name, f"an object of more than {MAX_ITEMS} entries")
        for k in value:
            self._name(name, k)
        return value

    def record(self, name: str) -> Mapping[str, Any] | None:
        value = self._take(name)
        return None if value is None else self._mapping(name, value)

    def counts(self, name: str) -> dict[str, int] | None:
        value = self._take(name)
        return None if value is None else {k: self._int(name, v) for k, v in self._mapping(name, value).items()}

    def numbers(self, name: str) -> dict[str, float] | None:
        value = self._take(name)
        return None if value is None else {k: self._finite(name, v) for k, v in self._mapping(name, value).items()}

    def labels(self, name: str) -> dict[str, str] | None:
        value = self._take(name)
        return None if value is None else self.label_map(name, value)

    def label_map(self, name: str, value: Any) -> dict[str, str]:
        return {k: self._name(name, v) for k, v in self._mapping(name, value).items()}
