"""The retry of a cold `opforge eval` in a zygote with torch._dynamo is signalled by a status (`needs_dynamo`), never
by text that a candidate writes (its exceptions' messages, its log)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.worker import dynamo_absent
from evaluator.result import Status

REPO = Path(__file__).resolve().parent.parent
RELU = REPO / "benchmarks" / "tiny" / "relu.py"
RETRIED = "evaluated with torch._dynamo loaded"

# A native kernel (so `opforge eval` starts its zygote without dynamo: `warm_start.may_need_dynamo`) whose forward runs
# FORWARD_EXTRA first. The source names none of the words that would have given it dynamo from the start.
NATIVE = '''import torch
import torch.nn as nn
from evaluator.native import load_c

SOURCE = r"""
#include <stdint.h>
void relu(const float* restrict x, float* restrict out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
lib = load_c("relu_plain", SOURCE, functions=["relu"], flags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        FORWARD_EXTRA
        x = x.contiguous()
        out = torch.empty_like(x)
        lib.relu(x, out, x.numel())
        return out
'''


def _eval(tmp_path: Path, forward_extra: str) -> dict:
    candidate = tmp_path / "candidate.py"
    candidate.write_text(NATIVE.replace("FORWARD_EXTRA", forward_extra))
    proc = subprocess.run([sys.executable, "-m", "opforge", "eval", str(RELU), str(candidate), "--json", "--device",
                           "cpu", "--timing-s", "0.3"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_native_kernel_that_reaches_for_dynamo_is_evaluated_again_with_it(tmp_path: Path):
    # torch's lazy attribute imports torch._dynamo, as a library's lazy import would
    result = _eval(tmp_path, 'getattr(torch, "_dyn" + "amo")')
    assert result["status"] == "ok", result["reason"]
    assert RETRIED in result["reason"]


def test_a_candidate_that_writes_the_old_sentence_is_not_evaluated_again(tmp_path: Path):
    # Before the status, this sentence in a failure's reason or log was what triggered the second evaluation.
    result = _eval(tmp_path, f'raise RuntimeError({dynamo_absent.MESSAGE!r})')
    assert result["status"] == "runtime_error", result
    assert RETRIED not in result["reason"]


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dynamo_absent, "_REACHED", ["torch._dynamo"])


def test_a_failure_after_the_refused_import_is_sent_as_needs_dynamo_whatever_it_said(reached: None):
    for status in ("runtime_error", "compile_error", "rejected", "incorrect"):
        reply = dynamo_absent.mark({"status": status, "reason": "AttributeError: the candidate's own words"})
        assert reply["status"] == Status.NEEDS_DYNAMO.value
        assert "torch._dynamo" in reply["reason"] and "the candidate's own words" in reply["reason"]


def test_other_replies_pass_unchanged(reached: None):
    for reply in ({"status": "ready", "variants": 1}, {"status": "task_error", "reason": "x"}, {"outputs": 2}):
        assert dynamo_absent.mark(reply) is reply


def test_without_the_refused_import_nothing_is_marked():
    assert not dynamo_absent.reached()
    reply = {"status": "runtime_error", "reason": dynamo_absent.MESSAGE}
    assert dynamo_absent.mark(reply) is reply
