"""The adversarial cases that may run beside other work (`beside: true` in their header: a verdict that rests on no
clock, CPU account or deadline that other work on the cores could move: a build and the symbol check, the static
policy, a sandbox, a crash, a timeout, a wrong output), the checks of every case's header, the escapes under each
sandbox, and a secret in the environment. The header's format and the checks are in `cheat_cases.py`; the cases that
run alone are in `test_cheats.py`."""

from __future__ import annotations

import ast
import json
import secrets
from pathlib import Path

import pytest

from cheat_cases import (  # noqa: F401 - lean_zygotes is a fixture
    BASE_CONFIG, CHEATS, CHEATS_DIR, HONEST, HONEST_DIR, SECRET_CANARIES, TASKS_DIR, Canaries, Header, beside,
    check_honest, check_lean, check_refused, describe, lean, lean_zygotes, params,
)
from evaluator import EvalConfig, Status, evaluate, load_candidate, load_task


@pytest.mark.parametrize(
    "header", params(CHEATS_DIR, gpu_marks=False) + params(HONEST_DIR, gpu_marks=False), ids=lambda h: h.path.stem
)
def test_header_is_complete(header: Header):
    assert (TASKS_DIR / f"{header.task}.py").is_file(), f"{header.path.name}: unknown task {header.task!r}"
    assert header.statuses(), f"{header.path.name}: no '# expect:' line"
    header.statuses("expect-without-gpu")  # valid statuses where given
    assert header.one("why"), f"{header.path.name}: no '# why:' line"
    assert (header.one("beside") or "true") in ("true", "false"), f"{header.path.name}: 'beside' is true or false"
    ast.parse(header.path.read_text(encoding="utf-8"), filename=str(header.path))


@pytest.mark.parametrize("path", sorted(TASKS_DIR.glob("*.py")), ids=lambda p: p.stem)
def test_task_file_loads(path: Path):
    task = load_task(path)
    assert task.name == path.stem


@pytest.mark.parametrize("header", beside(CHEATS), ids=lambda h: h.path.stem)
def test_cheat_is_refused(header: Header, monkeypatch: pytest.MonkeyPatch):
    check_refused(header, monkeypatch)


@pytest.mark.parametrize("header", beside(HONEST), ids=lambda h: h.path.stem)
def test_honest_candidate(header: Header, monkeypatch: pytest.MonkeyPatch):
    check_honest(header, monkeypatch)


NETWORK_CHEATS = [h for h in CHEATS if getattr(h, "values", (h,))[0].path.stem == "network_access"]


@pytest.mark.parametrize("header", NETWORK_CHEATS, ids=lambda h: h.path.stem)
def test_network_is_closed_without_bubblewrap_too(header: Header, monkeypatch: pytest.MonkeyPatch):
    """The process sandbox's own network namespace: a machine without bwrap still gives a candidate no network."""
    import dataclasses

    for name, value in SECRET_CANARIES.items():
        monkeypatch.setenv(name, value)
    with Canaries(header) as canaries:
        cfg = dataclasses.replace(header.config("cpu"), sandbox="process")
        result = evaluate(load_task(TASKS_DIR / f"{header.task}.py"), load_candidate(header.path), cfg)
        damage = canaries.damage()
    assert not damage, f"the candidate reached the network: {'; '.join(damage)} (verdict {describe(result)})"


FILE_CHEATS = [h for h in CHEATS if getattr(h, "values", (h,))[0].fields.get("canary-file")]


@pytest.mark.parametrize("header", FILE_CHEATS, ids=lambda h: h.path.stem)
def test_files_are_closed_without_bubblewrap_too(header: Header, monkeypatch: pytest.MonkeyPatch):
    """Landlock in the process sandbox: a machine without bwrap still lets a candidate write nowhere but its own
    working directory (not the repository, the home directory or site-packages)."""
    import dataclasses

    from evaluator.sandbox.landlock import abi_version
    if abi_version() < 1:
        pytest.skip("this kernel has no Landlock: without bubblewrap, a candidate can write where its user can")
    with Canaries(header) as canaries:
        cfg = dataclasses.replace(header.config("cpu"), sandbox="process")
        result = evaluate(load_task(TASKS_DIR / f"{header.task}.py"), load_candidate(header.path), cfg)
        damage = canaries.damage()
    assert not damage, f"the candidate wrote outside its directory: {'; '.join(damage)} (verdict {describe(result)})"


ESCAPE_CHEATS = [h for h in CHEATS
                 if {"canary-socket", "canary-shm", "canary-secret"} & set(getattr(h, "values", (h,))[0].fields)]


@pytest.mark.parametrize("sandbox", ["process", "bwrap"])
@pytest.mark.parametrize("header", ESCAPE_CHEATS, ids=lambda h: h.path.stem)
def test_escape_is_closed_under_each_sandbox(header: Header, sandbox: str, monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path):
    """Nothing outside the evaluation (a local service's socket, another process's IPC object, a secret file, another
    build's cache entry) is reachable from candidate code or from its build, with bubblewrap and without it: the
    process sandbox is what a machine without bwrap gets. A fresh native build cache, so that no build made before
    (by an older, weaker build stage) answers for this one."""
    import dataclasses

    from evaluator.sandbox.bwrap import bwrap_available
    if sandbox == "bwrap" and not bwrap_available():
        pytest.skip("bubblewrap is not installed or cannot make namespaces here (CI installs it)")
    for name, value in SECRET_CANARIES.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPFORGE_NATIVE_BUILD_CACHE", str(tmp_path / "native-builds"))
    with Canaries(header) as canaries:
        cfg = dataclasses.replace(header.config("cpu"), sandbox=sandbox)
        result = evaluate(load_task(TASKS_DIR / f"{header.task}.py"), load_candidate(header.path), cfg)
        damage = canaries.damage(result)
    assert not damage, f"{header.path.name} under {sandbox}: {'; '.join(damage)} (verdict {describe(result)})"
    assert result.status in header.statuses(), (
        f"{header.path.name} under {sandbox} ({header.one('why')}): expected {'|'.join(sorted(header.statuses()))}, "
        f"got {describe(result)}")

def test_secret_from_environment_never_reaches_the_result(monkeypatch: pytest.MonkeyPatch):
    canary = "sk-opforge-canary-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    monkeypatch.setenv("OPFORGE_LLM_API_KEY", canary)
    task = load_task(TASKS_DIR / "relu.py")
    candidate = load_candidate(CHEATS_DIR / "env_secret_leak.py")
    result = evaluate(task, candidate, EvalConfig(device="cpu", **BASE_CONFIG))
    assert result.status != Status.OK, describe(result)
    assert canary not in json.dumps(result.to_json()), "the API key reached the result (reason, log or trials)"


@pytest.mark.parametrize("header", lean(beside(CHEATS)) + lean(beside(HONEST)), ids=lambda h: h.path.stem)
def test_a_native_case_gets_the_same_verdict_from_a_zygote_without_dynamo(header: Header, lean_zygotes,
                                                                          monkeypatch: pytest.MonkeyPatch):
    check_lean(header, lean_zygotes, monkeypatch)
