"""The one exception the store raises; its message is one readable sentence meant for the user."""

from __future__ import annotations


class StoreError(Exception):
    """A database that cannot be opened or used: bad URL, unreachable server, old schema, unknown id."""
