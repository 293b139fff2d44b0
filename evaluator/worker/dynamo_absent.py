"""A candidate zygote without `torch._dynamo`, and the typed signal that sends its candidate to one that has it.

A cold `opforge eval` of a native kernel starts its candidate's zygote without dynamo (0.8 s of the critical path;
`warm_start.may_need_dynamo`). Something may reach for it after all (a candidate's `torch.compile`, a library's lazy
import): the finder below refuses the import at once, before any of dynamo's code runs, and records that it did. The
worker then answers any failure with the status `needs_dynamo` (`mark`), and the driver evaluates the candidate again
in a zygote with dynamo. The signal is a status, never text: a candidate writes its own exceptions' messages and its
log, and could otherwise make any failure look like this one, or hide it. It runs in the candidate's process, so a
candidate can forge it too; that buys nothing but the second evaluation, which is the ordinary one, and a worker in a
zygote with dynamo that sends it is refused (`connection.py`).
"""

from __future__ import annotations

import sys
from typing import Any

from evaluator.result import Status

MESSAGE = "torch._dynamo is not loaded in this worker (opforge: evaluated again in one that has it)"
# A list, appended to: rebinding a name of a module the guards watch would read as tampering (`guards.worker_modules`).
_REACHED: list[str] = []
# Failures that may come of a refused import (not `task_error`: the task loads before any candidate code runs).
_FAILURES = frozenset({Status.COMPILE_ERROR.value, Status.RUNTIME_ERROR.value, Status.REJECTED.value,
                       Status.INCORRECT.value})


class DynamoAbsent(ImportError):
    """The import of `torch._dynamo` refused in a worker whose zygote went without it."""


class _Finder:
    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "torch._dynamo" or name.startswith("torch._dynamo."):
            _REACHED.append(name)
            raise DynamoAbsent(MESSAGE)
        return None


def install() -> None:
    """Refuse `torch._dynamo` in this process from now on (a candidate zygote's warm imports, before any fork)."""
    sys.meta_path.insert(0, _Finder())


def reached() -> bool:
    """Whether anything in this process tried to import `torch._dynamo` since `install`."""
    return bool(_REACHED)


def mark(reply: dict[str, Any]) -> dict[str, Any]:
    """A worker's reply as sent: a failure after something reached for dynamo becomes `needs_dynamo`, whatever the
    failure said (the candidate may have caught the ImportError and failed otherwise)."""
    if not _REACHED or reply.get("status") not in _FAILURES:
        return reply
    return {**reply, "status": Status.NEEDS_DYNAMO.value,
            "reason": f"reached for torch._dynamo ({_REACHED[0]}), which this worker went without; "
                      f"then: {reply.get('reason', reply.get('status'))}"}
