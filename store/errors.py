"""The store's exceptions; each message is one readable sentence meant for the user."""

from __future__ import annotations


class StoreError(Exception):
    """A database that cannot be opened or used: bad URL, unreachable server, old schema, unknown id."""


class UnknownId(StoreError):
    """The store has no row of this kind with this id (callers tell "not found" from other failures by type)."""

    def __init__(self, url: str, what: str, ident: int) -> None:
        super().__init__(f"The database {url} has no {what} with id {ident}.")
        self.what, self.ident = what, ident
