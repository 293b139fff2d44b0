"""Built-in benchmark suites and the loader that finds their task files.

A suite is a folder of KernelBench problem files (`NAME.py`). A built-in suite lives in a sub-folder of this
package and may put seed kernels beside a task, one per backend: `NAME.seed.py` (Triton) and `NAME.cpp.py` (native
C/C++ on the CPU), each a candidate defining `ModelNew`. Any other folder of KernelBench files is a suite too; it
simply has no seeds.

The built-in suites are `tiny` (9 small core operators: the quick-start and smoke-test set) and `ops` (the rest of
the operator suite: activations, reductions, norms, matmuls with epilogues, attention, convolution, pooling, losses,
fused blocks and backward passes). `all` is not a folder: it names every built-in task, each folder suite's tasks
in turn (in `list_suites()` order). A task's name is unique across the built-in suites, so `builtin_task("silu")`
finds it wherever it lives; `"ops/silu"` (or `"all/silu"`) says the same thing explicitly.

This module is data plus its loader: it imports nothing from the rest of the project.
"""

from __future__ import annotations

import re
from pathlib import Path

SUITES_DIR = Path(__file__).resolve().parent
SEED_SUFFIX = ".seed.py"
# The seed file beside a task, per backend (the built-in suites have no CUDA seeds yet).
SEED_SUFFIXES: dict[str, str] = {"triton": SEED_SUFFIX, "cpp": ".cpp.py", "cuda": ".cuda.py"}
ALL_SUITE = "all"  # the union of the folder suites, not a folder itself


def _is_task_file(path: Path) -> bool:
    return (
        path.is_file()
        and path.suffix == ".py"
        and path.name != "__init__.py"
        and not path.name.endswith(tuple(SEED_SUFFIXES.values()))
    )


def _natural_key(path: Path) -> list:
    """Sort `2_Foo.py` before `10_Bar.py`, as KernelBench numbers its problems."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.name)]


def _tasks_in(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if _is_task_file(p)), key=_natural_key)


def _folder_suites() -> list[str]:
    """Sub-folders of `SUITES_DIR` that hold at least one task file, sorted by name."""
    return sorted(
        d.name
        for d in SUITES_DIR.iterdir()
        if d.is_dir() and not d.name.startswith(("_", ".")) and d.name != ALL_SUITE and _tasks_in(d)
    )


def list_suites() -> list[str]:
    """Names of the built-in suites: every folder suite, then `all` (their union) when there is any."""
    folders = _folder_suites()
    return [*folders, ALL_SUITE] if folders else []


def suite_tasks(name_or_path: str | Path) -> list[Path]:
    """Task files of a built-in suite (by name) or of a folder (by path), in natural order.

    Files ending in `.seed.py` and `__init__.py` are not tasks. A bare name that is a built-in suite wins
    over a folder of the same name in the working directory; write `./tiny` to mean the folder.
    """
    text = str(name_or_path)
    if isinstance(name_or_path, str) and text == ALL_SUITE:
        return [task for suite in _folder_suites() for task in _tasks_in(SUITES_DIR / suite)]
    if isinstance(name_or_path, str) and text in list_suites():
        return _tasks_in(SUITES_DIR / text)
    folder = Path(name_or_path).expanduser()
    if not folder.is_dir():
        raise ValueError(
            f"{text!r} is neither a built-in suite nor a folder: "
            f"use one of {', '.join(list_suites()) or '(none)'} or the path of a folder of task files."
        )
    tasks = _tasks_in(folder)
    if not tasks:
        raise ValueError(
            f"The folder {folder} holds no task files: put KernelBench problem files (NAME.py) in it."
        )
    return tasks


def seed_for(task_path: Path | str) -> Path | None:
    """The Triton seed kernel `NAME.seed.py` beside the task `NAME.py`, or None when there is none."""
    return seed_path(task_path, "triton")


def seed_path(task: Path | str, backend: str) -> Path | None:
    """The seed kernel for `backend` beside a task, or None when there is none: `triton` -> `NAME.seed.py`, `cpp` ->
    `NAME.cpp.py`, `cuda` -> `NAME.cuda.py`. `task` is a task file's Path, or a string naming a file or a built-in
    task ("relu", "tiny/relu")."""
    if backend not in SEED_SUFFIXES:
        raise ValueError(f"Unknown backend {backend!r}: choose one of {', '.join(SEED_SUFFIXES)}.")
    path = Path(task)
    if isinstance(task, str) and not path.is_file():
        path = builtin_task(task)
    seed = path.with_name(path.stem + SEED_SUFFIXES[backend])
    return seed if seed.is_file() else None


def builtin_task(name: str) -> Path:
    """The built-in task file called `name` (e.g. "softmax"), searched in every suite.

    `"suite/name"` picks a suite explicitly (`"all/name"` is the same as a bare name); a trailing `.py` is accepted.
    """
    wanted = name.removesuffix(".py")
    suite, _, stem = wanted.rpartition("/")
    suite = "" if suite == ALL_SUITE else suite
    matches = [
        task
        for suite_name in _folder_suites()
        if not suite or suite == suite_name
        for task in suite_tasks(suite_name)
        if task.stem == stem
    ]
    if len(matches) == 1:
        return matches[0]
    if matches:
        choices = ", ".join(f"{m.parent.name}/{m.stem}" for m in matches)
        raise ValueError(f"The built-in task name {name!r} is in several suites: name one of {choices}.")
    available = ", ".join(
        f"{suite_name}/{task.stem}" for suite_name in _folder_suites() for task in suite_tasks(suite_name)
    )
    raise ValueError(f"There is no built-in task called {name!r}: choose one of {available}.")
