"""Rendering a package from the templates in opforge/export/templates/ and writing it without clobbering anything.

The output folder must be new, empty, or an earlier export (it holds `.opforge-export.json`, the list of files that
export wrote): then exactly those files, the build leftovers of pip and setuptools (build/, *.egg-info) and bytecode
caches are removed before the new files are written. Anything else in a non-empty folder stops the export.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jinja2

TEMPLATE_DIR = Path(__file__).resolve().parent / "templates"
MARKER = ".opforge-export.json"


class OutputError(Exception):
    pass


def render(context: dict[str, Any], kernel_sources: dict[str, str], reference_sources: dict[str, str],
           manifest: dict[str, Any]) -> dict[str, str]:
    """Every file of the package, by path relative to the output folder."""
    env = _environment()
    package = context["package"]
    files: dict[str, str] = {}
    for template in sorted(p.relative_to(TEMPLATE_DIR).as_posix() for p in TEMPLATE_DIR.rglob("*.j2")):
        target = template.removesuffix(".j2")
        if target.startswith("package/"):
            target = f"{package}/{target.removeprefix('package/')}"
        files[target] = env.get_template(template).render(**context)
    for kernel_id, source in kernel_sources.items():
        files[f"{package}/kernels/{kernel_id}.py"] = source
    for name, source in reference_sources.items():
        files[f"{package}/reference/{name}.py"] = source
    files[f"{package}/manifest.json"] = json.dumps(manifest, indent=1, allow_nan=True) + "\n"
    files[f"{package}/py.typed"] = ""
    return files


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters["py"] = _py
    env.filters["toml"] = lambda value: json.dumps(str(value))
    return env


def _py(value: Any) -> str:
    """A Python literal: tuples stay tuples (lists become tuples too), floats keep full precision."""
    if isinstance(value, (list, tuple)):
        items = [_py(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, str):
        return json.dumps(value)  # double quotes, like the hand-written code around it
    return repr(value)


def check(out: Path) -> list[str]:
    """Refuse an output folder that holds anything but an earlier export; returns the files that export wrote."""
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out} is a file; give --out a new or empty directory.")
    if not out.exists() or not any(out.iterdir()):
        return []
    marker = out / MARKER
    if not marker.is_file():
        raise OutputError(f"{out} is not empty and is not an earlier opforge export; give --out a new or empty "
                          f"directory (nothing was written).")
    try:
        previous = json.loads(marker.read_text(encoding="utf-8"))
        return [str(p) for p in previous["files"]]
    except (ValueError, KeyError, TypeError):
        raise OutputError(f"{marker} is damaged, so what the earlier export wrote is unknown; remove {out} or give "
                          f"--out another directory.") from None


def prepare(out: Path) -> list[str]:
    """Make `out` ready for a new export; returns the files an earlier export had written there (now removed)."""
    listed = check(out)
    if not listed:
        return []
    marker = out / MARKER
    root = out.resolve()
    for rel in listed:
        path = (out / rel).resolve()
        if root in path.parents and path.is_file():
            path.unlink()
    for leftover in [out / "build", *out.glob("*.egg-info"), *out.rglob("__pycache__"), out / ".pytest_cache"]:
        if leftover.is_dir() and root in leftover.resolve().parents:
            shutil.rmtree(leftover)
    for directory in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(directory.iterdir()):
            directory.rmdir()
    marker.unlink()
    return listed


def write(out: Path, files: dict[str, str], package: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))  # byte for byte: kernel files must hash to their digests
    (out / MARKER).write_text(json.dumps({"package": package, "files": sorted(files)}, indent=1) + "\n",
                              encoding="utf-8")
