"""Who may write: every write (submit, cancel) needs the server's token, `$OPFORGE_TOKEN`; reads are open.

Submitting a task is running code on the workers' GPUs, so without a configured token writes are refused outright,
never allowed. The API takes the token as `Authorization: Bearer TOKEN`; the pages' forms as a password field. The
comparison takes the same time whatever the guess (hmac.compare_digest).
"""

from __future__ import annotations

import hmac

TOKEN_ENV = "OPFORGE_TOKEN"
DISABLED = f"Submissions are disabled on this server: set {TOKEN_ENV} to enable submissions (and cancels)."


class WriteRefused(Exception):
    """401 (no token given) or 403 (wrong token, or none configured); the message says which."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_token(expected: str | None, given: str | None, how: str = "an Authorization: Bearer header") -> None:
    """Return when `given` is the server's token; raise WriteRefused otherwise."""
    if not expected:
        raise WriteRefused(403, DISABLED)
    if not given:
        raise WriteRefused(401, f"This is a write: give the server's token ({TOKEN_ENV}) in {how}.")
    if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise WriteRefused(403, f"The token is wrong: give the server's {TOKEN_ENV}.")
