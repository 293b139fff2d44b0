"""Input probes that stay fair: a trial on other inputs than the task's is only a test where the reference still
gives finite numbers on them.

The second distribution (N(0, 1) * 4), the large-magnitude trial and the near-copy probe draw values that the task's
own `get_inputs` may never produce: a negative probability, a log of a negative number. Where the task's inputs give
a finite reference and a probe's give NaN or infinity, the probe left the operator's domain: an honest kernel that
clamps (KL divergence) would be refused for returning a number. Such a probe is redrawn at a smaller magnitude where
one is planned, else skipped and said so in the trial's record.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from evaluator.commands import Run
from evaluator.config import EvalConfig
from evaluator.connection import WorkerConnection
from evaluator.native_compare import NativeCompare, native_compare
from evaluator.task_runtime import LARGE_SCALES


def all_finite(tensors: list[torch.Tensor]) -> bool:
    return all(_finite(t) for t in tensors if t.is_floating_point() or t.is_complex())


def _finite(t: torch.Tensor) -> bool:
    """One native pass where the harness library takes the tensor (`native_compare.py`: 8 million values in a few ms,
    against 20 ms for `isfinite(...).all()`), else PyTorch's."""
    native = native_compare() if NativeCompare.takes(t) else None
    return native.finite(t) if native is not None else bool(torch.isfinite(t).all())


def first_sent(run: Run) -> Run:
    """A trial's run as first sent to the reference: the large-magnitude trial at its first planned magnitude."""
    return replace(run, scale=LARGE_SCALES[0]) if run.distribution == "large" else run


def expected_in_domain(ref: WorkerConnection, run: Run, cfg: EvalConfig, task_finite: bool,
                       first: tuple[dict[str, Any], list[torch.Tensor]] | None = None,
                       ) -> tuple[Run, dict[str, Any], list[torch.Tensor]] | None:
    """(the run as sent, the reference's reply, its outputs), or None when the probe leaves the reference's domain
    at every magnitude planned for it. `first`: the reply to `first_sent(run)`, read already by the caller."""
    dist = run.distribution
    scales: tuple[float | None, ...] = LARGE_SCALES if dist == "large" else (None,)
    for k, scale in enumerate(scales):
        sent = replace(run, scale=scale) if scale is not None else run
        if k == 0 and first is not None:
            reply, expected = first
        else:
            reply, expected = ref.request(sent, cfg.run_timeout_s, "computing expected outputs")
        if dist == "task" or not task_finite or all_finite(expected):
            return sent, reply, expected
    return None
