"""The probe runs of the degenerate-task check (`opforge task check`), in the trusted reference worker: a second
seed, each input redrawn alone, the model built from another init seed. `degeneracy.judge` decides from them."""

from __future__ import annotations

from typing import Any

from dataclasses import replace

from evaluator.wire.commands import Run
from evaluator.driver.connection import WorkerConnection
from evaluator.verify.degeneracy import INPUT, SEED, WEIGHTS, Probes, describe_facts, input_key, judge, suspects
from evaluator.measure.blocks import fresh_seed
from evaluator.task import TaskError
from evaluator.wire.replies import Ran


def probe_task(conn: WorkerConnection, timeout_s: float, seed: int, base: list[Any],
               inputs: tuple[dict[str, Any], ...], tolerance: dict[str, float] | None) -> tuple[list, list]:
    """The probe runs of the degenerate-task check on the benchmark shape; `degeneracy.judge` decides. A probe that
    left an output unchanged is drawn once more (`degeneracy.suspects`) before it counts."""
    run = Run(variant=0, seed=seed)

    def draw(key: str) -> tuple[Ran, list[Any]]:
        if key == SEED:
            return conn.request_as(replace(run, seed=fresh_seed()), Ran, timeout_s, "running the task on a second seed")
        if key == WEIGHTS:
            return conn.request_as(replace(run, init_seed=fresh_seed()), Ran, timeout_s, "running with other weights")
        i = int(key.removeprefix(INPUT))
        return conn.request_as(replace(run, fresh_input=i, fresh_seed=fresh), Ran, timeout_s, f"redrawing input {i}")

    _, other_seed = draw(SEED)
    by_input, notes, fresh = {}, [], fresh_seed()
    other_weights, facts = None, describe_facts({})
    again: dict[str, list[Any]] = {}
    try:
        for i, d in enumerate(inputs):
            if "shape" not in d:
                notes.append(f"input {i} is a plain value ({d.get('value')}), not a tensor; its influence is not "
                             "checked")
                continue
            r, out = draw(input_key(i))
            if (r.probe or {}).get("input_changed"):
                by_input[i] = out
            else:
                notes.append(f"input {i} ({d['dtype']}) is the same for every seed (a constant such as a mask or an "
                             "index); its influence is not checked")
        r, other_weights = draw(WEIGHTS)
        facts = describe_facts(dict(r.probe or {}))
        fresh = fresh_seed()  # the inputs' second draws, from a seed of their own
        for key in suspects(Probes(base, other_seed, by_input, other_weights, facts), tolerance):
            again[key] = draw(key)[1]
    except TaskError as exc:  # redrawn values the task cannot take: what was measured so far still counts
        reason = str(exc).removeprefix(f"{conn.task_label}: ")
        notes.append(f"a probe of the degenerate-task check failed, so the checks after it were skipped: {reason}")
    findings, more = judge(Probes(base, other_seed, by_input, other_weights, facts, again), tolerance)
    return findings, notes + more
