"""`opforge optimize --coder llm --backend cpp` end to end on CPU: the real CLI, the real openai client over HTTP to a
scripted local server, the native prompts, the real evaluator building C kernels in its sandboxed build stage, a
SQLite store. The scripted coder writes a kernel that does not compile, a cheat and a correct kernel; the run must end
with the correct one as its best, the other two as recorded failures, and every prompt must be a native one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Rule, reply

from store import get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]
TASK = ROOT / "tests" / "tasks" / "relu.py"
GOOD = (ROOT / "tests" / "honest" / "relu_openmp_c.py").read_text()
BETTER = GOOD.replace("#define BLOCK 4096", "#define BLOCK 1024")
BROKEN = GOOD.replace("out[i] = x[i] > 0.0f", "out[i] = x[i > 0.0f")  # a C syntax error: a compile error
# The cheat: a real native launch on a scratch copy satisfies "a kernel ran", the result comes from torch.relu.
CHEAT = GOOD.replace("""        lib.relu(x, out, x.numel())
        return out""", """        lib.relu(x, out, x.numel())
        return torch.relu(x)""")

pytestmark = pytest.mark.slow


def code(source: str) -> object:
    return reply(f"Here it is.\n```python\n{source}```", prompt_tokens=1500, completion_tokens=600)


def judge(**fields: object) -> object:
    return reply(json.dumps(fields), prompt_tokens=900, completion_tokens=60)


def rules() -> list[Rule]:
    return [
        Rule("You are screening a new native CPU kernel", [judge(verdict="clean", concerns=[])]),
        Rule("native CPU kernel that failed evaluation", [judge(problem="x[i > 0.0f", fix="close the bracket")]),
        Rule("You are a CPU performance engineer", [judge(bottleneck="blocks", method="smaller", plan="BLOCK 1024")]),
        Rule("You are writing a fast native CPU kernel", [code(BROKEN), code(CHEAT), code(GOOD)]),
        Rule("You are improving a native CPU kernel", [code(BETTER)]),
        Rule("You are combining the best ideas of several native CPU kernels", [code(BETTER)]),
    ]


def test_llm_run_writes_native_kernels_and_keeps_the_correct_one(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPFORGE_LLM_API_KEY")}
    env["OPFORGE_NATIVE_BUILD_CACHE"] = str(tmp_path / "native-cache")
    with FakeLLMServer(rules=rules()) as server:
        done = subprocess.run([*OPFORGE, "optimize", str(TASK), "--coder", "llm", "--backend", "cpp",
                               "--model", "fake-coder", "--llm-base-url", server.base_url, "--from-scratch",
                               "--tune-per-request", "0", "--timing-s", "0.2", "--runner", "local", "--workers", "2",
                               "--budget", "4", "--db", db, "--json"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["best"]["status"] == "ok", summary

    # Every request used a native prompt: the CPU's facts and load_c, never Triton's or CUDA's rules.
    assert prompts and all("Target CPU (kernels run natively on it; no GPU)" in p or "native CPU kernel" in p
                           for p in prompts)
    assert not any("@triton.jit" in p or "load_inline" in p for p in prompts)
    assert any("load_c(" in p for p in prompts)

    store = get_store(db)
    try:
        history = store.history(summary["run_id"])
        by_source = {sc.candidate.source: sc for sc in history}
        best = store.get_candidate(summary["best"]["candidate_id"])
        assert best.source in {GOOD, BETTER} and best.origin == "llm:fake-coder"
        assert by_source[best.source].evaluation.result.backend == "cpp"
        assert by_source[BROKEN].evaluation.result.status.value == "compile_error"
        assert by_source[CHEAT].evaluation.result.status.value == "rejected"
        roles = {c.role for c in store.llm_calls(summary["run_id"])}
        assert {"coder:generate", "judge:repair", "judge:review"} <= roles
    finally:
        store.close()
