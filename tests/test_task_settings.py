"""`--set NAME=VALUE` runs a task at another size (issue 39): the task's top-level assignment is rewritten in its
source, which is what the evaluator runs and the store keeps, and each rewritten line says what the file had."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from evaluator.task import TaskError, load_task, task_from_source
from evaluator.task_settings import apply_settings, recorded
from opforge.cli import main as opforge_main
from opforge.reports.run_summary import run_report
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
TOO_BIG = ROOT / "tests" / "tasks" / "relu_too_big.py"
TASK = '''import torch
batch_size = 4096  # rows
dim: int = (
    393216
)
shape = (2, 3)


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


def _globals(source: str) -> dict[str, object]:
    """The task's top-level literals, read back from the rewritten source."""
    out: dict[str, object] = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            out[target.id] = ast.literal_eval(node.value)  # type: ignore[attr-defined]
    return out


def test_settings_rewrite_the_assignments_and_the_source_records_them() -> None:
    task = task_from_source(TASK, "relu", "relu.py")
    rewritten = apply_settings(task, ["dim=1024", "batch_size=16", "shape=(4, 5)"])
    assert _globals(rewritten.source) == {"batch_size": 16, "dim": 1024, "shape": (4, 5)}
    assert rewritten.digest != task.digest and rewritten.name == task.name
    assert recorded(rewritten.source) == ("batch_size=16", "dim=1024", "shape=(4, 5)")
    assert "the file says 393216" in rewritten.source and "# rows" in rewritten.source  # its own comment kept
    assert len(rewritten.source.splitlines()) == len(TASK.splitlines())  # tracebacks keep their line numbers
    assert apply_settings(task, []) is task and recorded(task.source) == ()


@pytest.mark.parametrize(("setting", "says"), [
    (["dim"], "write NAME=VALUE"),
    (["dim="], "write NAME=VALUE"),
    (["2x=1"], "write NAME=VALUE"),
    (["dim=foo"], "must be a Python literal"),
    (["dim=2**20"], "must be a Python literal"),
    (["nope=1"], "no top-level assignment to nope (it assigns batch_size, dim, shape)"),
    (["dim=1", "dim=2"], "--set dim is given twice"),
])
def test_a_bad_setting_is_one_sentence_naming_the_file(setting: list[str], says: str) -> None:
    with pytest.raises(TaskError) as caught:
        apply_settings(task_from_source(TASK, "relu", "relu.py"), setting)
    assert str(caught.value).startswith("relu.py: ") and says in str(caught.value)


def test_a_name_assigned_twice_is_refused_as_unclear() -> None:
    task = task_from_source(TASK + "dim = 8\n", "relu", "relu.py")
    with pytest.raises(TaskError, match=r"assigns dim 2 times at its top level \(lines 3, 20\)"):
        apply_settings(task, ["dim=4"])


def test_task_check_runs_a_task_too_big_for_the_machine_at_the_size_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert opforge_main(["task", "check", str(TOO_BIG)]) == 2
    assert "with --set NAME=VALUE" in capsys.readouterr().err  # the refusal says how
    assert opforge_main(["task", "check", str(TOO_BIG), "--set", "BATCH=64", "--set", "DIM=4096"]) == 0
    assert "float32[64, 4096]" in capsys.readouterr().out


@pytest.mark.slow
def test_a_run_with_settings_stores_the_rewritten_task_and_says_so(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    code = opforge_main(["optimize", "tiny/softmax", "--set", "BATCH=33", "--runner", "local", "--budget", "1",
                         "--confirm", "0", "--no-archive", "--timing-s", "0.2", "--db", db])
    assert code == 0, capsys.readouterr().err
    assert "(--set BATCH=33)" in capsys.readouterr().out
    store = get_store(db)
    try:
        [run] = store.list_runs()
        stored = store.get_task(run.task_id).task
        assert _globals(stored.source)["BATCH"] == 33 and recorded(stored.source) == ("BATCH=33",)
        assert stored.digest != load_task(ROOT / "benchmarks" / "tiny" / "softmax.py").digest
        assert run_report(store, run.id).to_json()["task_settings"] == ["BATCH=33"]
        [member] = run_report(store, run.id).best
        assert member.speedup is not None  # the seed ran at the size set, correct
    finally:
        store.close()
