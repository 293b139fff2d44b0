"""Rendering of the coder's and judge's prompts from the Jinja2 templates in the `prompts` package.

Templates receive plain values (strings, numbers, mappings, or frozen dataclasses such as `evaluator.Timing`: Jinja
reads attributes and keys alike). Every variable a template uses is required; a missing one raises
`PromptError` naming the template and the variable. Numbers that may be unknown are `None` and render as "unknown".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

import prompts as _prompts_pkg

TEMPLATES: tuple[str, ...] = (
    "coder_generate",
    "coder_refine",
    "coder_crossover",
    "judge_repair",
    "judge_optimise",
    "judge_review",
    "coder_translate",
    "native_coder_generate",
    "native_coder_refine",
    "native_coder_crossover",
    "native_coder_translate",
    "native_judge_repair",
    "native_judge_optimise",
    "native_judge_review",
)
BACKENDS: tuple[str, ...] = ("triton", "cuda", "cpp")
NATIVE_BACKEND = "cpp"


class PromptError(ValueError):
    """A prompt could not be rendered: a missing or invalid variable."""


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """What the coder is told about the target GPU; any figure may be unknown (None)."""

    name: str
    sm_count: int | None = None
    memory_bandwidth_gbps: float | None = None
    peak_tflops: float | None = None


def template_for(role: str, backend: str) -> str:
    """The template of a role ("coder_refine", "judge_optimise"...) for a run's backend: native CPU kernels (`cpp`)
    have prompts of their own (`native_*`), Triton and CUDA share theirs. For `coder_translate` the backend is the
    one written (a CPU kernel translated to the GPU, or a GPU kernel to the CPU)."""
    if backend not in BACKENDS:
        raise PromptError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    return f"native_{role}" if backend == NATIVE_BACKEND else role


def _known(value: Any, fmt: str | None = None) -> str:
    """`None` (or an empty string) renders as "unknown"; otherwise `fmt % value`, or str(value)."""
    if value is None or value == "":
        return "unknown"
    return fmt % value if fmt else str(value)


def _fail(message: str) -> None:
    raise PromptError(message)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(_prompts_pkg.__file__).parent)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["known"] = _known
    env.tests["perf_counter"] = lambda name: str(name).startswith("perf.")  # `perf stat` counters in a CPU profile
    env.globals["fail"] = _fail
    return env


_ENV = _environment()


def render(name: str, **context: Any) -> str:
    """Render template `name` (one of TEMPLATES, without `.j2`) with `context`."""
    if name not in TEMPLATES:
        raise PromptError(f"unknown prompt template {name!r}; expected one of {', '.join(TEMPLATES)}")
    try:
        return _ENV.get_template(f"{name}.j2").render(**context)
    except jinja2.UndefinedError as exc:
        raise PromptError(f"prompt template {name}.j2 needs a variable that was not given: {exc.message}") from exc


def messages(system: str, user: str) -> list[dict[str, str]]:
    """The chat messages for one request: a system message and a user message."""
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
