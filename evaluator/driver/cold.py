"""One evaluation from a cold process: `opforge eval`'s path, where nothing is warm and the wait is the product.

The candidate's zygote is launched before this process imports torch: its start is a cold evaluation's longest wait,
and this process's own imports run while it starts. The reference's zygote is launched just after them, as a fork
of this process where that is the same zygote (`forked_zygote.py`): not a third import of torch on the same cores.
A native kernel's candidate zygote goes without torch._dynamo (0.8 s of the wait; `warm_start.may_need_dynamo`); one
that reaches for it after all fails as `needs_dynamo` and is evaluated again in a zygote with it
(`dynamo_absent.py`), as every other candidate is.

Import nothing heavy at module level: a caller imports this before torch, on purpose.
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evaluator.candidate import Candidate
    from evaluator.config import EvalConfig
    from evaluator.result import EvalResult
    from evaluator.task import Task


def evaluate_cold(task: "Task", candidate: "Candidate", config: "EvalConfig",
                  while_starting: Callable[[], None] = lambda: None) -> "EvalResult":
    """The verdict of one evaluation with zygotes started for it alone, evaluated again with torch._dynamo where the
    candidate reached for it in a zygote without. `while_starting`: the caller's own checks (its device, say), run
    while the candidate's zygote starts; what it raises ends the evaluation. Raises TaskError for a task that cannot
    be used."""
    from evaluator.result import Status
    from evaluator.driver.warm_start import may_need_dynamo

    dynamo = may_need_dynamo(candidate.source)
    result = _once(task, candidate, config, dynamo, while_starting)
    if not dynamo and result.status is Status.NEEDS_DYNAMO:
        result = _once(task, candidate, config, True, lambda: None)
        result = dataclasses.replace(result, reason=f"{result.reason}; evaluated with torch._dynamo loaded, which "
                                                    "the candidate reached for")
    return result


def _once(task: "Task", candidate: "Candidate", config: "EvalConfig", dynamo: bool,
          while_starting: Callable[[], None]) -> "EvalResult":
    from evaluator.build.cache import BuildCache
    from evaluator.sandbox.zygote_env import KINETO_QUIET
    from evaluator.driver.warm_start import WarmZygotes, likely_device

    # One evaluation: one fork each, and no CPU eviction buffer written ahead.
    zygotes = WarmZygotes.for_cache(BuildCache.open(), flush_ahead=False, fork_reference=True, dynamo=dynamo)
    try:
        device = likely_device(config.device)
        if device is not None:
            zygotes.warm(device, config.sandbox, roles=("candidate",))
        # As in the zygotes' environment, before torch loads Kineto: a forked reference logs what an exec'd one would.
        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
        gc.disable()  # the imports' full collections find little in torch's long-lived objects: CPU the zygotes need
        try:
            while_starting()
            from evaluator.driver.evaluate import LocalEvaluator
            if device is not None:
                zygotes.warm(device, config.sandbox, roles=("reference",))
        finally:
            gc.freeze()  # or the first collection after this scans every object the imports made (0.2-0.5 s)
            gc.enable()
        return LocalEvaluator(zygotes=zygotes).evaluate(task, candidate, config)
    finally:
        zygotes.close()
