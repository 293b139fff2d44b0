"""Translation between GPU and CPU kernels, end to end on CPU: a first run leaves a correct Triton kernel for the relu
task in the store (checked under Triton's interpreter); a second run, `--coder llm --backend cpp`, has the scripted
coder translate it into a native kernel. The translated child is evaluated natively and its lineage names the Triton
kernel as its parent and the translation in its note; a run that refused the archive is offered nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Rule, reply

from opforge.run.translation import translation_sources
from store import get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]
TASK = ROOT / "tests" / "tasks" / "relu.py"
TRITON_SEED = ROOT / "benchmarks" / "tiny" / "relu.seed.py"
NATIVE = (ROOT / "tests" / "honest" / "relu_openmp_c.py").read_text()
FROM_SCRATCH = NATIVE.replace("#define BLOCK 4096", "#define BLOCK 512")

pytestmark = pytest.mark.slow


def code(source: str) -> object:
    return reply(f"```python\n{source}```", prompt_tokens=1500, completion_tokens=600)


def run(tmp_path: Path, db: str, *args: str, base_url: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPFORGE_LLM_API_KEY")}
    env["OPFORGE_NATIVE_BUILD_CACHE"] = str(tmp_path / "native-cache")
    llm = ["--coder", "llm", "--model", "fake-coder", "--llm-base-url", base_url, "--no-judge"] if base_url else []
    done = subprocess.run([*OPFORGE, "optimize", str(TASK), *args, *llm, "--timing-s", "0.2", "--runner", "local",
                           "--db", db, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_cpu_run_translates_the_stores_gpu_kernel_and_records_the_lineage(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = run(tmp_path, db, "--seed-kernel", str(TRITON_SEED), "--budget", "1", "--coder", "tune")
    assert first["best"]["status"] == "ok", first
    store = get_store(db)
    try:
        triton = store.get_candidate(first["best"]["candidate_id"])
        task_id = triton.task_id
        offered = translation_sources(store, task_id, "cpp")
        assert [(t.backend, t.digest) for t in offered] == [("triton", triton.digest)]
        assert translation_sources(store, task_id, "cpp", {"enabled": False}) == []
        assert translation_sources(store, task_id, "cuda") == []  # no native kernel to translate yet
    finally:
        store.close()

    rules = [Rule("You are translating a GPU kernel into a native CPU kernel", [code(NATIVE)]),
             Rule("You are writing a fast native CPU kernel", [code(FROM_SCRATCH)])]
    with FakeLLMServer(rules=rules) as server:
        second = run(tmp_path, db, "--backend", "cpp", "--from-scratch", "--tune-per-request", "0", "--budget", "2",
                     "--workers", "1", base_url=server.base_url)
        prompts = [r["messages"][-1]["content"] for r in server.requests]
    translate = [p for p in prompts if p.startswith("You are translating a GPU kernel")]
    assert len(translate) == 1 and TRITON_SEED.read_text().strip() in translate[0]
    assert "A correct triton kernel for this task" in translate[0]

    store = get_store(db)
    try:
        history = {sc.candidate.source: sc for sc in store.history(second["run_id"])}
        child = history[NATIVE]
        assert child.candidate.parents == (triton.digest,)
        assert child.candidate.note == f"translate triton -> cpp (candidate #{triton.id})"
        assert child.candidate.origin == "llm:fake-coder"
        assert child.evaluation.result.status.value == "ok" and child.evaluation.result.backend == "cpp"
        assert [c.role for c in store.llm_calls(second["run_id"]) if c.candidate_id == child.candidate.id] \
            == ["coder:translate"]
        # The reverse: a GPU run on this task would now be offered the native kernel.
        assert [t.backend for t in translation_sources(store, task_id, "triton")] == ["cpp"]
    finally:
        store.close()


def test_a_resumed_run_does_not_ask_for_the_translation_again(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    first = run(tmp_path, db, "--seed-kernel", str(TRITON_SEED), "--budget", "1", "--coder", "tune")
    assert first["best"]["status"] == "ok", first
    rules = [Rule("You are translating a GPU kernel into a native CPU kernel", [code(NATIVE)]),
             Rule("You are writing a fast native CPU kernel", [code(FROM_SCRATCH)]),
             Rule("You are improving a native CPU kernel", [code(FROM_SCRATCH.replace("512", "1024"))])]

    def translate_prompts(server: FakeLLMServer) -> list[str]:
        return [p for p in (r["messages"][-1]["content"] for r in server.requests)
                if p.startswith("You are translating a GPU kernel")]

    # Interrupted: the time limit ends the first invocation after its first request (the kill of a real run).
    with FakeLLMServer(rules=rules) as server:
        cut = run(tmp_path, db, "--backend", "cpp", "--from-scratch", "--tune-per-request", "0", "--budget", "4",
                  "--workers", "1", "--time-limit-s", "1", base_url=server.base_url)
        assert len(translate_prompts(server)) == 1
    assert "time limit" in cut["stop_reason"] and cut["evaluated"] < 4, cut

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPFORGE_LLM_API_KEY")}
    env["OPFORGE_NATIVE_BUILD_CACHE"] = str(tmp_path / "native-cache")
    with FakeLLMServer(rules=rules) as server:
        resumed = subprocess.run([*OPFORGE, "optimize", "--resume", str(cut["run_id"]), "--llm-base-url",
                                  server.base_url, "--runner", "local", "--workers", "1", "--db", db, "--json"],
                                 cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert server.requests, "the resumed run asked the coder for nothing"
        assert translate_prompts(server) == []  # the store knows the run asked for it already
    store = get_store(db)
    try:
        roles = [c.role for c in store.llm_calls(cut["run_id"])]
        assert roles.count("coder:translate") == 1 and len(roles) > 1
        task_id = store.get_run(cut["run_id"]).task_id
        assert translation_sources(store, task_id, "cpp", run_id=cut["run_id"]) == []
        assert [t.backend for t in translation_sources(store, task_id, "cpp")] == ["triton"]  # another run: offered
    finally:
        store.close()
