"""Errors every layer of opforge may raise for bad input; the CLI prints them as one sentence (exit status 2)."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user: one readable sentence, exit status 2."""
