"""USD per million tokens (input, output) for a few well-known models, and the cost of one call.

The defaults are list prices as published by the vendors when this table was written; they change, so pass your
own table (`OpenAIClient(prices={...})`) for anything that matters. A model missing from the table costs 0.0:
`price_for` returns None so callers can tell "free" from "unknown".
"""

from __future__ import annotations

from collections.abc import Mapping

Price = tuple[float, float]  # (USD per 1M input tokens, USD per 1M output tokens)

DEFAULT_PRICES_USD_PER_MTOK: dict[str, Price] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}


def price_for(model: str, table: Mapping[str, Price]) -> Price | None:
    """The exact entry, else the longest entry that `model` extends with a dated suffix ("gpt-4o-2024-08-06")."""
    if model in table:
        return table[model]
    stems = [k for k in table if model.startswith(k + "-") and model[len(k) + 1 : len(k) + 2].isdigit()]
    return table[max(stems, key=len)] if stems else None


def cost_usd(model: str, tokens_in: int, tokens_out: int, table: Mapping[str, Price]) -> float:
    """Cost of one call; 0.0 for a model the table does not know."""
    price = price_for(model, table)
    if price is None:
        return 0.0
    return (tokens_in * price[0] + tokens_out * price[1]) / 1_000_000
