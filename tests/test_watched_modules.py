"""The evaluator modules a worker runs are watched for rebinding because they are loaded there, not because someone
listed them (`guards.worker_modules`)."""

from __future__ import annotations

import types

import pytest

import evaluator.worker.loop  # noqa: F401 - the worker's command loop, and with it every module it imports
from evaluator import harness_library
from evaluator.worker import heap
from evaluator.worker import interpreter_gaps
from evaluator.worker import line_flush
from evaluator.worker import guards as guards_module
from evaluator.worker.guards import Guards

# Modules that run in every CPU worker and that the hand-kept list of before missed.
ONCE_MISSED = (line_flush, heap, interpreter_gaps, harness_library)


def _a_definition_of(module: types.ModuleType) -> str:
    """The name of a function or class that `module` defines (a candidate replacing it would change the harness)."""
    return next(name for name, value in vars(module).items()
                if isinstance(value, (types.FunctionType, type)) and value.__module__ == module.__name__)


def test_worker_modules_are_the_packages_loaded_modules_only():
    worker_modules = guards_module.worker_modules
    loaded = {"evaluator": None, "evaluator.worker.heap": None, "evaluatorx": None, "torch": None, "my.evaluator.x": None}
    assert worker_modules(loaded) == ("evaluator", "evaluator.worker.heap")


def test_every_evaluator_module_loaded_at_the_snapshot_is_watched():
    guards = Guards()
    guards.take_snapshot()
    watched = set(guards.watched_modules)
    assert set(guards_module.worker_modules()) <= watched
    assert {"evaluator.worker.loop", "evaluator.worker.guards", "evaluator.worker.timed_calls"} <= watched
    assert {m.__name__ for m in ONCE_MISSED} <= watched
    assert {"torch", "time", "builtins"} <= watched  # the libraries' listed modules stay


@pytest.mark.parametrize("module", ONCE_MISSED, ids=lambda m: m.__name__)
def test_rebinding_a_definition_of_a_worker_module_reads_as_tampering(module: types.ModuleType,
                                                                     monkeypatch: pytest.MonkeyPatch):
    guards = Guards()
    guards.take_snapshot()
    assert guards.tampered() is None
    name = _a_definition_of(module)
    monkeypatch.setattr(module, name, lambda *args, **kwargs: None)
    assert guards.tampered() == f"{module.__name__}.{name}"
    monkeypatch.undo()
    assert guards.tampered() is None


def test_an_explicit_list_is_kept_as_given():
    guards = Guards(watched_modules=("time",))
    guards.take_snapshot()
    assert guards.watched_modules == ("time",)
