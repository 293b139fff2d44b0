"""Translation sources: correct kernels of the same task written for the other side (GPU or CPU), which a run's LLM
coder may start from instead of writing from scratch ("translate this kernel to CPU", and the reverse).

A native CPU run (`cpp`) is offered the task's fastest correct Triton and CUDA kernels in the store; a GPU run
(`triton`, `cuda`) the fastest correct native one. Kernels are matched by task (same reference source) and by the
backend their verdict recorded (`EvalResult.backend`), never by what their source looks like. A run that refused the
archive (`--no-archive`, a leaderboard bench) is offered nothing, so its score stays its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.llm_coder import GPU_BACKENDS, Translation
from store import Store

POOL = 64  # the task's fastest correct verdicts looked at (all backends together)


def wanted_backends(backend: str) -> tuple[str, ...]:
    """The backends a run of `backend` translates from."""
    return ("cpp",) if backend in GPU_BACKENDS else GPU_BACKENDS if backend == "cpp" else ()


def translation_sources(store: Store, task_id: int, backend: str,
                        archive: Mapping[str, Any] | None = None) -> list[Translation]:
    """The fastest correct kernel of each backend this run may translate from (fastest first), none when the run
    refused the archive."""
    if archive is not None and archive.get("enabled") is False:
        return []
    wanted = wanted_backends(backend)
    best: dict[str, Translation] = {}
    for scored in store.top_k(task_id, POOL):
        result = scored.result
        if result is None or result.backend not in wanted or result.backend in best:
            continue
        best[result.backend] = Translation(source=scored.candidate.source, digest=scored.candidate.digest,
                                           backend=result.backend, speedup=result.speedup,
                                           device=result.device.name, candidate_id=scored.candidate.id)
    return sorted(best.values(), key=lambda t: -(t.speedup or 0.0))
