"""The trusted evaluator: the vocabulary and the harness that verifies and times untrusted kernels."""

from evaluator.candidate import Candidate, CandidateFileError, load_candidate
from evaluator.config import EvalConfig
from evaluator.evaluate import LocalEvaluator, TaskReport, default_evaluator, evaluate
from evaluator.result import DeviceInfo, EvalResult, Status, Timing
from evaluator.task import Task, TaskError, load_task

__all__ = ["Candidate", "CandidateFileError", "DeviceInfo", "EvalConfig", "EvalResult", "LocalEvaluator", "Status",
           "Task", "TaskError", "TaskReport", "Timing", "default_evaluator", "evaluate", "load_candidate", "load_task"]
