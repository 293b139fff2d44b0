"""The trusted evaluator: the vocabulary and the harness that verifies and times untrusted kernels.

The names below are loaded on first use (PEP 562), so that `import evaluator.sandbox.launch` and the other light
modules do not import torch: a driver can start its workers' zygotes (which import torch themselves) before it pays for its own
torch import, and a script can set the OpenMP environment before libgomp is loaded.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

_WHERE = {
    "Candidate": "evaluator.candidate", "CandidateFileError": "evaluator.candidate",
    "load_candidate": "evaluator.candidate", "EvalConfig": "evaluator.config",
    "LocalEvaluator": "evaluator.driver.evaluate", "TaskReport": "evaluator.verify.task_check",
    "default_evaluator": "evaluator.driver.evaluate", "evaluate": "evaluator.driver.evaluate",
    "DeviceInfo": "evaluator.result", "EvalResult": "evaluator.result", "Status": "evaluator.result",
    "Timing": "evaluator.result", "Task": "evaluator.task", "TaskError": "evaluator.task",
    "load_task": "evaluator.task",
}

__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from evaluator.candidate import Candidate, CandidateFileError, load_candidate
    from evaluator.config import EvalConfig
    from evaluator.driver.evaluate import LocalEvaluator, default_evaluator, evaluate
    from evaluator.verify.task_check import TaskReport
    from evaluator.result import DeviceInfo, EvalResult, Status, Timing
    from evaluator.task import Task, TaskError, load_task


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'evaluator' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)  # not cached here: the package's namespace never changes


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
