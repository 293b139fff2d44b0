"""Built-in benchmark tasks (KernelBench problem files with optional seed kernels) and their loader."""

from benchmarks.suite import SUITES_DIR, builtin_task, list_suites, seed_for, seed_path, suite_tasks

__all__ = ["SUITES_DIR", "builtin_task", "list_suites", "seed_for", "seed_path", "suite_tasks"]
