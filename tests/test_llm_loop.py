"""`opforge optimize --coder llm` end to end on CPU: the real CLI, the real openai client over HTTP to a scripted
local server (with faults), the real evaluator, a SQLite store. Correct scripted kernels must end as the run's best,
broken ones as recorded failures, and the recorded cost must equal what the server's usage adds up to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer, Rule, fault, malformed, reply

from store import get_store

ROOT = Path(__file__).resolve().parent.parent
OPFORGE = [sys.executable, "-m", "opforge"]
TASK = ROOT / "tests" / "tasks" / "relu.py"  # 16 x 512: quick under the interpreter
SEED = (ROOT / "benchmarks" / "tiny" / "relu.seed.py").read_text()
LAUNCH = "relu_kernel[grid](x, out, n_elements, BLOCK_SIZE=1024, num_warps=4)"
GOOD_A = SEED.replace(LAUNCH, LAUNCH.replace("1024", "256"))
GOOD_B = SEED.replace(LAUNCH, LAUNCH.replace("1024", "512"))
GOOD_C = SEED.replace(LAUNCH, LAUNCH.replace("num_warps=4", "num_warps=2"))
WRONG = SEED.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 1.0)")
BROKEN = SEED.replace("tl.maximum(x, 0.0)", "tl.no_such_function(x)")
PRICES = {"fake-coder": [3.0, 15.0], "fake-judge": [0.5, 1.5]}

pytestmark = pytest.mark.slow


def code(source: str, **usage: int) -> object:
    return reply(f"Here it is.\n```python\n{source}```", **usage)


def judge(**fields: object) -> object:
    return reply(json.dumps(fields), prompt_tokens=900, completion_tokens=60)


def rules() -> list[Rule]:
    return [
        Rule("You are screening a new GPU kernel", [judge(verdict="clean", concerns=[])]),
        Rule("failed evaluation", [fault(429, retry_after="0.05"), judge(problem="clamps at 1.0", fix="use 0.0")]),
        Rule("GPU performance engineer", [malformed(), judge(bottleneck="launch", method="tiles", plan="256")]),
        Rule("You are writing a fast GPU kernel", [code(WRONG, prompt_tokens=1200, completion_tokens=700),
                                                  code(BROKEN, prompt_tokens=1200, completion_tokens=650)]),
        Rule("You are improving a GPU kernel", [fault(500), code(GOOD_A, prompt_tokens=2000, completion_tokens=800),
                                               code(GOOD_B, prompt_tokens=2100, completion_tokens=800)]),
        Rule("You are combining", [code(GOOD_C, prompt_tokens=3000, completion_tokens=900)]),
    ]


def optimize(server: FakeLLMServer, db: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPFORGE_LLM_API_KEY")}
    return subprocess.run([*OPFORGE, "optimize", str(TASK), "--coder", "llm", "--backend", "triton", "--model", "fake-coder",
                           "--judge-model", "fake-judge", "--llm-base-url", server.base_url, "--prices", str(prices),
                           "--from-scratch", "--tune-per-request", "0", "--timing-s", "0.2", "--runner", "local",
                           "--workers", "2", "--db", db, "--json", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)


def priced(usage: list[tuple[int, int]], model_of: list[str]) -> float:
    return sum((i * PRICES[m][0] + o * PRICES[m][1]) / 1e6 for (i, o), m in zip(usage, model_of))


def answered_models(server: FakeLLMServer) -> list[str]:
    """The model of each request the server answered with a completion (in the order of `server.usage`)."""
    return [r["model"] for r in server.answered]


def test_llm_run_from_scratch_finds_the_scripted_kernels_and_accounts_every_call(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeLLMServer(rules=rules()) as server:
        done = optimize(server, db, tmp_path, "--budget", "5")
        usage, models = list(server.usage), answered_models(server)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # Five distinct kernels are scripted; the crossover needs a correct inspiration, so it may come last or not at all.
    assert 4 <= summary["evaluated"] <= 5 and summary["best"]["status"] == "ok", summary
    assert "LLM $" in done.stderr  # the live display shows the spend

    store = get_store(db)
    try:
        run = store.get_run(summary["run_id"])
        history = store.history(run.id)
        by_source = {sc.candidate.source: sc for sc in history}
        best = store.get_candidate(summary["best"]["candidate_id"])
        # The best is one of the correct scripted kernels, written by the coder model.
        assert best.source in {GOOD_A, GOOD_B, GOOD_C} and best.origin == "llm:fake-coder"
        # The broken ones are recorded failures with their reasons.
        assert by_source[WRONG].evaluation.result.status.value == "incorrect"
        assert by_source[BROKEN].evaluation.result.status.value in ("compile_error", "runtime_error")
        assert by_source[WRONG].candidate.generation == 0 and not by_source[WRONG].candidate.parents
        # Every answered call is recorded once, and the cost is exactly the server's usage at the table's prices.
        calls = store.llm_calls(run.id)
        answered = [c for c in calls if c.outcome != "error"]
        assert len(answered) == len(usage)
        assert sorted((c.tokens_in, c.tokens_out) for c in answered) == sorted(usage)
        assert run.cost_usd == pytest.approx(priced(usage, models), rel=1e-9)
        assert run.cost_usd == pytest.approx(sum(c.cost_usd for c in calls), rel=1e-9)
        assert (run.tokens_in, run.tokens_out) == (sum(i for i, _ in usage), sum(o for _, o in usage))
        # The calls are linked to the candidates they wrote or judged, with the retries they took.
        # Which correct kernel is fastest is a timing. GOOD_B and GOOD_C, the last replies of their rules, are
        # answered again on every later refine or crossover, each answer linked to the one candidate it names: such
        # a best has several writing calls, GOOD_A exactly one.
        writer = [c for c in calls if c.candidate_id == best.id and c.role.startswith("coder:")]
        assert writer and all(c.model == "fake-coder" and c.outcome == "ok" for c in writer), writer
        assert len(writer) == 1 or best.source in (GOOD_B, GOOD_C)
        roles = {c.role for c in calls}
        assert {"coder:generate", "judge:repair", "judge:review"} <= roles
        assert any(c.role == "judge:repair" and c.attempts == 2 for c in calls)  # the 429 was retried
    finally:
        store.close()

    shown = subprocess.run([*OPFORGE, "show", str(summary["run_id"]), "--db", db, "--json"], capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)
    report = json.loads(shown.stdout)
    cost = report["cost"]
    assert cost["usd"] == pytest.approx(run.cost_usd) and cost["accepted"] >= 1
    assert cost["per_accepted"]["usd"] == pytest.approx(run.cost_usd / cost["accepted"])
    assert cost["per_accepted"]["worker_s"] > 0 and cost["wall_s"] > 0
    assert {u["role"] for u in cost["llm_calls"]} == roles


def test_dollar_budget_stops_the_run_and_resume_keeps_counting(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    with FakeLLMServer(rules=rules()) as first:
        stopped = optimize(first, db, tmp_path, "--budget", "20", "--max-usd", "0.02")
        usage_1, models_1 = list(first.usage), answered_models(first)
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    summary = json.loads(stopped.stdout.strip().splitlines()[-1])
    assert "spent the LLM budget of $0.02" in summary["stop_reason"] and summary["evaluated"] < 20

    store = get_store(db)
    try:
        run = store.get_run(summary["run_id"])
        assert run.cost_usd == pytest.approx(priced(usage_1, models_1), rel=1e-9)
        assert run.cost_usd >= 0.02
    finally:
        store.close()

    with FakeLLMServer(rules=rules()) as second:
        resumed = subprocess.run([*OPFORGE, "optimize", "--resume", str(summary["run_id"]), "--db", db, "--json",
                                  "--llm-base-url", second.base_url, "--runner", "local"],
                                 capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert second.requests == []  # the budget was spent already: no further call
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "spent the LLM budget" in json.loads(resumed.stdout.strip().splitlines()[-1])["stop_reason"]


def test_llm_coder_without_an_endpoint_or_a_model_says_what_to_do(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "OPFORGE_LLM_API_KEY", "OPFORGE_LLM_BASE_URL", "OPFORGE_LLM_MODEL")}
    common = [*OPFORGE, "optimize", str(TASK), "--coder", "llm", "--db", f"sqlite:///{tmp_path / 'x.db'}"]
    no_model = subprocess.run(common, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert no_model.returncode == 2 and "needs a model: give --model NAME" in no_model.stderr
    no_endpoint = subprocess.run([*common, "--model", "m"], capture_output=True, text=True, env=env, timeout=120,
                                 cwd=tmp_path)
    assert no_endpoint.returncode == 2 and "--llm-base-url" in no_endpoint.stderr
    assert "Traceback" not in no_model.stderr + no_endpoint.stderr
    unpriced = subprocess.run([*common, "--model", "m", "--llm-base-url", "http://127.0.0.1:9/v1", "--max-usd", "1"],
                              capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert unpriced.returncode == 2 and "--max-usd needs the price of m" in unpriced.stderr
    assert not (tmp_path / "x.db").exists() or "run" not in subprocess.run(
        [*OPFORGE, "runs", "--db", f"sqlite:///{tmp_path / 'x.db'}", "--json"], capture_output=True, text=True,
        timeout=60).stdout.replace('"runs": []', "")
