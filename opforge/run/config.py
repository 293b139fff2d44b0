"""A run's configuration, typed: what the store keeps as `runs.config` (JSON) and reads back as a `RunConfig`.

Everything that decides how a run proposes and evaluates lives here, so that a run resumed by `optimize --resume`,
a job worker or a bench rebuilds exactly the search it was started with. Unknown keys are an error (one sentence),
never silently dropped; configurations written by older versions still read (see `RunConfig.from_json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from evaluator.config import EvalConfig

BACKENDS = ("triton", "cuda", "cpp")           # what a run's kernels are written in (docs/DESIGN.md)
BACKEND_CHOICES = ("auto", *BACKENDS)           # auto: triton where a CUDA device is present, else cpp
CODERS = ("tune", "llm")
LLM_BACKENDS = ("triton", "cuda", "cpp")       # what the LLM coder's prompts can ask for (prompts/, agents/cpu_facts.py)
_NO_ARCHIVE: Mapping[str, Any] = MappingProxyType({"enabled": False})


class RunConfigError(ValueError):
    """A stored run configuration this version cannot read: one sentence naming the run and the key."""


def stored_backend(config: Mapping[str, Any]) -> str:
    """A stored configuration's backend, for listings (never raises: older stores named it in the LLM settings, or
    not at all when their kernels were Triton)."""
    llm = config.get("llm")
    return str(config.get("backend") or (llm.get("backend") if isinstance(llm, Mapping) else None) or "triton")


def resolve_backend(choice: str, cuda_available: bool) -> str:
    """`auto` is Triton where a CUDA device is present, else native CPU kernels (`cpp`); others stand as given."""
    if choice not in BACKEND_CHOICES:
        raise ValueError(f"unknown backend {choice!r}; use one of {', '.join(BACKEND_CHOICES)}")
    if choice == "auto":
        return "triton" if cuda_available else "cpp"
    return choice


@dataclass(frozen=True, slots=True)
class LLMSettings:
    """The LLM agents of a run (never the API key: that comes from the environment of whoever drives the run)."""

    model: str
    judge_model: str | None = None
    base_url: str | None = None
    review: bool = True
    tune_per_request: int = 2
    concurrency: int = 4
    timeout_s: float = 180.0
    retries: int = 4                        # HTTP retries of one request after its first attempt, with backoff
    prices: Mapping[str, tuple[float, float]] = field(default_factory=lambda: MappingProxyType({}))
    from_scratch: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["prices"] = {k: list(v) for k, v in self.prices.items()}
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any], where: str) -> "LLMSettings":
        known = {f.name for f in fields(LLMSettings)}
        values = dict(data)
        values.pop("backend", None)  # before 0.2 the LLM settings named the backend; RunConfig.from_json moves it
        _check_keys(values, known, f"{where}'s LLM settings")
        if "prices" in values:
            values["prices"] = MappingProxyType({k: (float(v[0]), float(v[1])) for k, v in values["prices"].items()})
        return LLMSettings(**values)


@dataclass(frozen=True, slots=True)
class RunConfig:
    coder: str = "tune"                     # tune | llm
    backend: str = "triton"                 # triton | cuda | cpp: resolved when the run is planned, never "auto"
    eval: EvalConfig = EvalConfig()
    islands: int = 2
    seed: int = 0                           # the search's random seed (the starting kernel is the "seed kernel")
    llm: LLMSettings | None = None
    archive: Mapping[str, Any] = field(default_factory=lambda: _NO_ARCHIVE)  # what start_run took from earlier runs
    confirm_top: int = 2                    # the fastest kernels re-measured once the search is over (run/confirm.py)
    confirm_repeats: int = 3                # re-measurements of each (0: the run reports the search's own figures)

    def __post_init__(self) -> None:
        if self.coder not in CODERS:
            raise RunConfigError(f"unknown coder {self.coder!r}; use one of {', '.join(CODERS)}")
        if self.backend not in BACKENDS:
            raise RunConfigError(f"unknown backend {self.backend!r}; use one of {', '.join(BACKENDS)}")
        if self.confirm_top < 0 or self.confirm_repeats < 0:
            raise RunConfigError(f"a confirmation needs 0 or more kernels and re-measurements, not "
                                 f"{self.confirm_top} and {self.confirm_repeats}")
        if self.coder == "llm" and self.llm is None:
            raise RunConfigError("the LLM coder needs its settings (model, endpoint)")
        if self.coder == "llm" and self.backend not in LLM_BACKENDS:
            raise RunConfigError(f"the LLM coder writes {' or '.join(LLM_BACKENDS)} kernels, not {self.backend}; use "
                                 "the tuner (--coder tune) with a native seed kernel")

    def with_archive(self, offer: Mapping[str, Any]) -> "RunConfig":
        return replace(self, archive=MappingProxyType(dict(offer)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"coder": self.coder, "backend": self.backend, "eval": asdict(self.eval),
                               "islands": self.islands, "seed": self.seed, "archive": dict(self.archive),
                               "confirm_top": self.confirm_top, "confirm_repeats": self.confirm_repeats}
        if self.llm is not None:
            out["llm"] = self.llm.to_json()
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any], where: str = "the run") -> "RunConfig":
        """The stored configuration, typed. `where` names it in errors ("run 12"). Older stores wrote no `backend`
        (their kernels were Triton unless the LLM settings said cuda) and no `archive` for runs started before the
        archive existed; both read as they meant. Runs started before confirmation was configurable read with its
        defaults, which is what they ran with."""
        values = dict(data)
        _check_keys(values, {f.name for f in fields(RunConfig)}, where)
        llm = values.get("llm")
        if "backend" not in values:
            values["backend"] = (llm or {}).get("backend") or "triton"
        values["eval"] = _eval_config(values.get("eval") or {}, where)
        if llm is not None:
            values["llm"] = LLMSettings.from_json(llm, where)
        values["archive"] = MappingProxyType(dict(values.get("archive") or _NO_ARCHIVE))
        try:
            return RunConfig(**values)
        except (TypeError, RunConfigError) as exc:
            raise RunConfigError(f"{where}'s configuration cannot be used: {exc}.") from None


def _eval_config(data: Mapping[str, Any], where: str) -> EvalConfig:
    _check_keys(data, {f.name for f in fields(EvalConfig)}, f"{where}'s evaluation settings")
    return EvalConfig(**data)


def _check_keys(data: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise RunConfigError(f"{where} has a configuration key this opforge does not know ({', '.join(unknown)}); "
                             "it was written by another version: upgrade opforge, or start a new run.")
