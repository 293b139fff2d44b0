"""KernelBench folders as they are: listing their problem files, and `task check --meta` on a folder of them.

The fixtures in tests/kernelbench_like/ are our own small files in KernelBench's layout and format.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.kernelbench import Problem, is_problem_file, problems
from evaluator import TaskError, default_evaluator, load_task

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "kernelbench_like"
EXPECTED = [
    "level1/1_Small_matmul", "level1/2_Scaled_tanh", "level1/10_Row_logsumexp", "level1/12_Sum_after_softmax",
    "level1/13_Pareto_hinge_loss", "level1/14_Attention_on_cuda_inputs",
    "level2/3_Linear_ignores_second_input", "level2/5_Linear_GELU_residual", "level2/7_Table_lookup_ignores_input",
    "level2/9_Conv_GroupNorm_mean",
    "level3/1_Tiny_MLP_block", "level3/2_Unused_projection",
]


def opforge(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opforge", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def test_problems_are_ordered_by_level_then_number_and_other_files_are_skipped():
    found = problems(FIXTURES)
    assert [p.label for p in found] == EXPECTED
    assert found[2] == Problem(FIXTURES / "level1" / "10_Row_logsumexp.py", level=1, problem_id=10)
    assert found[-1].level == 3 and found[-1].problem_id == 2 and found[-1].name == "2_Unused_projection"
    assert not is_problem_file(FIXTURES / "level1" / "not_a_problem.py")
    assert not is_problem_file(FIXTURES / "README.md")


def test_a_checkout_its_data_folder_a_level_folder_and_a_flat_folder_are_all_accepted(tmp_path: Path):
    checkout = tmp_path / "KernelBench-main"
    shutil.copytree(FIXTURES, checkout / "KernelBench")
    (checkout / "scripts").mkdir()
    (checkout / "scripts" / "eval.py").write_text("def main():\n    pass\n")
    assert [p.label for p in problems(checkout)] == EXPECTED
    assert [p.label for p in problems(checkout / "KernelBench")] == EXPECTED
    level2 = problems(checkout / "KernelBench" / "level2")
    assert [(p.level, p.problem_id) for p in level2] == [(2, 3), (2, 5), (2, 7), (2, 9)]
    flat = tmp_path / "mine"
    flat.mkdir()
    for name in ("12_Sum_after_softmax.py", "2_Scaled_tanh.py"):
        shutil.copy(FIXTURES / "level1" / name, flat / name)
    shutil.copy(FIXTURES / "level3" / "1_Tiny_MLP_block.py", flat / "unnumbered.py")
    assert [(p.name, p.level, p.problem_id) for p in problems(flat)] == [
        ("2_Scaled_tanh", None, 2), ("12_Sum_after_softmax", None, 12), ("unnumbered", None, None)]
    assert [p.label for p in problems(checkout, levels=(3,))] == EXPECTED[-2:]


def test_a_missing_or_empty_folder_is_one_sentence_naming_it(tmp_path: Path):
    with pytest.raises(ValueError, match="no such folder"):
        problems(tmp_path / "nope")
    (tmp_path / "notes.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match=f"{tmp_path.name} holds no KernelBench problem files"):
        problems(tmp_path)
    with pytest.raises(ValueError, match="at level"):
        problems(FIXTURES, levels=(4,))


def test_meta_shapes_work_for_sampled_inputs_and_inputs_created_on_cuda():
    """Distribution argument checks read values (`.item()`), and `device='cuda'` inputs need a GPU: neither stops the
    meta check (it must not fall back to running the task for real)."""
    for name in ("13_Pareto_hinge_loss", "14_Attention_on_cuda_inputs"):
        report = default_evaluator().check_task(load_task(FIXTURES / "level1" / f"{name}.py"), "meta")
        assert report.device == "meta", name
    report = default_evaluator().check_task(load_task(FIXTURES / "level1" / "14_Attention_on_cuda_inputs.py"), "cpu")
    assert report.inputs[0][0] == {"shape": [2, 2, 16, 8], "dtype": "float32"}
    assert report.outputs[0][0] == {"shape": [2, 2, 16, 8], "dtype": "float32"}


def test_a_task_importing_a_missing_package_says_what_to_install(tmp_path: Path):
    task = tmp_path / "1_Needs_a_package.py"
    task.write_text("import torch\nimport not_a_real_package_xyz\nclass Model(torch.nn.Module):\n"
                    "    def forward(self, x):\n        return x\ndef get_inputs():\n    return [torch.randn(2)]\n"
                    "def get_init_inputs():\n    return []\n")
    with pytest.raises(TaskError) as info:
        default_evaluator().check_task(load_task(task), "meta")
    message = str(info.value)
    assert "1_Needs_a_package.py" in message and "pip install not_a_real_package_xyz" in message
    assert message.count("not installed") == 1  # said once, not again for the CPU fallback


def test_task_check_meta_on_a_folder_passes_every_problem_and_sums_up():
    proc = opforge("task", "check", "--meta", "--json", str(FIXTURES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [Path(r["task"]).stem for r in rows] == [label.split("/")[1] for label in EXPECTED]
    assert all(r["ok"] and r["device"] == "meta" and not r["degenerate_checked"] for r in rows)
    assert all(any("need real values" in n for n in r["notes"]) for r in rows)
    assert "12 ok, 0 degenerate, 0 unusable" in proc.stderr
