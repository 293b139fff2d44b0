"""The degenerate-task check of `opforge task check`: each kind of degenerate task is caught and named, ordinary tasks
(and the built-in suite) are clean, and the command's exit status and JSON carry the verdict."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import suite_tasks
from evaluator import default_evaluator, load_task
from evaluator.verify.degeneracy import Probes, input_key, judge, near_constant, suspects, unchanged

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "kernelbench_like"
TOL = (1e-4, 1e-4)


def opforge(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opforge", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def check(relative: str):
    return default_evaluator().check_task(load_task(FIXTURES / relative), "cpu")


@pytest.mark.parametrize("relative, words", [
    ("level1/12_Sum_after_softmax.py", ["output 0 is near-constant", "around 1", "returning a constant"]),
    ("level2/9_Conv_GroupNorm_mean.py", ["output 0 is near-constant", "returning a constant"]),
    ("level2/7_Table_lookup_ignores_input.py", ["output 0 is the same for every seed", "stored result"]),
    ("level2/3_Linear_ignores_second_input.py", ["output 0 does not depend on input 1", "may ignore input 1"]),
    ("level3/2_Unused_projection.py", ["output 0 does not depend on the model's weights", "2 parameter tensor(s)"]),
])
def test_each_kind_of_degenerate_task_is_caught_in_one_sentence(relative: str, words: list[str]):
    report = check(relative)
    assert report.degenerate_checked
    assert len(report.degenerate) == 1, report.degenerate
    finding = report.degenerate[0]
    assert all(w in finding for w in words), finding
    assert "\n" not in finding


@pytest.mark.parametrize("relative", [
    "level1/1_Small_matmul.py", "level1/2_Scaled_tanh.py", "level1/10_Row_logsumexp.py",
    "level1/13_Pareto_hinge_loss.py", "level1/14_Attention_on_cuda_inputs.py", "level2/5_Linear_GELU_residual.py",
    "level3/1_Tiny_MLP_block.py",
])
def test_ordinary_tasks_are_clean(relative: str):
    report = check(relative)
    assert report.degenerate_checked and report.degenerate == (), report.degenerate


def test_weights_with_a_fixed_init_are_perturbed_and_noted_not_flagged():
    """LayerNorm's ones and zeros do not change with the init seed: the check moves them itself, and says so."""
    report = check("level3/1_Tiny_MLP_block.py")
    assert report.degenerate == ()
    assert any("2 of the model's 6 parameter tensor(s) do not depend on the init seed" in n for n in report.notes)


@pytest.mark.parametrize("task_path", suite_tasks("tiny"), ids=lambda p: p.stem)
def test_the_builtin_suite_is_clean(task_path: Path):
    report = default_evaluator().check_task(load_task(task_path), "cpu")
    assert report.degenerate_checked and report.degenerate == (), report.degenerate


def test_meta_is_shapes_only_and_says_the_values_need_a_real_device():
    report = default_evaluator().check_task(load_task(FIXTURES / "level1" / "12_Sum_after_softmax.py"), "meta")
    assert not report.degenerate_checked and report.degenerate == ()
    assert any("need real values" in n for n in report.notes)


def test_integer_inputs_are_redrawn_and_constant_inputs_are_noted(tmp_path: Path):
    task = tmp_path / "1_Gather_rows.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x, idx, mask):\n"
        "        return x[idx] * mask[: idx.shape[0], None]\n"
        "def get_inputs():\n"
        "    return [torch.randn(32, 8), torch.randint(0, 32, (16,)), torch.ones(32)]\n"
        "def get_init_inputs():\n    return []\n")
    report = default_evaluator().check_task(load_task(task), "cpu")
    assert report.degenerate == (), report.degenerate
    assert report.notes == (), report.notes  # idx (int64) redrawn from another seed; the ones() mask redrawn N(0,1)
    task.write_text(task.read_text().replace("torch.ones(32)", "torch.ones(32, dtype=torch.bool)"))
    report = default_evaluator().check_task(load_task(task), "cpu")
    assert report.degenerate == ()
    assert any("input 2 (bool) is the same for every seed" in n for n in report.notes), report.notes


