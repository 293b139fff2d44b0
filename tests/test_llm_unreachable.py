"""An LLM endpoint that does not answer is an error that names it: the run fails (exit 1) with the URL in its last
line, rather than ending "done (the proposer has nothing new to offer)" with exit 0 (a real closed port, the real CLI
in a subprocess, a real SQLite store). `--llm-retries` sets how often each request is tried again before that."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from store import RunStatus, get_store

ROOT = Path(__file__).resolve().parent.parent
TASK = ROOT / "tests" / "tasks" / "relu.py"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.slow
def test_an_unreachable_llm_endpoint_fails_the_run_naming_its_url(tmp_path):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPFORGE_LLM_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout, whatever the environment has installed
    done = subprocess.run([sys.executable, "-m", "opforge", "optimize", str(TASK), "--coder", "llm", "--backend",
                           "triton", "--model", "m", "--llm-base-url", url, "--from-scratch", "--runner", "local",
                           "--budget", "3", "--confirm", "0", "--llm-retries", "1", "--db", db], cwd=tmp_path,
                          env=env, text=True, capture_output=True, timeout=600)
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "failed" in last and url in last and "nothing new to offer" not in done.stderr + done.stdout, last
    assert "after 2 attempts" in done.stderr, done.stderr[-3000:]  # --llm-retries 1: the first and one retry
    store = get_store(db)
    try:
        [run] = store.list_runs()
        assert run.status == RunStatus.FAILED
    finally:
        store.close()


def test_a_negative_retry_count_is_refused_in_one_sentence(tmp_path):
    done = subprocess.run([sys.executable, "-m", "opforge", "optimize", str(TASK), "--coder", "llm", "--model", "m",
                           "--llm-base-url", "http://127.0.0.1:9/v1", "--llm-retries", "-1", "--runner", "local",
                           "--db", f"sqlite:///{tmp_path / 'runs.db'}"], cwd=tmp_path, text=True, capture_output=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr[-3000:]
    assert "--llm-retries must be 0 or more retries, not -1." in done.stderr
