"""Translation sources: correct kernels of the same task written for the other side (GPU or CPU), which a run's LLM
coder may start from instead of writing from scratch ("translate this kernel to CPU", and the reverse).

A native CPU run (`cpp`) is offered the task's fastest correct Triton and CUDA kernels in the store; a GPU run
(`triton`, `cuda`) the fastest correct native one. Kernels are matched by task (same reference source) and by the
backend their verdict recorded (`EvalResult.backend`), never by what their source looks like. A run that refused the
archive (`--no-archive`, a leaderboard bench) is offered nothing, so its score stays its own.

Each source is asked for once per run: the store keeps the run's LLM calls, so a run resumed after a kill is not
offered again a source whose translation it already asked for (whatever came of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agents.llm_coder import GPU_BACKENDS, TRANSLATE_ROLE, Translation
from store import Store

POOL = 64  # the task's fastest correct verdicts looked at (all backends together)


def wanted_backends(backend: str) -> tuple[str, ...]:
    """The backends a run of `backend` translates from."""
    return ("cpp",) if backend in GPU_BACKENDS else GPU_BACKENDS if backend == "cpp" else ()


def translation_sources(store: Store, task_id: int, backend: str, archive: Mapping[str, Any] | None = None,
                        run_id: int | None = None) -> list[Translation]:
    """The fastest correct kernel of each backend this run may translate from (fastest first), none when the run
    refused the archive; for a run already under way (`run_id`), not those it has asked to translate before."""
    if archive is not None and archive.get("enabled") is False:
        return []
    wanted = wanted_backends(backend)
    pool = [(sc, sc.result) for sc in store.top_k(task_id, POOL)
            if sc.result is not None and sc.result.backend in wanted]
    if run_id is not None:  # a backend whose turn was taken (any of its kernels asked for) is not offered again
        asked = asked_to_translate(store, run_id)
        taken = {r.backend for sc, r in pool if any(sc.candidate.source in prompt for prompt in asked)}
        pool = [(sc, r) for sc, r in pool if r.backend not in taken]
    best: dict[str, Translation] = {}
    for scored, result in pool:
        if result.backend is None or result.backend in best:
            continue
        best[result.backend] = Translation(source=scored.candidate.source, digest=scored.candidate.digest,
                                           backend=result.backend, speedup=result.speedup,
                                           device=result.device.name, candidate_id=scored.candidate.id)
    return sorted(best.values(), key=lambda t: -(t.speedup or 0.0))


def asked_to_translate(store: Store, run_id: int) -> list[str]:
    """The prompts of the run's translation requests so far (each embeds the kernel it asked to translate)."""
    return [call.prompt for call in store.llm_calls(run_id) if call.role == TRANSLATE_ROLE]
