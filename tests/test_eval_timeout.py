"""A per-evaluation `--timeout` on optimize, bench and submit: a hanging candidate is recorded `timeout` after that
long (not the evaluator's 120 s), and the run's stored configuration keeps the limit for its resumes."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator import Status
from opforge.cli import main as opforge_main
from opforge.run.launch import run_config
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
HANGS = ROOT / "tests" / "cheats" / "hang_forward.py"


@pytest.mark.parametrize("command", ["optimize", "bench", "submit"])
def test_the_commands_that_start_runs_take_a_timeout(command: str, capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        opforge_main([command, "--help"])
    assert "--timeout S" in capsys.readouterr().out


def test_a_timeout_that_is_not_positive_is_refused(tmp_path, capsys) -> None:  # noqa: ANN001
    assert opforge_main(["optimize", "relu", "--timeout", "0", "--db", f"sqlite:///{tmp_path / 'r.db'}"]) == 2
    assert "--timeout must be a positive number of seconds" in capsys.readouterr().err


@pytest.mark.slow
def test_a_hanging_candidate_times_out_after_the_given_timeout(tmp_path, capsys) -> None:  # noqa: ANN001
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    code = opforge_main(["optimize", "relu", "--seed-kernel", str(HANGS), "--runner", "local", "--budget", "1",
                         "--confirm", "0", "--timeout", "5", "--no-archive", "--db", db])
    assert code == 0, capsys.readouterr().err
    store = get_store(db)
    try:
        [run] = store.list_runs()
        cfg = run_config(run).eval
        assert (cfg.compile_timeout_s, cfg.run_timeout_s) == (5.0, 5.0)
        [scored] = store.history(run.id)
        assert scored.evaluation is not None
        result = scored.evaluation.result
        assert result.status == Status.TIMEOUT and "within 5 s" in result.reason, result.reason
    finally:
        store.close()
