"""KernelBench problem folders, read as they are: the task files of a folder, with their level and problem number.

Accepted layouts (the path of any of them):

- a KernelBench checkout (`KernelBench/level1/...` under it) or its `KernelBench/` data folder (`level1/`, `level2/`,
  `level3/`, maybe `level4/` and more);
- one level folder (`level2/`), or any folder of problem files.

Problem files are named like `1_Square_matrix_multiplication_.py`: they are ordered by level, then by their leading
number. A file that does not define `class Model` and `get_inputs` at its top level (a helper, a seed kernel, an
`__init__.py`) is not a problem and is skipped; the file is only read, never run.

This module is data plus its loader: it imports nothing from the rest of the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

LEVEL_DIR = re.compile(r"level(\d+)")
LEADING_NUMBER = re.compile(r"(\d+)_")
_MODEL = re.compile(r"^class\s+Model\b", re.MULTILINE)
_GET_INPUTS = re.compile(r"^def\s+get_inputs\b", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem file: `level` from its `levelN` folder and `problem_id` from its leading number (None if absent)."""

    path: Path
    level: int | None
    problem_id: int | None

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def label(self) -> str:
        """`level2/80_Gemm_Max_Subtract_GELU`, or the bare name outside a level folder."""
        return f"level{self.level}/{self.name}" if self.level is not None else self.name


def is_problem_file(path: Path) -> bool:
    """A `.py` file defining `class Model` and `get_inputs` at its top level (read as text, never imported)."""
    if not path.is_file() or path.suffix != ".py" or path.name == "__init__.py" or path.name.endswith(".seed.py"):
        return False
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(_MODEL.search(text) and _GET_INPUTS.search(text))


def level_folders(folder: Path) -> list[tuple[int, Path]]:
    """The `levelN` sub-folders of `folder`, by level."""
    found = []
    for d in folder.iterdir():
        m = LEVEL_DIR.fullmatch(d.name)
        if m and d.is_dir():
            found.append((int(m.group(1)), d))
    return sorted(found)


def problems(path: str | Path, levels: tuple[int, ...] | None = None) -> list[Problem]:
    """The problem files under `path` (see the module's docstring for the layouts), by level and problem number.

    `levels` keeps only those levels (problems outside a level folder are kept only when `levels` is None). Raises
    `ValueError` with one sentence when `path` is not a folder or holds no problem files.
    """
    folder = Path(path).expanduser()
    if folder.is_file():
        found = [_problem(folder)] if is_problem_file(folder) else []
    elif folder.is_dir():
        found = _collect(folder)
    else:
        raise ValueError(f"{folder}: no such folder; give a KernelBench checkout, its KernelBench/ folder, a level "
                         "folder or any folder of problem files.")
    if levels is not None:
        found = [p for p in found if p.level in levels]
    if not found:
        raise ValueError(f"{folder} holds no KernelBench problem files (.py files defining class Model and "
                         "get_inputs)" + (f" at level(s) {', '.join(map(str, levels))}" if levels else "") + ".")
    return sorted(found, key=_order)


def _collect(folder: Path) -> list[Problem]:
    data = folder / "KernelBench"
    if not level_folders(folder) and data.is_dir() and level_folders(data):
        folder = data  # a checkout: its data folder holds the levels
    by_level = level_folders(folder)
    if by_level:
        return [_problem(f, level) for level, d in by_level for f in d.iterdir() if is_problem_file(f)]
    return [_problem(f) for f in folder.iterdir() if is_problem_file(f)]


def _problem(path: Path, level: int | None = None) -> Problem:
    if level is None:
        m = LEVEL_DIR.fullmatch(path.parent.name)
        level = int(m.group(1)) if m else None
    m = LEADING_NUMBER.match(path.name)
    return Problem(path=path, level=level, problem_id=int(m.group(1)) if m else None)


def _order(p: Problem) -> tuple:
    return (p.level is not None, p.level or 0, p.problem_id is None, p.problem_id or 0, p.name.lower())
