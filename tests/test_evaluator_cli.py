"""The `opforge eval` and `opforge task check` interface that scripts and CI depend on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator import Candidate, EvalConfig, Status, TaskError, load_candidate, load_task
from evaluator import evaluate
from opforge.cli.commands.eval import summary

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "benchmarks" / "tiny"


def opforge(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opforge", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def test_eval_json_prints_exactly_one_object_with_the_contract_fields():
    proc = opforge("eval", str(TINY / "relu.py"), str(TINY / "relu.seed.py"), "--json", "--device", "cpu",
                   "--timing-s", "0.3")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    data = json.loads(lines[0])
    for key in ("status", "reason", "speedup", "timing", "max_abs_error", "peak_memory_bytes", "energy_j", "device"):
        assert key in data
    assert data["status"] == "ok", data["reason"]
    assert data["speedup"] > 0
    assert data["timing"]["candidate"]["median_ms"] > 0 and data["timing"]["reference"]["iqr_ms"] >= 0
    assert data["device"]["interpreted"] is True


def test_eval_readable_summary_names_status_and_speedup():
    result = evaluate(load_task(TINY / "row_sum.py"), load_candidate(TINY / "row_sum.seed.py"),
                      EvalConfig(device="cpu", max_timing_s=0.3))
    text = summary(result, "row_sum.seed.py", "row_sum")
    assert text.startswith("OK"), text
    assert "speedup" in text and "Triton interpreter" in text


@pytest.mark.parametrize("body, status", [
    ("this is not python(", Status.COMPILE_ERROR),
    ("import torch\nclass NotIt(torch.nn.Module):\n    pass\n", Status.COMPILE_ERROR),
    ("import torch\nraise RuntimeError('boom at import')\n", Status.COMPILE_ERROR),
])
def test_broken_candidates_are_verdicts_not_errors(body: str, status: Status):
    result = evaluate(load_task(TINY / "relu.py"), Candidate.from_source(body), EvalConfig(device="cpu"))
    assert result.status == status
    assert result.reason


def test_missing_file_exits_2_with_one_sentence_naming_it(tmp_path: Path):
    proc = opforge("eval", str(tmp_path / "nope.py"), str(TINY / "relu.seed.py"), "--json")
    assert proc.returncode == 2
    assert "nope.py" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("body, words", [
    ("def broken(:\n", "syntax error"),
    ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "get_inputs"),
    ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
     "def get_inputs():\n    return ['not a tensor']\ndef get_init_inputs():\n    return []\n", "tensors"),
    ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
     "def get_inputs():\n    raise ValueError('bad sizes')\ndef get_init_inputs():\n    return []\n", "bad sizes"),
])
def test_unusable_task_is_one_sentence_naming_file_and_problem(tmp_path: Path, body: str, words: str):
    task = tmp_path / "mytask.py"
    task.write_text(body)
    with pytest.raises(TaskError) as info:
        evaluate(load_task(task), load_candidate(TINY / "relu.seed.py"), EvalConfig(device="cpu"))
    message = str(info.value)
    assert "mytask.py" in message and words in message
    assert "\n" not in message


def test_unusable_task_exits_2_without_traceback(tmp_path: Path):
    task = tmp_path / "mytask.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                    "def get_inputs():\n    raise ValueError('bad sizes')\ndef get_init_inputs():\n    return []\n")
    proc = opforge("eval", str(task), str(TINY / "relu.seed.py"), "--device", "cpu", "--json")
    assert proc.returncode == 2, proc.stdout
    assert "mytask.py" in proc.stderr and "bad sizes" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_task_check_reports_shapes_of_every_variant_and_meta_needs_no_memory(tmp_path: Path):
    proc = opforge("task", "check", str(TINY / "softmax.py"), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["outputs"][0] == [{"shape": [1984, 4096], "dtype": "float32"}]  # the native benchmark shape
    assert len(data["variants"]) == 3
    huge = tmp_path / "huge.py"
    huge.write_text("import torch\nN = 2**40\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                    "        return torch.relu(x) * 2\ndef get_inputs():\n    return [torch.randn(N)]\n"
                    "def get_init_inputs():\n    return []\n")
    proc = opforge("task", "check", str(huge), "--meta", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outputs"][0][0]["shape"] == [2**40]


def test_every_command_has_help(capsys: pytest.CaptureFixture[str]):
    from opforge.cli.program import build_parser
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"eval", "task"} <= set(commands)
    for name, sub in commands.items():
        assert sub.description, f"opforge {name} has no description"
        assert "usage:" in sub.format_help()


NATIVE_RELU_REACHING_DYNAMO = '''
import torch
import torch.nn as nn
from torch import compiler
from evaluator.native import load_c

lib = load_c("relu_dyn", """
#include <stdint.h>
void relu(const float* x, float* out, int64_t n) { for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f; }
""", functions=["relu"], flags=["-O2"])


@compiler.disable  # kept out of graph capture, as kernel libraries mark their launchers (imports dynamo)
def launch(x, out):
    lib.relu(x, out, x.numel())


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        launch(x, out)
        return out
'''


def test_a_native_kernel_is_evaluated_cold_and_one_that_reaches_for_dynamo_is_evaluated_again(tmp_path: Path):
    """`opforge eval` gives a native kernel's zygote no torch._dynamo (0.8 s of a cold evaluation): the seed passes
    there, and a native kernel that imports dynamo after all is evaluated again in a zygote that has it, and says so,
    rather than refused (dynamo imported after the guards is otherwise taken for tampering)."""
    from evaluator.driver.warm_start import may_need_dynamo

    seed = TINY / "relu.cpp.py"
    assert not may_need_dynamo(seed.read_text()) and may_need_dynamo((TINY / "relu.seed.py").read_text())
    proc = opforge("eval", str(TINY / "relu.py"), str(seed), "--json", "--device", "cpu", "--timing-s", "0.3")
    assert proc.returncode == 0, proc.stderr
    plain = json.loads(proc.stdout)
    assert plain["status"] == "ok" and "torch._dynamo" not in plain["reason"], plain["reason"]
    reaching = tmp_path / "relu_reaching_dynamo.py"
    reaching.write_text(NATIVE_RELU_REACHING_DYNAMO)
    assert not may_need_dynamo(reaching.read_text())
    proc = opforge("eval", str(TINY / "relu.py"), str(reaching), "--json", "--device", "cpu", "--timing-s", "0.3")
    assert proc.returncode == 0, proc.stderr
    again = json.loads(proc.stdout)
    assert again["status"] == "ok", again["reason"]
    assert again["reason"].endswith("evaluated with torch._dynamo loaded, which the candidate reached for")
