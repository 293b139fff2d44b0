"""The degenerate-task check's judgement: given the reference's outputs and the outputs of a few probe runs, which
shortcuts would a kernel get away with? Pure functions on tensors, run in the trusted driver (`task check`).

A finding means that a kernel ignoring something would pass the evaluator's own correctness check on this draw, with
the same tolerance: an output that a constant reproduces (near-constant), an output a second seed leaves unchanged (a
stored result passes), an input or the model's weights whose fresh values leave the output unchanged (a kernel may
ignore them). KernelBench's published numbers included tasks like these (a sum after a softmax, a clamp to a constant).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator.correctness import tolerance_for


@dataclass(frozen=True, slots=True)
class Probes:
    """What the reference returned for one draw (`base`) and for the probes around it, all on the benchmark shape."""

    base: list[torch.Tensor]
    other_seed: list[torch.Tensor]
    by_input: dict[int, list[torch.Tensor]]       # input index -> outputs with that input alone redrawn
    other_weights: list[torch.Tensor] | None      # outputs with the model built from another init seed
    weight_facts: dict[str, int]                  # parameters, buffers, reseeded, jittered (worker's counts)
    # A second draw of each probe that left an output unchanged the first time (`suspects`), by its key (SEED,
    # `input_key(i)`, WEIGHTS): a finding needs both draws. One draw is not enough where an output is a scalar that
    # concentrates, such as a mean over thousands of values: two independent draws of a mean hinge loss agreed
    # within the tolerance in 1 of 32 checks of an honest task. A probe with no second draw is judged on its first.
    again: dict[str, list[torch.Tensor]] = field(default_factory=dict)


SEED, WEIGHTS, INPUT = "seed", "weights", "input "


def input_key(i: int) -> str:
    return f"{INPUT}{i}"


def suspects(p: Probes, override: dict[str, float] | None) -> list[str]:
    """The keys of the probes whose first draw left some output unchanged within the tolerance: those drawn again
    before `judge` decides."""
    firsts = {SEED: p.other_seed, **{input_key(i): outs for i, outs in p.by_input.items()}}
    if p.other_weights is not None:
        firsts[WEIGHTS] = p.other_weights
    return [key for key, outs in firsts.items()
            if any(unchanged(out, _nth(outs, j), _tolerance(out, override))[0] for j, out in enumerate(p.base))]


def judge(p: Probes, override: dict[str, float] | None) -> tuple[list[str], list[str]]:
    """(degenerate findings, notes): one sentence each, naming the output and input by index."""
    findings: list[str] = []
    notes: list[str] = []
    params, jittered = p.weight_facts.get("parameters", 0), p.weight_facts.get("jittered", 0)
    if jittered:
        notes.append(f"{jittered} of the model's {params} parameter tensor(s) do not depend on the init seed (e.g. a "
                     "norm layer's ones and zeros): a kernel hard-coding their values would pass; the check perturbed "
                     "them to confirm that the forward uses them")
    for j, out in enumerate(p.base):
        if out.numel() == 0:
            notes.append(f"output {j} is empty; nothing to check")
            continue
        tol = _tolerance(out, override)
        constant = near_constant(out, tol)
        if constant:
            findings.append(f"output {j} is near-constant ({constant}): on the task's inputs, any kernel returning "
                            "a constant would pass")
            continue
        same, moved = _unchanged_in_each(out, j, p.other_seed, p.again.get(SEED), tol)
        if same:
            findings.append(f"output {j} is the same for every seed (another seed's inputs {_moved(moved)}, within "
                            "the tolerance): on the task's inputs, a kernel returning one stored result would pass")
            continue
        for i, probe in sorted(p.by_input.items()):
            same, moved = _unchanged_in_each(out, j, probe, p.again.get(input_key(i)), tol)
            if same:
                findings.append(f"output {j} does not depend on input {i} (fresh values for input {i} {_moved(moved)}, "
                                f"within the tolerance): a kernel may ignore input {i}")
        if p.other_weights is not None and params:
            same, moved = _unchanged_in_each(out, j, p.other_weights, p.again.get(WEIGHTS), tol)
            if same:
                findings.append(f"output {j} does not depend on the model's weights ({params} parameter tensor(s) "
                                f"drawn from another init seed {_moved(moved)}, within the tolerance): a kernel may "
                                "ignore them")
    if p.other_weights is not None and not params and p.weight_facts.get("buffers", 0):
        if all(_unchanged_in_each(o, j, p.other_weights, p.again.get(WEIGHTS), _tolerance(o, override))[0]
               for j, o in enumerate(p.base)):
            notes.append("the model holds buffers but no parameters, and another init seed leaves its output "
                         "unchanged (constant buffers)")
    return findings, notes


def near_constant(x: torch.Tensor, tol: tuple[float, float]) -> str | None:
    """A description when one value repeated everywhere would pass the correctness check against `x`, else None."""
    if x.numel() <= 1:
        return None  # a scalar is trivially constant: whether it varies with the seed is the question
    x64 = x.detach().to("cpu", torch.float64) if x.is_floating_point() else x.detach().to("cpu").to(torch.float64)
    finite = x64[torch.isfinite(x64)]
    if finite.numel() == 0:
        return "NaN or infinite everywhere"
    if finite.numel() < x64.numel():
        return None  # NaN/inf positions vary within the tensor: a single constant cannot reproduce them
    atol, rtol = tol
    mean = float(finite.mean())
    if not bool(((finite - mean).abs() <= atol + rtol * finite.abs()).all()):
        return None
    if float(finite.abs().max()) == 0.0:
        return "all zeros"
    std = float(finite.std()) if finite.numel() > 1 else 0.0
    if std == 0.0:
        return f"every value is {mean:.6g}"
    return f"std {std:.2g} around {mean:.3g}, within the tolerance atol={atol:g}, rtol={rtol:g}"


def unchanged(base: torch.Tensor, probe: torch.Tensor | None, tol: tuple[float, float]) -> tuple[bool, float]:
    """Whether `probe` passes the correctness check against `base` (so a kernel returning `base` would pass), and the
    largest absolute change."""
    if probe is None or probe.shape != base.shape or probe.dtype != base.dtype:
        return False, math.inf
    b64 = base.detach().to("cpu").to(torch.float64)
    p64 = probe.detach().to("cpu").to(torch.float64)
    b_nan, p_nan = torch.isnan(b64), torch.isnan(p64)
    if not torch.equal(b_nan, p_nan):
        return False, math.inf
    b_inf, p_inf = torch.isinf(b64), torch.isinf(p64)
    if not torch.equal(b_inf, p_inf) or not torch.equal(b64[b_inf], p64[p_inf]):
        return False, math.inf
    finite = ~(b_nan | b_inf)
    diff = (p64 - b64).abs()[finite]
    if diff.numel() == 0:
        return True, 0.0
    atol, rtol = tol
    return bool((diff <= atol + rtol * b64.abs()[finite]).all()), float(diff.max())


def _unchanged_in_each(base: torch.Tensor, j: int, first: list[torch.Tensor] | None,
                       second: list[torch.Tensor] | None, tol: tuple[float, float]) -> tuple[bool, float]:
    """`unchanged` for output `j` in the probe's first draw and, where there is one, its second; the larger change."""
    same, moved = unchanged(base, _nth(first, j), tol)
    if not same or second is None:
        return same, moved
    same, moved_again = unchanged(base, _nth(second, j), tol)
    return same, max(moved, moved_again)


def _tolerance(x: torch.Tensor, override: dict[str, float] | None) -> tuple[float, float]:
    if not (x.is_floating_point() or x.is_complex()):
        return 0.0, 0.0  # integer and bool outputs are compared exactly
    return tolerance_for(x.dtype, override)


def _nth(outputs: list[torch.Tensor] | None, j: int) -> torch.Tensor | None:
    return outputs[j] if outputs is not None and j < len(outputs) else None


def _moved(amount: float) -> str:
    return "left it unchanged" if amount == 0.0 else f"changed it by at most {amount:.2g}"


def describe_facts(facts: dict[str, Any]) -> dict[str, int]:
    """The worker's counts of the model's state, as plain ints (they travel as JSON)."""
    return {k: int(facts.get(k, 0)) for k in ("parameters", "buffers", "reseeded", "jittered")}
