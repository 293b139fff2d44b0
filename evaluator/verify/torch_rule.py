"""The rule for PyTorch inside a candidate, judged by the driver from what both workers' profilers saw.

Kernels must do the work the reference does. PyTorch may allocate, view, copy, cast and lay out data freely
(`observer.FREE_OPS`), and may compute a small share of the call: its compute operators may read at most
`GLUE_SHARE` of the elements that the reference's compute operators read on the same inputs. Both sides are measured
by the same observer (`CallObserver.glue_work`): the outermost compute operators count the elements of their tensor
arguments; operators called from inside one that counted are left out, so a fused operator (mse_loss) counts what it
reads once, in the reference as in the candidate, while the operators inside one that counts nothing (a custom
operator of another namespace, einsum's tensor list) count.

Accepted (glue): the sum or mean of a kernel's per-element loss (mse: half the reference's reads, kl_div: a third,
cross-entropy: 1/C), a sort or a top-k feeding a kernel, a log of an input, a bias added to a matmul's output.
Refused: the reference recomputed under another name (relu as clamp_min: all of the reference's reads), the
reference's operators spread over many small calls (their reads add up), a token kernel beside PyTorch doing most
of the work. The measure is the reference's work on the same call, never the candidate's own time, so a kernel
that spins to make PyTorch's share of the call's time look small gains nothing.

`kernels_only` (EvalConfig, `--kernels-only`) keeps the strict rule for leaderboards that want it: no PyTorch compute
at the output's scale, and every output byte a kernel's (under the interpreter).
"""

from __future__ import annotations

from evaluator.driver.connection import Refused
from evaluator.result import Status
from evaluator.wire.replies import Ran

GLUE_SHARE = 0.5  # PyTorch's compute may read at most this share of what the reference's reads
RULE_GLUE = "kernels-do-the-work"   # the default: PyTorch glue and a small share of compute allowed
RULE_STRICT = "kernels-only"
RULE_ANY = "allow-torch"


def rule_name(allow_torch: bool, kernels_only: bool) -> str:
    return RULE_ANY if allow_torch else RULE_STRICT if kernels_only else RULE_GLUE


def torch_share(got_reply: Ran, expected_reply: Ran) -> float | None:
    """PyTorch's compute in the candidate's call as a share of the reference's (None: neither side reported)."""
    cand = got_reply.torch_work
    if cand is None:
        return None
    ref = expected_reply.torch_work or 0
    if cand == 0:
        return 0.0
    return cand / ref if ref > 0 else float("inf")


def refuse_torch_share(trial: int, share: float | None, got_reply: Ran) -> None:
    """Refuses a call whose PyTorch compute read more than `GLUE_SHARE` of the reference's."""
    if share is None or share <= GLUE_SHARE:
        return
    ops = list(got_reply.torch_ops or ())
    named = ", ".join(ops[:4]) + (", ..." if len(ops) > 4 else "")
    amount = "more than the reference computes at all" if share == float("inf") else f"{share:.0%} of what the reference's read"
    raise Refused(Status.REJECTED, f"in trial {trial + 1} the candidate's PyTorch operators ({named}) read {amount}: "
                                   f"kernels must do the reference's work, PyTorch at most {GLUE_SHARE:.0%} of it "
                                   "(layout, allocation and a small final step such as a sum of a kernel's output)")