def test_near_constant_and_unchanged_judge_by_the_correctness_tolerance():
    assert near_constant(torch.zeros(5), TOL) == "all zeros"
    assert near_constant(torch.full((3, 3), 2.5), TOL) == "every value is 2.5"
    assert "std" in near_constant(1.0 + 1e-7 * torch.randn(100), TOL)
    assert near_constant(torch.randn(100), TOL) is None
    assert near_constant(torch.tensor(3.0), TOL) is None  # a scalar: the seed check judges it
    assert near_constant(torch.full((4,), float("nan")), TOL) == "NaN or infinite everywhere"
    assert near_constant(torch.tensor([1, 1, 1]), (0.0, 0.0)) == "every value is 1"
    assert near_constant(torch.tensor([1, 2, 1]), (0.0, 0.0)) is None
    base = torch.randn(50)
    assert unchanged(base, base + 1e-7, TOL)[0]
    assert not unchanged(base, base + 1e-2, TOL)[0]
    assert not unchanged(base, base[:10], TOL)[0]
    assert unchanged(torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]), TOL) == (True, 0.0)


def test_a_probe_that_coincides_once_is_drawn_again_before_it_counts():
    """A scalar output (a mean over thousands of values) can land within the tolerance of a fresh draw's by chance
    (a mean hinge loss did, in 1 of 32 checks): the probe is drawn again, and only an output unchanged both times is a
    finding."""
    base = [torch.tensor(1.25)]
    p = Probes(base, other_seed=[torch.tensor(0.7)], by_input={0: [torch.tensor(1.25 + 1e-6)]}, other_weights=None,
               weight_facts={})
    assert suspects(p, None) == [input_key(0)]
    assert "does not depend on input 0" in judge(p, None)[0][0]  # a probe drawn once is judged on that draw
    assert judge(dataclasses.replace(p, again={input_key(0): [torch.tensor(1.31)]}), None)[0] == []
    confirmed = judge(dataclasses.replace(p, again={input_key(0): [torch.tensor(1.25)]}), None)[0]
    assert len(confirmed) == 1 and "does not depend on input 0" in confirmed[0]
    assert suspects(dataclasses.replace(p, by_input={0: [torch.tensor(1.31)]}), None) == []


def test_cli_exit_status_json_field_and_folder_summary(tmp_path: Path):
    proc = opforge("task", "check", str(FIXTURES / "level1" / "12_Sum_after_softmax.py"), "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["ok"] is True and data["degenerate_checked"] is True
    assert len(data["degenerate"]) == 1 and data["degenerate"][0].startswith("output 0 is near-constant")

    folder = tmp_path / "level2"
    shutil.copytree(FIXTURES / "level2", folder)
    (folder / "20_Broken.py").write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n"
                                         "def get_inputs():\n    raise ValueError('bad sizes')\n"
                                         "def get_init_inputs():\n    return []\n")
    proc = opforge("task", "check", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "1 ok, 3 degenerate, 1 unusable"
    assert any(line.startswith("degenerate  ") and "3_Linear_ignores_second_input" in line for line in lines)
    assert any("degenerate: output 0 does not depend on input 1" in line for line in lines)
    assert any(line.startswith("unusable  ") and "20_Broken.py" in line for line in lines)
    assert "bad sizes" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr

    (folder / "20_Broken.py").unlink()
    for name in ("3_Linear_ignores_second_input.py", "7_Table_lookup_ignores_input.py", "9_Conv_GroupNorm_mean.py"):
        (folder / name).unlink()
    proc = opforge("task", "check", str(folder))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "1 ok, 0 degenerate, 0 unusable"


def test_a_probe_the_task_cannot_take_is_a_note_not_an_unusable_task(tmp_path: Path):
    task = tmp_path / "1_Needs_non_negative_weights.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x, w):\n"
                    "        if bool((w < 0).any()):\n            raise ValueError('w must be non-negative')\n"
                    "        return x * w\ndef get_inputs():\n    return [torch.randn(8), torch.ones(8)]\n"
                    "def get_init_inputs():\n    return []\n")
    report = default_evaluator().check_task(load_task(task), "cpu")
    assert report.degenerate == ()
    assert any("probe of the degenerate-task check failed" in n and "w must be non-negative" in n
               for n in report.notes), report.notes
