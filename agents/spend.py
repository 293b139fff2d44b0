"""What a run has spent on LLM calls, against its limits in dollars and tokens; shared by the proposer's thread
(which adds every completion) and the run loop (which stops when a limit is reached)."""

from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpendLimits:
    max_usd: float | None = None
    max_tokens: int | None = None  # input and output tokens together

    def __post_init__(self) -> None:
        if self.max_usd is not None and not self.max_usd > 0:
            raise ValueError(f"a dollar budget must be positive, not {self.max_usd}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"a token budget must be positive, not {self.max_tokens}")


class Spend:
    """Running totals (starting from what the store says a resumed run spent already) and their limits."""

    def __init__(self, limits: SpendLimits = SpendLimits(), usd: float = 0.0, tokens_in: int = 0,
                 tokens_out: int = 0) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._usd, self._tokens_in, self._tokens_out, self._calls = usd, tokens_in, tokens_out, 0

    def add(self, usd: float, tokens_in: int, tokens_out: int) -> None:
        with self._lock:
            self._usd += usd
            self._tokens_in += tokens_in
            self._tokens_out += tokens_out
            self._calls += 1

    @property
    def usd(self) -> float:
        return self._usd

    @property
    def tokens(self) -> int:
        return self._tokens_in + self._tokens_out

    @property
    def calls(self) -> int:
        """Calls added in this process (a resumed run's earlier calls are in the totals, not here)."""
        return self._calls

    def exhausted(self) -> str | None:
        """Why no further call may be made, or None while both budgets have room."""
        lim = self.limits
        if lim.max_usd is not None and self._usd >= lim.max_usd:
            return f"spent the LLM budget of ${lim.max_usd:g} (${self._usd:.4f})"
        if lim.max_tokens is not None and self.tokens >= lim.max_tokens:
            return f"spent the LLM budget of {lim.max_tokens} tokens ({self.tokens})"
        return None
